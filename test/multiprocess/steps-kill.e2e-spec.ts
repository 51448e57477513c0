import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startTestPostgres, type TestPostgres } from '../support/postgres-server.js';
import { startTestRedis, type TestRedis } from '../support/redis-server.js';
import {
  buildFixture,
  call,
  type FixtureEvent,
  type FixtureProcess,
  killAll,
  pollTask,
  startFixture as startProcess,
  TERMINAL,
} from './processes.js';

/**
 * Steps across a process killed mid-step (issue 39), nothing mocked: separate Node processes (the
 * fixture app), SIGKILLed while their method hangs in its second step. A queue-run tool's job is
 * run again by another worker (BullMQ on Redis, pg-boss on PostgreSQL); a durable in-process
 * tool's task is resumed by another instance once the killed one's lease runs out. Either way the
 * first step is not called again, the second runs once more, the third once, and the task
 * completes with the first step's value from the killed process.
 */

const LEASE_MS = 1_000;

/** Every process started, killed ones too: any live one may take a job or resume a task. */
const all: FixtureProcess[] = [];
const startFixture = async (env: Record<string, string>): Promise<FixtureProcess> => {
  const started = await startProcess(env);
  all.push(started);
  return started;
};

let redis: TestRedis;
let postgres: TestPostgres;

beforeAll(async () => {
  [redis, postgres] = await Promise.all([startTestRedis(), startTestPostgres()]);
  buildFixture('steps');
}, 120_000);

afterAll(async () => {
  await killAll();
  await Promise.all([redis?.stop(), postgres?.stop()]);
});

const stepsOf = (processes: FixtureProcess[], taskId: string): FixtureEvent[] =>
  processes
    .flatMap((process) => process.events)
    .filter((event) => event.event === 'step' && event.taskId === taskId);

/**
 * Starts `tool` on `caller`, kills `victim` (SIGKILL) once it hangs in the second step, starts
 * `replace` (a worker to take the job run again) if given, and checks the task `api` (an instance
 * that lives on) sees complete.
 */
async function killMidStep(
  caller: FixtureProcess,
  victim: FixtureProcess,
  tool: string,
  api: FixtureProcess,
  replace?: () => Promise<FixtureProcess>,
): Promise<void> {
  const answer = await call(caller, 'tools/call', { name: tool, arguments: {} });
  const taskId = (answer.result as { taskId?: string } | undefined)?.taskId;
  if (taskId === undefined) throw new Error(`tools/call ${tool}: ${JSON.stringify(answer)}`);
  await victim.waitFor(
    (event) => event.event === 'step' && event.taskId === taskId && event.step === 'charge',
  );
  await victim.kill();
  if (replace !== undefined) await replace();
  const task = await pollTask(api, taskId, (state) => TERMINAL.has(String(state.status)), 20_000);
  expect(task.status).toBe('completed');
  const result = JSON.parse(
    (task.result as { content: { text: string }[] }).content[0]!.text,
  ) as Record<string, { pid: number }>;
  const steps = stepsOf(all, taskId);
  const ranBy = (step: string) =>
    steps.filter((event) => event.step === step).map((event) => event.pid);
  // fetch: once, by the killed process; charge: there, then once elsewhere; write: once, elsewhere.
  expect(ranBy('fetch')).toEqual([victim.pid]);
  // (Events are gathered process by process, not in time order.)
  const elsewhere = ranBy('charge').filter((pid) => pid !== victim.pid);
  expect(ranBy('charge')).toHaveLength(2);
  expect(elsewhere).toHaveLength(1);
  expect(ranBy('write')).toEqual(elsewhere);
  expect(result.fetched!.pid).toBe(victim.pid);
  expect(result.charged!.pid).toBe(elsewhere[0]);
}

/** Each deployment's environment: its store, and its queue's runner. */
const DEPLOYMENTS: [string, () => Record<string, string>][] = [
  [
    'on Redis: a BullMQ job run again by another worker, a durable call resumed by another instance',
    () => ({ REDIS_URL: redis.url, PREFIX: 'stepskill:' }),
  ],
  [
    'on PostgreSQL alone: a pg-boss job run again by another worker, a durable call resumed',
    () => ({
      POSTGRES_URL: postgres.url,
      PG_SCHEMA: 'stepskill',
      PGBOSS_SCHEMA: 'stepskill_boss',
      RUNNER: 'pg-boss',
    }),
  ],
];

describe('steps are not done twice when a process is killed mid-step', () => {
  it.each(DEPLOYMENTS)(
    '%s',
    async (_name, deployment) => {
      const env = { ...deployment(), LEASE_MS: String(LEASE_MS) };
      // The first instance alone: it makes the schemas the others find.
      const api = await startFixture({ ...env, ROLE: 'api' });
      const [hanging, victimApi] = await Promise.all([
        startFixture({ ...env, ROLE: 'worker', HANG: '1' }),
        startFixture({ ...env, ROLE: 'api', HANG: '1' }),
      ]);
      const worker = () => startFixture({ ...env, ROLE: 'worker' });
      await killMidStep(api, hanging, 'q_steps', api, worker);
      await killMidStep(victimApi, victimApi, 'p_steps', api);
    },
    90_000,
  );
});
