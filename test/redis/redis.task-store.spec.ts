import { Redis } from 'ioredis';
import { RedisTaskStore } from '../../src/redis/redis.task-store.js';
import { completeTask, newTask, toStoredResult } from '../../src/task.js';
import { startTestRedis, type TestRedis } from '../redis-server.js';
import { taskStoreContract } from '../../src/testing/index.js';

let redis: TestRedis;
let prefixes = 0;

beforeAll(async () => {
  redis = await startTestRedis();
});
afterAll(async () => {
  await redis.stop();
});

describe('TaskStore contract: RedisTaskStore', () => {
  const contract = taskStoreContract({
    // Each case gets its own key prefix: a fresh, empty store on the same server.
    create: () => new RedisTaskStore({ connection: redis.url, prefix: `contract-${++prefixes}:` }),
    dispose: (store) => store.onApplicationShutdown(),
  });
  for (const rule of contract) it(rule.name, rule.run);
});

describe('RedisTaskStore', () => {
  it('keeps a task in one hash under its hash tag, expiring at createdAt + ttlMs', async () => {
    const store = new RedisTaskStore({ connection: redis.url, prefix: 'layout:' });
    const raw = new Redis(redis.url);
    try {
      const task = newTask('abc', { principal: 'p' }, { ttlMs: 60_000 }, Date.now());
      await store.create(task, { maxRows: null });
      expect(store.keyOf('abc')).toBe('layout:{abc}');
      expect(await raw.hgetall('layout:{abc}')).toEqual({ v: '1', j: JSON.stringify(task) });
      expect(await raw.pexpiretime('layout:{abc}')).toBe(task.createdAt + 60_000);
    } finally {
      raw.disconnect();
      await store.onApplicationShutdown();
    }
  });

  it('a finished no-TTL write that lost its compare-and-set leaves the live task alone at cleanup', async () => {
    const store = new RedisTaskStore({ connection: redis.url, prefix: 'stale:' });
    try {
      const now = Date.now();
      const task = newTask('t1', { principal: 'p' }, { ttlMs: null }, now - 10 * 3_600_000);
      await store.create(task, { maxRows: null });
      const lost = completeTask(task, toStoredResult({ content: [] }), {}, now - 5 * 3_600_000);
      if (lost instanceof Error) throw lost;
      expect(await store.compareAndSet(lost, task.version + 7)).toBe(false);
      expect(await store.cleanup(now, { terminalTtlMs: 3_600_000 })).toBe(0);
      expect(await store.get('t1')).toEqual(task);
      // Once really finished (an hour ago or more) it goes.
      expect(await store.compareAndSet(lost, task.version)).toBe(true);
      expect(await store.cleanup(now, { terminalTtlMs: 3_600_000 })).toBe(1);
      expect(await store.get('t1')).toBeNull();
    } finally {
      await store.onApplicationShutdown();
    }
  });

  it('uses a client the app owns and leaves it open', async () => {
    const client = new Redis(redis.url);
    const store = new RedisTaskStore({ client, prefix: 'owned:' });
    await store.onApplicationShutdown();
    expect(await client.ping()).toBe('PONG');
    client.disconnect();
  });

  it('closes the client it made', async () => {
    const store = new RedisTaskStore({ connection: redis.url, prefix: 'close:' });
    await store.get('x');
    await store.onApplicationShutdown();
    expect(store.client.status).toBe('end');
  });
});
