import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
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
      await expectRideThrough(`Redis, a ${outageMs} ms outage`, parts, outageMs, async () => {
        await redis.kill();
        await sleep(outageMs);
        await redis.start();
      });
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
        await expectRideThrough(
          `PostgreSQL, a ${outageMs} ms outage`,
          parts,
          outageMs,
          async () => {
            await postgres.kill();
            await sleep(outageMs);
            await postgres.start();
          },
        );
      },
      180_000,
    );
  },
);
