import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { PostgresTaskStore, postgresNotifier } from '../../src/postgres/index.js';
import { RedisTaskStore, redisNotifier } from '../../src/redis/index.js';
import { canStopServer, startTestPostgres, type TestPostgres } from '../postgres-server.js';
import { startTestRedis, type TestRedis } from '../redis-server.js';
import { docFigure } from '../docs/figures.js';
import {
  FAULT_LEASE_MS,
  type FaultInstance,
  faultLog,
  misses,
  PROGRESS_MS,
  runThroughFault,
  startInstance,
} from './harness.js';

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

/** How many ERROR lines of each kind (their first 40 characters). */
function errorKinds(lines: readonly string[]): Record<string, number> {
  const kinds: Record<string, number> = {};
  for (const line of lines) kinds[line.slice(0, 40)] = (kinds[line.slice(0, 40)] ?? 0) + 1;
  return kinds;
}

it('docs/reliability.md states the faults this suite runs', () => {
  const page = 'docs/reliability.md';
  expect(docFigure(page, 'faults.shortOutageMs')).toBe(OUTAGES[0]);
  expect(docFigure(page, 'faults.longOutageMs')).toBe(OUTAGES[1]);
  expect(docFigure(page, 'faults.calls')).toBe(20);
  expect(docFigure(page, 'faults.progressMs')).toBe(PROGRESS_MS);
  expect(docFigure(page, 'faults.leaseMs')).toBe(FAULT_LEASE_MS);
});

let instances: FaultInstance[] = [];
afterEach(async () => {
  for (const instance of instances.splice(0)) await instance.close();
});

describe('Redis: running calls ride out a store outage', () => {
  let redis: TestRedis;
  const prefix = `faults-${process.pid}-${Date.now()}`;
  let run = 0;

  beforeAll(async () => {
    redis = await startTestRedis();
  });
  afterAll(async () => {
    await redis?.stop();
  });

  it.each(OUTAGES)(
    'through a %d ms outage: 20/20 completed with their results, every listener hears it',
    async (outageMs) => {
      const connection = { connection: redis.url, prefix: `${prefix}-${++run}:`, timeoutMs: 1_000 };
      const parts = () => ({
        store: new RedisTaskStore(connection),
        notifier: redisNotifier(connection),
      });
      instances = [await startInstance(parts), await startInstance(parts)];
      const [a, b] = instances as [FaultInstance, FaultInstance];
      const errorsBefore = faultLog.errors.length;
      const { all, faultTookMs } = await runThroughFault(a, b, outageMs, async () => {
        await redis.kill();
        await sleep(outageMs);
        await redis.start();
      });
      expect(misses(all)).toEqual([]);
      expect(all).toHaveLength(20);
      expect(faultTookMs).toBeGreaterThanOrEqual(outageMs);
      console.log(
        `Redis outage of ${outageMs} ms: ${all.length} completed, ` +
          `${faultLog.errors.length - errorsBefore} ERROR lines`,
        errorKinds(faultLog.errors.slice(errorsBefore)),
      );
    },
    180_000,
  );
});

(canStopServer ? describe : describe.skip)(
  'PostgreSQL: running calls ride out a store outage',
  () => {
    let postgres: TestPostgres;
    let run = 0;

    beforeAll(async () => {
      postgres = await startTestPostgres({ fsync: true });
    }, 60_000);
    afterAll(async () => {
      await postgres?.stop();
    });

    it.each(OUTAGES)(
      'through a %d ms outage: 20/20 completed with their results, every listener hears it',
      async (outageMs) => {
        const connection = {
          connection: postgres.url,
          schema: `outage_${++run}`,
          timeoutMs: 1_000,
        };
        const parts = () => ({
          store: new PostgresTaskStore(connection),
          notifier: postgresNotifier(connection),
        });
        instances = [await startInstance(parts), await startInstance(parts)];
        const [a, b] = instances as [FaultInstance, FaultInstance];
        const errorsBefore = faultLog.errors.length;
        const { all, faultTookMs } = await runThroughFault(a, b, outageMs, async () => {
          await postgres.kill();
          await sleep(outageMs);
          await postgres.start();
        });
        expect(misses(all)).toEqual([]);
        expect(all).toHaveLength(20);
        expect(faultTookMs).toBeGreaterThanOrEqual(outageMs);
        console.log(
          `PostgreSQL outage of ${outageMs} ms: ${all.length} completed, ` +
            `${faultLog.errors.length - errorsBefore} ERROR lines`,
          errorKinds(faultLog.errors.slice(errorsBefore)),
        );
      },
      180_000,
    );
  },
);
