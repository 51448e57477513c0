import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startTestPostgres, type TestPostgres } from '../support/postgres-server.js';
import { startTestRedis, type TestRedis } from '../support/redis-server.js';
import {
  buildFixture,
  call,
  type FixtureProcess,
  getTask,
  killAll,
  startFixture,
} from './processes.js';

/**
 * A `tasks/cancel` answered by one instance stops the method where it runs, on another process,
 * measured from outside: the time from the moment the cancel is sent to the method's `abort`
 * event, as the method reports it (often before the cancel's own answer is back: the notifier
 * carries the change while the answer travels). In-process calls (held by the instance that took the call) and queue-run
 * jobs (on a worker process), on the Redis store with BullMQ, on the PostgreSQL store with
 * BullMQ over Redis, and on PostgreSQL alone with pg-boss. The figures are printed for
 * docs/reliability.md; the test holds a correctness bound (the cancel arrives, within 1 s), not a
 * speed target.
 */

const SAMPLES = 8;
/** A cancel that takes longer than this did not travel by the change feed (a poll would). */
const BOUND_MS = 1_000;

let redis: TestRedis;
let postgres: TestPostgres;
const figures: string[] = [];

beforeAll(async () => {
  [redis, postgres] = await Promise.all([startTestRedis(), startTestPostgres()]);
  buildFixture('cancel');
}, 120_000);

afterAll(async () => {
  await killAll();
  await Promise.all([redis?.stop(), postgres?.stop()]);
  if (figures.length > 0) console.log(`cancel from another instance:\n${figures.join('\n')}`);
});

/**
 * Two instances taking calls and a worker process, on one store. The first starts alone: it makes
 * the schemas (the store's, pg-boss's) that the others then find.
 */
async function deployment(env: Record<string, string>) {
  const first = await startFixture({ ...env, ROLE: 'api' });
  const [second, worker] = await Promise.all([
    startFixture({ ...env, ROLE: 'api' }),
    startFixture({ ...env, ROLE: 'worker' }),
  ]);
  return [first, second, worker] as const;
}

/**
 * Starts `tool` on `a` SAMPLES times, one after the other; each time, once `runner` reports the
 * method running, cancels through `b` and reads how long after the cancel was sent `runner`
 * reported the abort. Returns the delays in ms, sorted.
 */
async function measure(
  a: FixtureProcess,
  b: FixtureProcess,
  runner: FixtureProcess,
  tool: string,
): Promise<number[]> {
  const delays: number[] = [];
  for (let i = 0; i < SAMPLES; i++) {
    const answer = await call(a, 'tools/call', { name: tool, arguments: {} });
    const taskId = (answer.result as { taskId?: string } | undefined)?.taskId;
    if (taskId === undefined) throw new Error(`tools/call ${tool}: ${JSON.stringify(answer)}`);
    await runner.waitFor((event) => event.event === 'run' && event.taskId === taskId);
    const sentAt = Date.now();
    const cancel = await call(b, 'tasks/cancel', { taskId });
    expect(cancel.error).toBeUndefined();
    const aborted = await runner.waitFor(
      (event) => event.event === 'aborted' && event.taskId === taskId,
      5_000,
    );
    delays.push(aborted.at! - sentAt);
    expect((await getTask(a, taskId)).status).toBe('cancelled');
  }
  return delays.sort((x, y) => x - y);
}

/** "p50 X ms, max Y ms (n)", and the bound checked. */
function record(what: string, delays: number[]): void {
  const p50 = delays[Math.floor(delays.length / 2)]!;
  const max = delays[delays.length - 1]!;
  figures.push(`  ${what}: p50 ${p50} ms, max ${max} ms (${delays.length} cancels)`);
  expect(max).toBeLessThan(BOUND_MS);
}

describe('a cancel on one instance stops the method on another process', () => {
  it('on the Redis store: an in-process call and a BullMQ job', async () => {
    const [a, b, worker] = await deployment({ REDIS_URL: redis.url, PREFIX: 'cancel:' });
    record('Redis store, in-process call', await measure(a, b, a, 'p_until_cancel'));
    record('Redis store, BullMQ job', await measure(a, b, worker, 'q_until_cancel'));
  }, 60_000);

  it('on the PostgreSQL store: an in-process call and a BullMQ job', async () => {
    const [a, b, worker] = await deployment({
      POSTGRES_URL: postgres.url,
      PG_SCHEMA: 'cancel',
      REDIS_URL: redis.url,
      PREFIX: 'cancelpg:',
    });
    record('PostgreSQL store, in-process call', await measure(a, b, a, 'p_until_cancel'));
    record('PostgreSQL store, BullMQ job', await measure(a, b, worker, 'q_until_cancel'));
  }, 60_000);

  it('on PostgreSQL alone: an in-process call and a pg-boss job', async () => {
    const [a, b, worker] = await deployment({
      POSTGRES_URL: postgres.url,
      PG_SCHEMA: 'cancelpb',
      PGBOSS_SCHEMA: 'cancelpb_boss',
      RUNNER: 'pg-boss',
    });
    record('PostgreSQL alone, in-process call', await measure(a, b, a, 'p_until_cancel'));
    record('PostgreSQL alone, pg-boss job', await measure(a, b, worker, 'q_until_cancel'));
  }, 60_000);
});
