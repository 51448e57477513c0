/**
 * `attachTasks(app, strategy)` (nestjs-mcp-tasks/rekog) refuses a rekog app set up wrong, naming
 * the fix, before any request could meet the mistake: each case is a real @rekog/mcp-nest 2.0.5
 * app in a child process (test/rekog/fixture/misconfigured.ts, one mistake each by MISCONFIGURED)
 * that prints what was thrown as one JSON line and exits with code 1. The app set up right starts,
 * so each refusal is its mistake's alone.
 *
 * As in rekog.e2e-spec.ts, nothing here imports rekog (Jest on Node 20 cannot load it): the
 * fixture is compiled once for the rekog specs (./harness.ts).
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { type Misconfiguration, MISCONFIGURATIONS } from './fixture/misconfigurations.js';
import { buildRekogApps, FIXTURES, ROOT } from './harness.js';

const MISCONFIGURED_ENTRY = join(FIXTURES, 'misconfigured.js');

/** How a run of the fixture ended, and the JSON line it printed (see the fixture). */
interface Outcome {
  code: number | null;
  printed: {
    stage?: string;
    name?: string;
    tasksConfigError?: boolean;
    message?: string;
    started?: boolean;
  };
  /** All it wrote (stdout, then stderr). */
  output: string;
}

/** Runs the fixture with MISCONFIGURED=`kind` to its end (killed after 20 s). */
function runFixture(kind: Misconfiguration): Promise<Outcome> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [MISCONFIGURED_ENTRY],
      { cwd: ROOT, env: { ...process.env, MISCONFIGURED: kind, NO_COLOR: '1' }, timeout: 20_000 },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === 'number' ? error.code : null;
        const last = stdout.trim().split('\n').at(-1) ?? '';
        let printed: Outcome['printed'] = {};
        try {
          printed = JSON.parse(last) as Outcome['printed'];
        } catch {
          // Left empty: the expectations on it fail, and `output` says why.
        }
        resolve({ code, printed, output: `${stdout}${stderr}` });
      },
    );
  });
}

/** Each kind's run, started together once the fixture is built (each boots a whole app). */
const runs = new Map<Misconfiguration, Promise<Outcome>>();
/** How the run of `kind` ended. */
const outcomeOf = (kind: Misconfiguration): Promise<Outcome> => runs.get(kind)!;

/**
 * `seen` of a run, with the run's output beside it where the fixture printed no JSON line, so
 * that a failure shows what was written instead (Nest's log of an error the fixture never saw).
 */
function shown(outcome: Outcome, seen: Record<string, unknown>): Record<string, unknown> {
  return Object.keys(outcome.printed).length === 0 ? { ...seen, output: outcome.output } : seen;
}

/** How a run ended, to compare with REFUSED_BY_ATTACH_TASKS. */
function refusal(outcome: Outcome): Record<string, unknown> {
  const { stage, name, tasksConfigError } = outcome.printed;
  return shown(outcome, { code: outcome.code, stage, name, tasksConfigError });
}

/** A refusal by attachTasks: a TasksConfigError, and the process ended with code 1. */
const REFUSED_BY_ATTACH_TASKS = {
  code: 1,
  stage: 'attachTasks',
  name: 'TasksConfigError',
  tasksConfigError: true,
};

beforeAll(async () => {
  await buildRekogApps([MISCONFIGURED_ENTRY]);
  for (const kind of MISCONFIGURATIONS) runs.set(kind, runFixture(kind));
}, 300_000);

afterAll(async () => {
  // Every run ends by itself (or is killed at its timeout); wait so none outlives the suite.
  await Promise.all(runs.values());
});

describe('attachTasks refuses a misconfigured rekog app with a TasksConfigError that names the fix (real processes)', () => {
  it('the app set up right starts (the fixture’s cases differ from it by their one mistake)', async () => {
    const outcome = await outcomeOf('none');
    expect(shown(outcome, { code: outcome.code, printed: outcome.printed })).toEqual({
      code: 0,
      printed: { started: true },
    });
  });

  it('a strategy with only rekog’s StreamableHttpTransport: the message says to construct a TaskHttpTransport from nestjs-mcp-tasks/rekog', async () => {
    const outcome = await outcomeOf('plain-transport');
    expect(refusal(outcome)).toEqual(REFUSED_BY_ATTACH_TASKS);
    const message = outcome.printed.message ?? outcome.output;
    expect(message).toContain('no TaskHttpTransport');
    expect(message).toContain('new TaskHttpTransport(');
    expect(message).toContain('nestjs-mcp-tasks/rekog');
    expect(message).toContain('StreamableHttpTransport');
  });

  it('an app without a TasksModule: the message says to import TasksModule.forRoot({ path: false }) in the root module', async () => {
    const outcome = await outcomeOf('no-tasks-module');
    expect(refusal(outcome)).toEqual(REFUSED_BY_ATTACH_TASKS);
    const message = outcome.printed.message ?? outcome.output;
    expect(message).toContain('no TasksModule');
    expect(message).toContain('TasksModule.forRoot({ path: false');
    expect(message).toContain('root module');
  });

  it.each<[string, Misconfiguration, string]>([
    ['another name', 'other-name', 'rekog-config-tasks 0.1.0'],
    ['another version', 'other-version', 'rekog-config 0.2.0'],
    ['serverInfo left to its default', 'default-server-info', 'nestjs-mcp-tasks 0.1.0'],
  ])(
    'a TasksModule serverInfo that is not the strategy’s (%s): the message names both and the serverInfo to pass',
    async (_what, kind, theirs) => {
      const outcome = await outcomeOf(kind);
      expect(refusal(outcome)).toEqual(REFUSED_BY_ATTACH_TASKS);
      const message = outcome.printed.message ?? outcome.output;
      expect(message).toContain(`serverInfo (${theirs})`);
      expect(message).toContain('(rekog-config 0.1.0)');
      expect(message).toContain('serverInfo: { name: "rekog-config", version: "0.1.0" }');
      expect(message).toContain('TasksModule.forRoot');
    },
  );

  it('an app initialized before attachTasks (its controller route registered): the message says to call attachTasks before app.init() and app.listen()', async () => {
    const outcome = await outcomeOf('initialized');
    expect(refusal(outcome)).toEqual(REFUSED_BY_ATTACH_TASKS);
    const message = outcome.printed.message ?? outcome.output;
    expect(message).toContain('initialized already');
    expect(message).toContain('MisconfiguredMcpController');
    expect(message).toContain('before app.init(), app.listen()');
  });

  it('a TaskHttpTransport whose strategy starts without attachTasks: app.startAllMicroservices() rejects, naming attachTasks', async () => {
    const outcome = await outcomeOf('not-attached');
    expect(refusal(outcome)).toMatchObject({ code: 1, stage: 'startAllMicroservices' });
    const message = outcome.printed.message ?? outcome.output;
    expect(message).toContain('TaskHttpTransport');
    expect(message).toContain('attachTasks(app, strategy)');
    expect(message).toContain('nestjs-mcp-tasks/rekog');
    expect(message).toContain('before the strategy starts');
  });
});
