import { describe, expect, it } from '@jest/globals';
import { PostgresTaskStore, postgresNotifier } from '../../src/postgres/index.js';
import { RedisTaskStore, redisNotifier } from '../../src/redis/index.js';
import { canStopServer, startTestPostgres, type TestPostgres } from '../support/postgres-server.js';
import { startTestRedis, type TestRedis } from '../support/redis-server.js';
import { docFigure } from '../docs/figures.js';
import { expectRideThrough, FAULT_LEASE_MS, PROGRESS_MS } from './harness.js';

/**
 * A store outage is not a task failure. Two instances share a store (Redis; PostgreSQL); 20 calls
 * run on the first, reporting progress every 100 ms, each followed by a listen stream on one
 * instance or the other; the store stops for 5 s, then for 60 s (Redis: stopped and restarted on
 * its append-only file; PostgreSQL: `pg_ctl stop -m immediate` and a start). Half the calls end
 * while the store is away. Every call completes with its own result, every stream hears it, and
 * the lease (3 s, run out during the outage) fails none of them.
 */

const sleep = (ms: number): Promise<void> => new Promise((done) => setTimeout(done, ms));
const OUTAGES = [5_000, 60_000];

it('docs/reliability.md states the faults this suite runs', () => {
  const page = 'docs/reliability.md';
  expect(docFigure(page, 'faults.shortOutageMs')).toBe(OUTAGES[0]);
  expect(docFigure(page, 'faults.longOutageMs')).toBe(OUTAGES[1]);
  expect(docFigure(page, 'faults.calls')).toBe(20);
  expect(docFigure(page, 'faults.progressMs')).toBe(PROGRESS_MS);
  expect(docFigure(page, 'faults.leaseMs')).toBe(FAULT_LEASE_MS);
});

/** A store of its own for one case, and how to stop it for a while. */
interface OutageStore {
  parts: Parameters<typeof expectRideThrough>[1];
  away(ms: number): Promise<void>;
  stop(): Promise<void>;
}

/** Redis killed and started again on its append-only file. */
async function redisStore(): Promise<OutageStore> {
  const redis: TestRedis = await startTestRedis();
  const connection = { connection: redis.url, prefix: 'faults:', timeoutMs: 1_000 };
  return {
    parts: () => ({ store: new RedisTaskStore(connection), notifier: redisNotifier(connection) }),
    away: async (ms) => {
      await redis.kill();
      await sleep(ms);
      await redis.start();
    },
    stop: () => redis.stop(),
  };
}

/** PostgreSQL stopped with `pg_ctl stop -m immediate` (no checkpoint) and started again. */
async function postgresStore(): Promise<OutageStore> {
  // Every commit synced, as in production: what was answered must survive the stop.
  const postgres: TestPostgres = await startTestPostgres({ fsync: true });
  const connection = { connection: postgres.url, schema: 'outage', timeoutMs: 1_000 };
  return {
    parts: () => ({
      store: new PostgresTaskStore(connection),
      notifier: postgresNotifier(connection),
    }),
    away: async (ms) => {
      await postgres.kill();
      await sleep(ms);
      await postgres.start();
    },
    stop: () => postgres.stop(),
  };
}

const STORES = { Redis: redisStore, PostgreSQL: postgresStore };
/** Each outage on every store (PostgreSQL only on a private server: see canStopServer). */
const casesOf = (outageMs: number) =>
  (Object.keys(STORES) as (keyof typeof STORES)[])
    .filter((name) => name !== 'PostgreSQL' || canStopServer)
    .map((name) => [name, outageMs] as const);

/** One case: two instances on a store of its own, 20 calls through the outage. */
async function rideThrough(name: keyof typeof STORES, outageMs: number): Promise<void> {
  const store = await STORES[name]();
  try {
    await expectRideThrough(`${name}, a ${outageMs} ms outage`, store.parts, outageMs, () =>
      store.away(outageMs),
    );
  } finally {
    await store.stop();
  }
}

// The stores' cases of one outage run at once, each on a server of its own: they spend most of
// their time waiting for the outage to end (one after another, the four took 157 s).
describe.each(OUTAGES)('running calls ride out a %d ms store outage', (outageMs) => {
  it.concurrent.each(casesOf(outageMs))(
    '%s, a %d ms outage: 20/20 completed with their results, every listener hears it',
    rideThrough,
    180_000,
  );
});
