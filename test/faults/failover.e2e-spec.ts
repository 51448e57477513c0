import { afterAll, describe, expect, it } from '@jest/globals';
import { PostgresTaskStore, postgresNotifier } from '../../src/postgres/index.js';
import { RedisTaskStore, redisNotifier } from '../../src/redis/index.js';
import { startPostgresWithReplica } from '../support/servers/postgres-replica.mjs';
import { startRedisSentinelSet } from '../support/servers/redis-sentinel.mjs';
import { startTcpProxy } from '../support/servers/tcp-proxy.mjs';
import { expectRideThrough } from './harness.js';

/**
 * Real failovers under running calls. Redis: a primary, a replica and a Sentinel; the apps reach
 * Redis through the Sentinel (`connection: { sentinels, name }`), and the primary is killed while
 * 20 calls run and report progress every 100 ms. PostgreSQL: a primary and a streaming replica;
 * the apps reach the database through one address (a TCP proxy, as a managed cluster's writer
 * endpoint), the primary is killed, the replica promoted with `pg_ctl promote` and the address
 * pointed at it. Every call completes with its own result and every listener hears it.
 */

/** Servers started here and not stopped: halted should the process exit first. */
const running = new Set<() => void>();
const track = (halt: () => void): void => {
  running.add(halt);
};
process.once('exit', () => {
  for (const halt of running) halt();
});

afterAll(() => {
  for (const halt of running) halt();
});

/** How long the calls plan for the failover (half of them end within it). */
const FAILOVER_MS = 4_000;

describe('failovers under running calls', () => {
  it('Redis Sentinel: the primary killed, the replica promoted; 20/20 completed, every listener hears it', async () => {
    const set = await startRedisSentinelSet({ name: 'faults-e2e', track });
    try {
      const connection = {
        connection: { sentinels: set.sentinels, name: set.name },
        prefix: `sentinel-${process.pid}:`,
        timeoutMs: 1_000,
      };
      const parts = () => ({
        store: new RedisTaskStore(connection),
        notifier: redisNotifier(connection),
      });
      await expectRideThrough('Redis Sentinel failover', parts, FAILOVER_MS, async () => {
        await set.killPrimary();
        const primary = await set.waitForFailover();
        expect(primary.port).toBe(set.replicaPort);
      });
    } finally {
      await set.stop();
    }
  }, 120_000);

  it('PostgreSQL: the primary killed, the streaming replica promoted behind one address; 20/20 completed, every listener hears it', async () => {
    const pair = await startPostgresWithReplica({ name: 'faults-e2e', track });
    const proxy = await startTcpProxy({ targetPort: pair.primary.port });
    try {
      const url = new URL(pair.primary.url);
      url.port = String(proxy.port);
      const connection = { connection: url.toString(), schema: 'failover', timeoutMs: 1_000 };
      const parts = () => ({
        store: new PostgresTaskStore(connection),
        notifier: postgresNotifier(connection),
      });
      await expectRideThrough('PostgreSQL promotion', parts, FAILOVER_MS, async () => {
        await pair.killPrimary();
        await pair.promote();
        proxy.retarget(pair.replica.port);
        proxy.dropAll();
      });
    } finally {
      await proxy.close();
      await pair.stop();
    }
  }, 120_000);
});
