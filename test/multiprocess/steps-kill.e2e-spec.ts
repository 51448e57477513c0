import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Redis } from 'ioredis';
import pg from 'pg';
import { taskJobId } from '../../src/pg-boss/pg-boss-task-queue.js';
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

/**
 * A queue job that parks (issue 39, item 2) leaves its worker: the worker can die, and every other
 * worker with it, and a worker started later runs the job on from its journal when the sleep ends
 * or the answer comes.
 */
describe('a parked queue job outlives every worker', () => {
  /** Clients of the queues' Redis and PostgreSQL, to see a job parked there. */
  let queueRedis: Redis | undefined;
  let queuePg: pg.Client | undefined;

  beforeAll(async () => {
    queueRedis = new Redis(redis.url);
    queuePg = new pg.Client({ connectionString: postgres.url });
    await queuePg.connect();
  });

  afterAll(async () => {
    queueRedis?.disconnect();
    await queuePg?.end();
  });

  it.each(DEPLOYMENTS.map(([name, deployment]) => [name.split(':')[0]!, deployment] as const))(
    '%s',
    async (_name, deployment) => {
      const env: Record<string, string> = {
        ...deployment(),
        PREFIX: 'parkkill:',
        PG_SCHEMA: 'parkkill',
      };
      if (env.PGBOSS_SCHEMA !== undefined) env.PGBOSS_SCHEMA = 'parkkill_boss';
      const api = await startFixture({ ...env, ROLE: 'api' });
      const first = await startFixture({ ...env, ROLE: 'worker' });
      const start = async (tool: string, args: Record<string, unknown> = {}) => {
        const answer = await call(api, 'tools/call', { name: tool, arguments: args });
        const taskId = (answer.result as { taskId?: string } | undefined)?.taskId;
        if (taskId === undefined) throw new Error(`tools/call ${tool}: ${JSON.stringify(answer)}`);
        return taskId;
      };
      /**
       * Whether the task's job waits in its queue, parked: the method reports `parked` as it
       * leaves, a moment before its worker moves the job (killed in between, the job would run
       * again as a restart once BullMQ finds it stalled, or pg-boss's expiry).
       */
      const inQueue = async (taskId: string): Promise<boolean> => {
        if (env.RUNNER !== 'pg-boss') {
          return (await queueRedis!.zscore('parkkill:bull:work:delayed', taskId)) !== null;
        }
        const { rows } = await queuePg!.query<{ state: string }>(
          'SELECT state FROM parkkill_boss.job WHERE id = $1',
          [taskJobId(taskId)],
        );
        return rows[0]?.state === 'retry';
      };
      const parked = async (worker: FixtureProcess, taskId: string): Promise<void> => {
        await worker.waitFor((event) => event.event === 'parked' && event.taskId === taskId);
        const end = Date.now() + 5_000;
        while (!(await inQueue(taskId))) {
          if (Date.now() > end) throw new Error(`the job of ${taskId} never parked in its queue`);
          await new Promise((resolve) => setTimeout(resolve, 10));
        }
      };

      // A 3 s sleep parks; its worker (the only one) is killed; one started later wakes it.
      const calledAt = Date.now();
      const nap = await start('q_nap', { ms: 3_000 });
      await parked(first, nap);
      // An input request parks too, on the same worker.
      const ask = await start('q_ask_park');
      await parked(first, ask);
      await first.kill();
      const second = await startFixture({ ...env, ROLE: 'worker' });
      // Answered after the worker that asked died: the job wakes on the new one.
      const answeredAt = Date.now();
      const update = await call(api, 'tasks/update', {
        taskId: ask,
        inputResponses: { name: { action: 'accept', content: { name: 'Ada' } } },
      });
      expect(update.error).toBeUndefined();
      const greeted = await pollTask(api, ask, (task) => TERMINAL.has(String(task.status)));
      const greetMs = Date.now() - answeredAt;
      expect(greeted.status).toBe('completed');
      expect((greeted.result as { content: { text: string }[] }).content[0]!.text).toBe(
        `hello Ada from ${second.pid}`,
      );
      const napped = await pollTask(api, nap, (task) => TERMINAL.has(String(task.status)));
      const napMs = Date.now() - calledAt;
      expect(napped.status).toBe('completed');
      const { before, after } = JSON.parse(
        (napped.result as { content: { text: string }[] }).content[0]!.text,
      ) as Record<string, { at: number; pid: number }>;
      expect(before!.pid).toBe(first.pid);
      expect(after!.pid).toBe(second.pid);
      expect(after!.at - before!.at).toBeGreaterThanOrEqual(3_000);
      const steps = stepsOf(all, nap);
      expect(steps.filter((event) => event.step === 'before')).toHaveLength(1);
      console.log(
        `parked queue job (${_name}): answer to completed ${greetMs} ms; a 3,000 ms sleep ` +
          `completed ${napMs} ms after the call`,
      );
    },
    60_000,
  );
});
