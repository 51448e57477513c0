import { Redis } from 'ioredis';
import { RedisTaskStore } from '../src/redis/redis.task-store.js';
import type { TaskStore } from '../src/store/task-store.js';
import { newTask } from '../src/task.js';
import { startTestRedis, type TestRedis } from './redis-server.js';
import { runTaskStoreContract } from './store.contract.js';

let redis: TestRedis;
let prefixes = 0;

beforeAll(async () => {
  redis = await startTestRedis();
});
afterAll(async () => {
  await redis.stop();
});

runTaskStoreContract('RedisTaskStore', {
  // Each test gets its own key prefix: a fresh, empty store on the same server.
  create: async () =>
    new RedisTaskStore({ connection: redis.url, prefix: `contract-${++prefixes}:` }),
  dispose: async (store: TaskStore) => (store as RedisTaskStore).onApplicationShutdown(),
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
