import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { cpSync, existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { mcpRequest, post } from '../support/raw.js';
import type { JsonRpcMessage } from '../support/wire.js';

/**
 * The processes of the multi-process tests: the fixture app (test/multiprocess/fixture/main.ts)
 * compiled once per spec file into .build/multiprocess-<name>, each process started with `node`, its stdout read as
 * one JSON event per line, stopped with SIGTERM or killed with SIGKILL.
 */

const ROOT = resolve(process.cwd());
/** The compiled fixture this spec file starts (set by buildFixture). */
let ENTRY = '';

/**
 * Compiles the fixture with the sources it imports (about 7 s) into `.build/multiprocess-<name>`:
 * a directory per spec file, as Jest may run two of them at once.
 */
export function buildFixture(name: string): void {
  const outDir = join(ROOT, `.build/multiprocess-${name}`);
  execFileSync(
    process.execPath,
    [
      join(ROOT, 'node_modules/typescript/bin/tsc'),
      '-p',
      'test/multiprocess/tsconfig.json',
      // Emit only: the same files in half the time (npm run typecheck checks the types).
      '--noCheck',
      '--outDir',
      outDir,
    ],
    { cwd: ROOT, stdio: 'inherit' },
  );
  // The PostgreSQL store reads its schema's SQL beside its module, as in the package's build.
  cpSync(join(ROOT, 'src/postgres/schema'), join(outDir, 'src/postgres/schema'), {
    recursive: true,
  });
  ENTRY = join(outDir, 'test/multiprocess/fixture/main.js');
  if (!existsSync(ENTRY)) throw new Error(`the fixture did not build: no ${ENTRY}`);
}

/** One line a fixture process printed. */
export interface FixtureEvent {
  event: string;
  pid: number;
  tool?: string;
  taskId?: string;
  port?: number;
  at?: number;
  [key: string]: unknown;
}

export interface FixtureProcess {
  readonly child: ChildProcess;
  readonly pid: number;
  /** The HTTP port of an `api` process. */
  readonly port: number;
  readonly events: FixtureEvent[];
  /** Resolves with the first event (past or future) that `match` accepts. */
  waitFor(match: (event: FixtureEvent) => boolean, timeoutMs?: number): Promise<FixtureEvent>;
  /** SIGKILL, then waits for the exit. */
  kill(): Promise<void>;
  /** SIGTERM (the app's shutdown hooks run), then waits for the exit. */
  stop(): Promise<void>;
}

const running = new Set<FixtureProcess>();

/** Starts a fixture process and resolves once it is ready. */
export async function startFixture(env: Record<string, string>): Promise<FixtureProcess> {
  const child = spawn(process.execPath, [ENTRY], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const events: FixtureEvent[] = [];
  const waiters = new Set<() => void>();
  let exited = false;
  let buffered = '';
  child.stdout!.setEncoding('utf8');
  child.stdout!.on('data', (chunk: string) => {
    buffered += chunk;
    let newline: number;
    while ((newline = buffered.indexOf('\n')) >= 0) {
      const line = buffered.slice(0, newline);
      buffered = buffered.slice(newline + 1);
      if (!line.startsWith('{')) continue;
      try {
        events.push(JSON.parse(line) as FixtureEvent);
      } catch {
        continue;
      }
      for (const waiter of waiters) waiter();
    }
  });
  const exit = new Promise<void>((resolveExit) =>
    child.once('exit', () => {
      exited = true;
      for (const waiter of waiters) waiter();
      resolveExit();
    }),
  );
  const waitFor = (match: (event: FixtureEvent) => boolean, timeoutMs = 15_000) =>
    new Promise<FixtureEvent>((resolveEvent, reject) => {
      const check = (): boolean => {
        const found = events.find(match);
        if (found) {
          finish();
          resolveEvent(found);
          return true;
        }
        if (exited) {
          finish();
          reject(new Error(`fixture ${child.pid} exited before the event`));
          return true;
        }
        return false;
      };
      const timer = setTimeout(() => {
        finish();
        reject(new Error(`fixture ${child.pid}: no such event in ${timeoutMs} ms`));
      }, timeoutMs);
      const finish = (): void => {
        clearTimeout(timer);
        waiters.delete(waiter);
      };
      const waiter = (): void => void check();
      if (!check()) waiters.add(waiter);
    });
  const signal = async (name: NodeJS.Signals): Promise<void> => {
    if (!exited) child.kill(name);
    await exit;
    running.delete(fixture);
  };
  const ready = await waitFor((event) => event.event === 'ready', 30_000);
  const fixture: FixtureProcess = {
    child,
    pid: child.pid!,
    port: ready.port ?? 0,
    events,
    waitFor,
    kill: () => signal('SIGKILL'),
    stop: () => signal('SIGTERM'),
  };
  running.add(fixture);
  return fixture;
}

/** Kills every fixture process still running (afterAll). */
export async function killAll(): Promise<void> {
  await Promise.all([...running].map((fixture) => fixture.kill()));
}

/** One MCP request to an `api` process as `principal`; the JSON-RPC answer. */
export async function call(
  api: FixtureProcess,
  method: string,
  params: Record<string, unknown>,
  principal = 'alice',
): Promise<JsonRpcMessage> {
  const answer = await post(
    `http://127.0.0.1:${api.port}/mcp`,
    mcpRequest(method, params, { principal }),
  );
  if (answer.json === undefined) throw new Error(`HTTP ${answer.status}: ${answer.text}`);
  return answer.json;
}

/** The task's state as `tasks/get` answers it. */
export async function getTask(
  api: FixtureProcess,
  taskId: string,
  principal = 'alice',
): Promise<Record<string, unknown>> {
  const answer = await call(api, 'tasks/get', { taskId }, principal);
  if (answer.error) throw new Error(`tasks/get: ${JSON.stringify(answer.error)}`);
  return answer.result as Record<string, unknown>;
}

/** Polls `tasks/get` until `until` holds (every 50 ms); the state that satisfied it. */
export async function pollTask(
  api: FixtureProcess,
  taskId: string,
  until: (task: Record<string, unknown>) => boolean,
  timeoutMs = 15_000,
): Promise<Record<string, unknown>> {
  const deadline = Date.now() + timeoutMs;
  let last: Record<string, unknown> | undefined;
  while (Date.now() < deadline) {
    last = await getTask(api, taskId);
    if (until(last)) return last;
    await new Promise((resolveSleep) => setTimeout(resolveSleep, 50));
  }
  throw new Error(`task never reached the state; last ${JSON.stringify(last)}`);
}

export const TERMINAL = new Set(['completed', 'failed', 'cancelled']);
