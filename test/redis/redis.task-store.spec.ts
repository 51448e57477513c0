import { jest } from '@jest/globals';
import { Redis } from 'ioredis';
import { RedisTaskStore } from '../../src/redis/redis.task-store.js';
import { TaskQuotaError } from '../../src/errors.js';
import { completeTask, newTask, type TaskRecord, toStoredResult } from '../../src/task.js';
import { newTaskId as newId } from '../../src/task-id.js';
import { startTestRedis, type TestRedis } from '../support/redis-server.js';
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
      // Beside the JSON: the owner key (compared inside Redis by an owner's get) and the status.
      expect(await raw.hgetall('layout:{abc}')).toEqual({
        v: '1',
        j: JSON.stringify(task),
        o: '1:p-',
        s: 'working',
        c: String(task.createdAt),
      });
      expect(await raw.pexpiretime('layout:{abc}')).toBe(task.createdAt + 60_000);
    } finally {
      raw.disconnect();
      await store.onApplicationShutdown();
    }
  });

  it("an owner's listing index holds what its count holds: entries of tasks given up or expired leave it", async () => {
    const store = new RedisTaskStore({ connection: redis.url, prefix: 'bounded:' });
    const raw = new Redis(redis.url);
    const owner = { principal: 'churn' };
    const quota = { maxRows: null, maxTasksPerOwner: 5 };
    try {
      // Two tasks that expire at once: the next create finds them expired.
      await store.create(newTask(newId(), owner, { ttlMs: 1 }, Date.now() - 10), quota);
      await store.create(newTask(newId(), owner, { ttlMs: 1 }, Date.now() - 10), quota);
      for (let i = 0; i < 200; i++) {
        const task = newTask(newId(), owner, { ttlMs: 60_000 }, Date.now());
        await store.create(task, quota);
        const done = { ...task, status: 'cancelled' as const, version: 2 };
        expect(await store.compareAndSet(done, 1)).toBe(true);
      }
      const index = store.ownerIndexKey(owner);
      expect(await raw.zcard(index)).toBe(5);
      expect(await raw.zcard(store.quotaKey('5:churn-'))).toBe(5);
      const page = await store.list(owner, { limit: 50 });
      expect(page.tasks).toHaveLength(5);
      // A delete takes its entries from every set of its owner.
      await store.delete(page.tasks[0]!.taskId);
      expect(await raw.zcard(index)).toBe(4);
      expect(await raw.zcard(store.quotaKey('5:churn-'))).toBe(4);
      expect(await raw.zcard(store.doneKey('5:churn-'))).toBe(4);
    } finally {
      raw.disconnect();
      await store.onApplicationShutdown();
    }
  });

  it("without a quota, an owner's sets still lose the entries of its expired tasks", async () => {
    const store = new RedisTaskStore({ connection: redis.url, prefix: 'unbounded:' });
    const raw = new Redis(redis.url);
    const owner = { principal: 'churn' };
    const limits = { maxRows: null, maxTasksPerOwner: null };
    try {
      for (let i = 0; i < 50; i++) {
        await store.create(newTask(newId(), owner, { ttlMs: 1 }, Date.now() - 10), limits);
      }
      // One create in 8, by its random id, sweeps: 200 creates leave none of the 50 behind
      // (all 200 missing it: a chance of (7/8)^200, about 3e-12).
      for (let i = 0; i < 200; i++) {
        await store.create(newTask(newId(), owner, { ttlMs: 60_000 }, Date.now()), limits);
      }
      expect(await raw.zcard(store.ownerIndexKey(owner))).toBe(200);
      expect(await raw.zcard(store.quotaKey('5:churn-'))).toBe(200);
      expect((await store.list(owner, { limit: 300 })).tasks).toHaveLength(200);
    } finally {
      raw.disconnect();
      await store.onApplicationShutdown();
    }
  });

  it('the quota holds under 1,000 concurrent creates of one owner, and under finishes meanwhile', async () => {
    const store = new RedisTaskStore({ connection: redis.url, prefix: 'quota1k:' });
    const raw = new Redis(redis.url);
    const owner = { principal: 'crowd' };
    const limits = { maxRows: null, maxTasksPerOwner: 100 };
    /** The owner's tasks stored now, by id, and the owner's count. */
    const stored = async (): Promise<{ ids: Set<string>; counted: number }> => {
      const ids = new Set<string>();
      let cursor = '0';
      do {
        const [next, keys] = await raw.scan(cursor, 'MATCH', 'quota1k:{*}', 'COUNT', 1000);
        for (const key of keys) ids.add(key.slice('quota1k:{'.length, -1));
        cursor = next;
      } while (cursor !== '0');
      return { ids, counted: await raw.zcard(store.quotaKey('5:crowd-')) };
    };
    const createMany = (n: number) =>
      Array.from({ length: n }, () => {
        const task = newTask(newId(), owner, { ttlMs: 60_000 }, Date.now());
        return store.create(task, limits).then(() => task);
      });
    try {
      // Nothing to give up: exactly the quota is accepted, the rest refused with TaskQuotaError.
      const first = await Promise.allSettled(createMany(1_000));
      const kept = first.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
      expect(kept).toHaveLength(100);
      for (const r of first) {
        if (r.status === 'rejected') expect(r.reason).toBeInstanceOf(TaskQuotaError);
      }
      expect(await stored()).toEqual({ ids: new Set(kept.map((t) => t.taskId)), counted: 100 });
      // Half finished; 1,000 more creates while the other half finishes: every create accepted
      // gives up one finished task, never a live one, and the owner holds the quota exactly.
      const finish = (task: TaskRecord) =>
        store.compareAndSet({ ...task, status: 'completed', version: 2 }, 1);
      await Promise.all(kept.slice(0, 50).map(finish));
      const [second] = await Promise.all([
        Promise.allSettled(createMany(1_000)),
        Promise.all(kept.slice(50).map(finish)),
      ]);
      const added = second.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
      expect(added.length).toBeGreaterThanOrEqual(50);
      expect(added.length).toBeLessThanOrEqual(100);
      const after = await stored();
      expect(after.counted).toBe(100);
      expect(after.ids.size).toBe(100);
      for (const task of added) expect(after.ids.has(task.taskId)).toBe(true);
    } finally {
      raw.disconnect();
      await store.onApplicationShutdown();
    }
  }, 20_000);

  it('the quota gives up a finished record without a status field, never a live one', async () => {
    const store = new RedisTaskStore({ connection: redis.url, prefix: 'legacy-evict:' });
    const raw = new Redis(redis.url);
    const owner = { principal: 'old' };
    const limits = { maxRows: null, maxTasksPerOwner: 2 };
    try {
      const t0 = Date.now();
      const [done, live] = [0, 1].map((i) =>
        newTask(`legacy-${i}`, owner, { ttlMs: 60_000 }, t0 + i),
      );
      for (const task of [done!, live!]) {
        await store.create(task, limits);
        // Both finish (each enters the owner's finished set) ...
        expect(await store.compareAndSet({ ...task, status: 'completed', version: 2 }, 1)).toBe(
          true,
        );
        // ... then lose the status field, as records written before it was kept.
        await raw.hdel(store.keyOf(task.taskId), 's');
      }
      // The second one's JSON says it still works: its finish entry is stale.
      await raw.hset(store.keyOf('legacy-1'), 'j', JSON.stringify({ ...live, version: 3 }));
      // The first, finished by its JSON, makes room.
      await store.create(newTask('legacy-2', owner, { ttlMs: 60_000 }, t0 + 2), limits);
      expect(await raw.exists(store.keyOf('legacy-0'))).toBe(0);
      // The second, live by its JSON, does not: the quota refuses and the owner keeps 2 tasks.
      await expect(
        store.create(newTask('legacy-3', owner, { ttlMs: 60_000 }, t0 + 3), limits),
      ).rejects.toBeInstanceOf(TaskQuotaError);
      expect(await raw.exists(store.keyOf('legacy-1'))).toBe(1);
      expect(await raw.exists(store.keyOf('legacy-3'))).toBe(0);
      expect(await raw.zcard(store.quotaKey('3:old-'))).toBe(2);
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

describe('RedisTaskStore: leases', () => {
  const sleep = (ms: number): Promise<void> => new Promise((done) => setTimeout(done, ms));
  let store: RedisTaskStore;
  let raw: Redis;
  let prefix: string;

  beforeEach(() => {
    prefix = `lease-${++prefixes}:`;
    store = new RedisTaskStore({ connection: redis.url, prefix });
    raw = new Redis(redis.url);
  });
  afterEach(async () => {
    raw.disconnect();
    await store.onApplicationShutdown();
  });

  const held = (instance: string): Promise<string[]> =>
    raw.zrange(`${prefix}{lease}held:${instance}`, '0', '-1');

  it('holds a task created with heldBy, in the create, until a write makes it terminal', async () => {
    const now = Date.now();
    const task = { ...newTask('t1', { principal: 'p' }, { ttlMs: 60_000 }, now), heldBy: 'i1' };
    const free = newTask('t2', { principal: 'p' }, { ttlMs: null }, now);
    await store.create(task, { maxRows: null });
    await store.create(free, { maxRows: null });
    expect(await store.heldTasks('i1')).toEqual(['t1']);
    expect(await raw.zscore(`${prefix}{lease}held:i1`, 't1')).toBe(String(now + 60_000));
    expect(await store.get('t1')).toEqual(task);

    // A write that leaves it live keeps it held; the terminal one releases it.
    const working = { ...task, statusMessage: 'half way', version: 2 };
    expect(await store.compareAndSet(working, 1)).toBe(true);
    expect(await held('i1')).toEqual(['t1']);
    const done = completeTask(working, toStoredResult({ content: [] }), {}, Date.now());
    if (done instanceof Error) throw done;
    expect(done.heldBy).toBe('i1');
    expect(await store.compareAndSet(done, 2)).toBe(true);
    expect(await held('i1')).toEqual([]);
  });

  it('renews a lease on Redis’s clock and names the instances whose lease ran out', async () => {
    expect(await store.renewLease('a', 300)).toEqual([]);
    expect(await store.renewLease('b', 60_000)).toEqual([]);
    const [seconds, micros] = await raw.time();
    const redisNow = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
    const until = Number(await raw.zscore(`${prefix}{lease}instances`, 'a'));
    expect(until).toBeGreaterThan(redisNow);
    expect(until).toBeLessThanOrEqual(redisNow + 300);
    await sleep(350);
    // Never the renewing instance itself, even when its own lease had run out.
    expect(await store.renewLease('b', 60_000)).toEqual(['a']);
    expect(await store.renewLease('a', 60_000)).toEqual([]);
  });

  it('a renewal drops the held tasks past their expiry (Redis removed them)', async () => {
    const now = Date.now();
    const short = { ...newTask('s', { principal: 'p' }, { ttlMs: 200 }, now), heldBy: 'i1' };
    const long = { ...newTask('l', { principal: 'p' }, { ttlMs: null }, now), heldBy: 'i1' };
    await store.create(short, { maxRows: null });
    await store.create(long, { maxRows: null });
    await sleep(250);
    await store.renewLease('i1', 60_000);
    expect(await store.heldTasks('i1')).toEqual(['l']);
  });

  it('releaseTasks drops tasks, and forgets an instance only once its lease ran out and it holds nothing', async () => {
    const now = Date.now();
    for (const id of ['x1', 'x2']) {
      await store.create(
        { ...newTask(id, { principal: 'p' }, { ttlMs: null }, now), heldBy: 'dead' },
        { maxRows: null },
      );
    }
    await store.renewLease('dead', 300);
    // Live: the tasks go, the instance stays.
    expect(await store.releaseTasks('dead', ['x1'])).toBe(false);
    expect(await store.heldTasks('dead')).toEqual(['x2']);
    await sleep(350);
    expect(await store.renewLease('other', 60_000)).toEqual(['dead']);
    // Run out, but holding x2: it stays, so the next sweep tries x2 again.
    expect(await store.releaseTasks('dead', [])).toBe(false);
    expect(await store.releaseTasks('dead', ['x2'])).toBe(true);
    expect(await store.renewLease('other', 60_000)).toEqual([]);
    // Idempotent: a second sweeper finds nothing left.
    expect(await store.releaseTasks('dead', ['x2'])).toBe(true);
    expect(await raw.exists(`${prefix}{lease}held:dead`)).toBe(0);
  });

  it('releaseTasks takes thousands of ids in one call', async () => {
    const ids = Array.from({ length: 5_000 }, (_, i) => `t${i}`);
    const key = `${prefix}{lease}held:many`;
    await raw.zadd(key, ...ids.flatMap((id) => ['+inf', id]));
    expect(await store.releaseTasks('many', ids)).toBe(true);
    expect(await raw.exists(key)).toBe(0);
  });

  it('releaseLease ends a live lease with what it holds; the tasks stay as they are', async () => {
    const task = {
      ...newTask('r1', { principal: 'p' }, { ttlMs: null }, Date.now()),
      heldBy: 'leaving',
    };
    await store.create(task, { maxRows: null });
    await store.renewLease('leaving', 300);
    await store.releaseLease('leaving');
    await sleep(350);
    expect(await store.renewLease('other', 60_000)).toEqual([]);
    expect(await store.heldTasks('leaving')).toEqual([]);
    expect(await store.get('r1')).toEqual(task);
  });
});

describe('RedisTaskStore: listing by status', () => {
  it('reads at most 3 batches (6 round trips) a filtered call, and 2 round trips unfiltered', async () => {
    const store = new RedisTaskStore({ connection: redis.url, prefix: 'list-bound:' });
    const alice = { principal: 'alice' };
    try {
      const t0 = Date.now() - 60_000;
      const working = newTask('done', alice, { ttlMs: 3_600_000 }, t0);
      const done = completeTask(working, toStoredResult({ content: [] }), {}, t0 + 1);
      if (done instanceof Error) throw done;
      await store.create(working, { maxRows: null });
      expect(await store.compareAndSet(done, working.version)).toBe(true);
      for (let i = 0; i < 450; i++) {
        const task = newTask(`w${i}`, alice, { ttlMs: 3_600_000 }, t0 + 10 + i);
        await store.create(task, { maxRows: null });
      }
      const ranges = jest.spyOn(store.client, 'zrange');
      const pipelines = jest.spyOn(store.client, 'pipeline');
      const unfiltered = await store.list(alice, { limit: 10 });
      expect(unfiltered.tasks).toHaveLength(10);
      expect([ranges.mock.calls.length, pipelines.mock.calls.length]).toEqual([1, 1]);

      // 450 working tasks before the one completed: a first call reads 300 entries, finds none,
      // and hands a cursor; the next reads the rest and finds it.
      ranges.mockClear();
      pipelines.mockClear();
      const first = await store.list(alice, { limit: 10, status: 'completed' });
      expect(first.tasks).toEqual([]);
      expect(first.nextCursor).toBeDefined();
      expect([ranges.mock.calls.length, pipelines.mock.calls.length]).toEqual([3, 3]);
      const second = await store.list(alice, {
        limit: 10,
        status: ['completed', 'failed'],
        cursor: first.nextCursor!,
      });
      expect(second.tasks.map((task) => task.taskId)).toEqual(['done']);
      expect(second.nextCursor).toBeUndefined();
    } finally {
      await store.onApplicationShutdown();
    }
  });
});

describe('RedisTaskStore: the listing across owners', () => {
  it('keeps every task in one set by creation, in the rows key’s slot; delete and cleanup remove it', async () => {
    const store = new RedisTaskStore({ connection: redis.url, prefix: 'all-layout:' });
    const raw = new Redis(redis.url);
    try {
      // The rows key is the hash tag: one slot for the script that writes both.
      expect(store.createdKey).toBe('all-layout:{all-layout:rows}created');
      const now = Date.now();
      const kept = newTask('kept', { principal: 'a' }, { ttlMs: 3_600_000 }, now);
      const deleted = newTask('deleted', { principal: 'b' }, { ttlMs: 3_600_000 }, now);
      const expired = newTask('expired', { principal: 'a' }, { ttlMs: 1_000 }, now - 5_000);
      const finished = newTask('finished', { principal: 'c' }, { ttlMs: null }, now - 7_200_000);
      for (const task of [kept, deleted, expired, finished]) {
        await store.create(task, { maxRows: null });
      }
      expect(await raw.zrange(store.createdKey, '0', '-1', 'WITHSCORES')).toEqual([
        'finished',
        String(finished.createdAt),
        'expired',
        String(expired.createdAt),
        'deleted',
        String(now),
        'kept',
        String(now),
      ]);
      await store.delete('deleted');
      const done = completeTask(finished, toStoredResult({ content: [] }), {}, now - 3_600_000);
      if (done instanceof Error) throw done;
      expect(await store.compareAndSet(done, finished.version)).toBe(true);
      expect(await store.cleanup(now, { terminalTtlMs: 1_000 })).toBe(2);
      expect(await raw.zrange(store.createdKey, '0', '-1')).toEqual(['kept']);
      expect((await store.listAll({ limit: 10 })).tasks.map((task) => task.taskId)).toEqual([
        'kept',
      ]);
    } finally {
      raw.disconnect();
      await store.onApplicationShutdown();
    }
  });

  it('a prefix with a hash tag of its own keeps the set in that slot', async () => {
    const store = new RedisTaskStore({ connection: redis.url, prefix: '{tenant-7}:' });
    try {
      expect(store.createdKey).toBe('{tenant-7}:created');
      await store.create(newTask('t', { principal: 'p' }, { ttlMs: 60_000 }, Date.now()), {
        maxRows: 5,
      });
      expect((await store.listAll({ limit: 5 })).tasks.map((task) => task.taskId)).toEqual(['t']);
    } finally {
      await store.onApplicationShutdown();
    }
  });

  it('cleanup removes thousands of expired rows and their entries, a batch per script', async () => {
    const store = new RedisTaskStore({ connection: redis.url, prefix: 'all-expire:' });
    const raw = new Redis(redis.url);
    try {
      const old = Date.now() - 60_000;
      await Promise.all(
        Array.from({ length: 2_500 }, (_, i) =>
          store.create(newTask(`e${i}`, { principal: 'p' }, { ttlMs: 1_000 }, old), {
            maxRows: null,
          }),
        ),
      );
      expect(await store.cleanup(Date.now(), { terminalTtlMs: 1_000 })).toBe(2_500);
      expect(await raw.zcard(store.createdKey)).toBe(0);
      expect(await raw.zcard('all-expire:rows')).toBe(0);
    } finally {
      raw.disconnect();
      await store.onApplicationShutdown();
    }
  });

  it('a first page is 2 round trips unfiltered (the page script, then the records)', async () => {
    const store = new RedisTaskStore({ connection: redis.url, prefix: 'all-trips:' });
    try {
      const t0 = Date.now() - 60_000;
      for (let i = 0; i < 120; i++) {
        const owner = { principal: `p${i % 7}` };
        await store.create(newTask(`w${i}`, owner, { ttlMs: 3_600_000 }, t0 + i), {
          maxRows: null,
        });
      }
      const client = store.client as unknown as Record<string, (...args: unknown[]) => unknown>;
      const script = jest.spyOn(client, 'nestjsMcpTasksListAll');
      const pipelines = jest.spyOn(store.client, 'pipeline');
      const sent = jest.spyOn(store.client, 'sendCommand');
      const page = await store.listAll({ limit: 50 });
      expect(page.tasks).toHaveLength(50);
      expect(page.tasks[0]!.taskId).toBe('w119');
      expect([script.mock.calls.length, pipelines.mock.calls.length]).toEqual([1, 1]);
      // The script is the only command sent outside the pipeline.
      expect(sent.mock.calls.length).toBe(1 + 50);
      const next = await store.listAll({ limit: 50, cursor: page.nextCursor! });
      expect(next.tasks[0]!.taskId).toBe('w69');
    } finally {
      await store.onApplicationShutdown();
    }
  });
});
