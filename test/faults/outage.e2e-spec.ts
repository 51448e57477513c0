import { describe, expect, it } from '@jest/globals';
import { PostgresTaskStore, postgresNotifier } from '../../src/postgres/index.js';
import { RedisTaskStore, redisNotifier } from '../../src/redis/index.js';
import { canStopServer, startTestPostgres, type TestPostgres } from '../postgres-server.js';
import { startTestRedis, type TestRedis } from '../redis-server.js';
import { docFigure } from '../docs/figures.js';
import { expectRideThrough, FAULT_LEASE_MS, PROGRESS_MS } from './harness.js';

/**
 * A store outage is not a task failure. Two instances share a store (Redis; PostgreSQL); 20 calls
 * run on the first, reporting progress every 100 ms, each followed by a listen stream on one
 * instance or the other; the store stops for 5 s, then for 60 s (Redis: killed and restarted on
 * its append-only file; PostgreSQL: `pg_ctl stop -m immediate` and a start). Half the calls end
 * while the store is away. Every call completes with its own result, every stream hears it, and
 * the lease (2 s, run out during the outage) fails none of them.
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
const CASES = (Object.keys(STORES) as (keyof typeof STORES)[])
  // These tests stop and start PostgreSQL: only a private one (see canStopServer).
  .filter((name) => name !== 'PostgreSQL' || canStopServer)
  .flatMap((name) => OUTAGES.map((outageMs) => [name, outageMs] as const));

// The cases run at once, each on a server of its own: they spend most of their time waiting for
// their outage to end, and one after another they would take two and a half minutes.
describe('running calls ride out a store outage', () => {
  it.concurrent.each(CASES)(
    '%s, a %d ms outage: 20/20 completed with their results, every listener hears it',
    async (name, outageMs) => {
      const store = await STORES[name]();
      try {
        await expectRideThrough(`${name}, a ${outageMs} ms outage`, store.parts, outageMs, () =>
          store.away(outageMs),
        );
      } finally {
        await store.stop();
      }
    },
    180_000,
  );
});
