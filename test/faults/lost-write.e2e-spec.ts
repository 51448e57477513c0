import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { InMemoryTaskStore, type TaskStore } from '../../src/entries/store.js';
import { PostgresTaskStore, postgresNotifier } from '../../src/postgres/index.js';
import { RedisTaskStore, redisNotifier } from '../../src/redis/index.js';
import { docFigure } from '../docs/figures.js';
import { eventually } from '../support/sse.js';
import { startTestPostgres, type TestPostgres } from '../support/postgres-server.js';
import { startTestRedis, type TestRedis } from '../support/redis-server.js';
import { type FaultInstance, follow, gate, heardEnd, startInstance, startTool } from './harness.js';

/**
 * A store that loses acknowledged writes (a failover to a replica that had not received them, or
 * PostgreSQL with `synchronous_commit = off`): a call reports three steps, which its listeners
 * hear; the task's record is then put back, behind the app's back, to what it was after the
 * first step; the call finishes. Each listener (on the instance that ran the call and on another
 * one) hears the terminal state within a second, on every store.
 */

/** How soon after the call finishes every listener must hear its end. */
const HEARD_WITHIN_MS = 1_000;

it('docs/reliability.md states the bound this suite checks', () => {
  expect(docFigure('docs/reliability.md', 'faults.lostWriteMs')).toBe(HEARD_WITHIN_MS);
});

const instances: FaultInstance[] = [];
const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const instance of instances.splice(0)) await instance.close();
});
afterAll(async () => {
  for (const close of closers) await close();
});

/** Runs the case: `a` runs the call, listeners on every instance, `store` puts the record back. */
async function loseWrites(store: TaskStore, id: string): Promise<void> {
  const [a] = instances as [FaultInstance];
  const taskId = await startTool(a.url, 'gated', { id, steps: 3 });
  const streams = await Promise.all(instances.map((instance) => follow(instance.url, taskId)));
  const early = await eventually(
    async () => {
      const record = await store.get(taskId);
      return record?.statusMessage === 'step 1' || record?.statusMessage === 'step 2'
        ? record
        : undefined;
    },
    5_000,
    'step 1 or 2',
  );
  const latest = await eventually(
    async () => {
      const record = await store.get(taskId);
      return record?.statusMessage === 'step 3' ? record : undefined;
    },
    5_000,
    'step 3',
  );
  // Every listener heard the later steps (their versions are above the early one's).
  for (const stream of streams) {
    await stream.waitForFrame((frame) => frame.data?.includes('step 3') === true, 5_000);
  }
  expect(latest.version).toBeGreaterThan(early.version);
  // The store loses the later writes.
  expect(await store.compareAndSet(early, latest.version)).toBe(true);
  expect((await store.get(taskId))?.statusMessage).toBe(early.statusMessage);
  const released = Date.now();
  gate(id).release();
  for (const stream of streams) {
    const end = await eventually(() => heardEnd(stream), HEARD_WITHIN_MS, 'the terminal state');
    expect(end.params).toMatchObject({ taskId, status: 'completed' });
    expect((end.params?.result as { structuredContent?: unknown }).structuredContent).toEqual({
      id,
    });
  }
  expect(Date.now() - released).toBeLessThan(HEARD_WITHIN_MS);
  await Promise.all(streams.map((stream) => stream.close()));
}

describe('lost writes: a terminal state always reaches the listeners', () => {
  it('in memory', async () => {
    const store = new InMemoryTaskStore();
    instances.push(await startInstance(() => ({ store })));
    await loseWrites(store, 'memory');
  });
});

describe('lost writes on Redis', () => {
  let redis: TestRedis;
  beforeAll(async () => {
    redis = await startTestRedis({ persistence: false });
    closers.push(() => redis.stop());
  });

  it('two instances: the one that ran the call and another hear the end', async () => {
    const connection = { connection: redis.url, prefix: `lost-${process.pid}:` };
    const parts = () => ({
      store: new RedisTaskStore(connection),
      notifier: redisNotifier(connection),
    });
    instances.push(await startInstance(parts), await startInstance(parts));
    const store = new RedisTaskStore(connection);
    try {
      await loseWrites(store, 'redis');
    } finally {
      await store.onApplicationShutdown();
    }
  });
});

describe('lost writes on PostgreSQL', () => {
  let postgres: TestPostgres;
  beforeAll(async () => {
    postgres = await startTestPostgres();
    closers.push(() => postgres.stop());
  }, 60_000);

  it('two instances: the one that ran the call and another hear the end', async () => {
    const connection = { connection: postgres.url, schema: 'lost_writes' };
    const parts = () => ({
      store: new PostgresTaskStore(connection),
      notifier: postgresNotifier(connection),
    });
    instances.push(await startInstance(parts), await startInstance(parts));
    const store = new PostgresTaskStore(connection);
    try {
      await loseWrites(store, 'postgres');
    } finally {
      await store.onApplicationShutdown();
    }
  });
});
