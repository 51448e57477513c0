import { Cluster, Redis } from 'ioredis';
import { TaskQuotaError } from '../../src/errors.js';
import { ListenFeed } from '../../src/notify/listen-feed.js';
import { WaiterFeed } from '../../src/notify/waiter-feed.js';
import { RedisTaskNotifier } from '../../src/redis/redis.notifier.js';
import { RedisTaskStore } from '../../src/redis/redis.task-store.js';
import { newTask, type TaskRecord } from '../../src/task.js';
import { resolveTasksConfig } from '../../src/tasks.config.js';
import { TasksService } from '../../src/tasks.service.js';
import { taskStoreContract } from '../../src/testing/index.js';
import { startTestRedisCluster, type TestRedisCluster } from '../support/redis-cluster-server.js';

/**
 * RedisTaskStore and RedisTaskNotifier on a real Redis Cluster of three masters (no replicas),
 * started for this file: the store contract, the slots the store's keys lie in, and a change made
 * on one instance heard on another. See docs/redis-cluster.md.
 */

let cluster: TestRedisCluster;
let prefixes = 0;
/** Each store gets its own key prefix: a fresh, empty store on the same cluster. */
const nextPrefix = (name: string): string => `${name}-${++prefixes}:`;

beforeAll(async () => {
  cluster = await startTestRedisCluster();
}, 60_000);
afterAll(async () => {
  await cluster?.stop();
});

/** A store that makes its own ioredis Cluster (the `{ cluster }` connection) and closes it. */
const clusterStore = (prefix: string): RedisTaskStore =>
  new RedisTaskStore({ connection: { cluster: cluster.nodes }, prefix });

/** The slot Redis Cluster gives a key, asked of the cluster itself. */
async function slotOf(client: Cluster, key: string): Promise<number> {
  return Number(await client.call('CLUSTER', 'KEYSLOT', key));
}

describe('TaskStore contract: RedisTaskStore on a Redis Cluster', () => {
  const contract = taskStoreContract({
    create: () => clusterStore(nextPrefix('contract')),
    dispose: (store) => store.onApplicationShutdown(),
  });
  for (const rule of contract) it(rule.name, rule.run);
});

describe('RedisTaskStore on a Redis Cluster', () => {
  let raw: Cluster;
  beforeAll(() => {
    raw = new Cluster(cluster.nodes);
  });
  afterAll(async () => {
    await raw.quit();
  });

  it('is a real cluster: three masters, and the tasks of one store spread over all of them', async () => {
    const store = clusterStore(nextPrefix('spread'));
    try {
      expect(raw.nodes('master')).toHaveLength(3);
      const ids = Array.from({ length: 30 }, (_, i) => `spread-${i}`);
      const t0 = Date.now();
      for (const [i, id] of ids.entries()) {
        // One millisecond apart, so that the listing's order is the creation order.
        await store.create(newTask(id, { principal: 'p' }, { ttlMs: 60_000 }, t0 + i), {
          maxRows: 100,
          maxTasksPerOwner: 50,
        });
      }
      // Which master holds each task's key, asked of each master: the others answer MOVED.
      const here = (node: Redis, key: string): Promise<number> =>
        node.exists(key).catch((error: Error) => {
          if (error.message.startsWith('MOVED')) return 0;
          throw error;
        });
      const holders = new Set<number>();
      const found = new Map<string, number>();
      for (const node of raw.nodes('master')) {
        for (const id of ids) {
          if ((await here(node, store.keyOf(id))) === 1) {
            holders.add(node.options.port ?? 0);
            found.set(id, (found.get(id) ?? 0) + 1);
          }
        }
      }
      expect(ids.map((id) => found.get(id))).toEqual(ids.map(() => 1));
      expect(holders.size).toBe(3);
      const page = await store.list({ principal: 'p' }, { limit: 50 });
      expect(page.tasks.map((task) => task.taskId)).toEqual([...ids].reverse());
    } finally {
      await store.onApplicationShutdown();
    }
  });

  it('the keys each script touches share one slot: the rows’ sets, and the lease’s', async () => {
    for (const prefix of ['mcp-tasks:', nextPrefix('slots'), '{tenant-7}:']) {
      const store = clusterStore(prefix);
      try {
        const owner = '1:alice-';
        // RESERVE (and EVICT's recount, a MULTI): rows, created, the owner's quota and done.
        const reserve = [
          `${prefix}rows`,
          store.createdKey,
          store.quotaKey(owner),
          store.doneKey(owner),
        ];
        const reserveSlots = await Promise.all(reserve.map((key) => slotOf(raw, key)));
        expect(new Set(reserveSlots).size).toBe(1);
        // RENEW_LEASE, RELEASE_TASKS and releaseLease's MULTI: the instances and what one holds.
        const lease = [`${prefix}{lease}instances`, store.heldKey('i1'), store.heldKey('i2')];
        expect(new Set(await Promise.all(lease.map((key) => slotOf(raw, key)))).size).toBe(1);
        // A task's key is its own slot, by its id (the prefix's hash tag wins when it has one).
        const expected = prefix === '{tenant-7}:' ? 'tenant-7' : 'some-task-id';
        expect(await slotOf(raw, store.keyOf('some-task-id'))).toBe(await slotOf(raw, expected));
      } finally {
        await store.onApplicationShutdown();
      }
    }
  });

  it('under a prefix with a hash tag a create is one script on one slot, quota included', async () => {
    const prefix = `{tagged-${++prefixes}}:`;
    const store = clusterStore(prefix);
    try {
      const owner = { principal: 'p' };
      const limits = { maxRows: 10, maxTasksPerOwner: 3 };
      // Every key CREATE_ONE touches, a task given up included, is in the prefix's slot.
      const keys = [
        `${prefix}rows`,
        store.createdKey,
        store.quotaKey('1:p-'),
        store.doneKey('1:p-'),
        store.ownerIndexKey(owner),
        store.keyOf('any-task'),
        store.heldKey('i1'),
      ];
      expect(new Set(await Promise.all(keys.map((key) => slotOf(raw, key)))).size).toBe(1);
      // Commands the store's Cluster client sends, scripts included.
      let sent = 0;
      const client = store.client as Cluster;
      const send = client.sendCommand.bind(client);
      client.sendCommand = ((...args: Parameters<Cluster['sendCommand']>) => {
        sent++;
        return send(...args);
      }) as Cluster['sendCommand'];
      const t0 = Date.now();
      const tasks = [0, 1, 2].map((i) => newTask(`tagged-${i}`, owner, { ttlMs: 60_000 }, t0 + i));
      for (const task of tasks) await store.create(task, limits);
      expect(await store.compareAndSet({ ...tasks[1]!, status: 'completed', version: 2 }, 1)).toBe(
        true,
      );
      sent = 0;
      // At the quota: the finished task makes room, in the create's one script.
      const fourth = newTask('tagged-3', owner, { ttlMs: 60_000, heldBy: 'i1' }, t0 + 3);
      await store.create(fourth, limits);
      expect(sent).toBe(1);
      expect(await store.get('tagged-1')).toBeNull();
      expect(await store.heldTasks('i1')).toEqual(['tagged-3']);
      const page = await store.list(owner, { limit: 10 });
      expect(page.tasks.map((task) => task.taskId)).toEqual(['tagged-3', 'tagged-2', 'tagged-0']);
      // Every task live: the quota refuses, and nothing is written.
      await expect(
        store.create(newTask('tagged-4', owner, { ttlMs: 60_000 }, t0 + 4), limits),
      ).rejects.toBeInstanceOf(TaskQuotaError);
      expect(await store.get('tagged-4')).toBeNull();
      expect(await raw.zcard(store.quotaKey('1:p-'))).toBe(3);
    } finally {
      await store.onApplicationShutdown();
    }
  });

  it('uses a Cluster the app owns and leaves it open', async () => {
    const client = new Cluster(cluster.nodes);
    const store = new RedisTaskStore({ client, prefix: nextPrefix('owned') });
    try {
      const task = newTask('owned', { principal: 'p' }, { ttlMs: 60_000 }, Date.now());
      await store.create(task, { maxRows: null });
      expect(await store.get('owned', { principal: 'p' })).toEqual(task);
      await store.onApplicationShutdown();
      expect(client.status).toBe('ready');
      expect(await client.ping()).toBe('PONG');
    } finally {
      await client.quit();
    }
  });

  it('closes the Cluster it made', async () => {
    const store = clusterStore(nextPrefix('close'));
    await store.get('x');
    await store.onApplicationShutdown();
    expect(store.client.status).toBe('end');
  });

  it('listing: a filtered page reads across the slots, batch by batch, and its cursor goes on', async () => {
    const store = clusterStore(nextPrefix('filtered'));
    const alice = { principal: 'alice' };
    try {
      const t0 = Date.now() - 60_000;
      const rare = newTask('rare', alice, { ttlMs: 3_600_000 }, t0);
      await store.create(rare, { maxRows: null });
      expect(await store.compareAndSet({ ...rare, status: 'cancelled', version: 2 }, 1)).toBe(true);
      await Promise.all(
        Array.from({ length: 350 }, (_, i) =>
          store.create(newTask(`w${i}`, alice, { ttlMs: 3_600_000 }, t0 + 10 + i), {
            maxRows: null,
          }),
        ),
      );
      // 350 working tasks newer than the cancelled one: the first call reads 3 batches of 100.
      const first = await store.list(alice, { limit: 10, status: 'cancelled' });
      expect(first.tasks).toEqual([]);
      const second = await store.list(alice, {
        limit: 10,
        status: 'cancelled',
        cursor: first.nextCursor!,
      });
      expect(second.tasks.map((task) => task.taskId)).toEqual(['rare']);
      const all = await store.listAll({ limit: 400, status: ['working'] });
      expect(all.tasks).toHaveLength(350);
      expect(all.tasks[0]!.taskId).toBe('w349');
    } finally {
      await store.onApplicationShutdown();
    }
  });

  it('leases: instances on two connections see each other’s lease run out, on Redis’s clock', async () => {
    const prefix = nextPrefix('lease');
    const one = clusterStore(prefix);
    const two = clusterStore(prefix);
    try {
      const held = {
        ...newTask('h1', { principal: 'p' }, { ttlMs: null }, Date.now()),
        heldBy: 'a',
      };
      await one.create(held, { maxRows: null });
      expect(await one.renewLease('a', 300)).toEqual([]);
      expect(await two.renewLease('b', 60_000)).toEqual([]);
      expect(await two.heldTasks('a')).toEqual(['h1']);
      await new Promise((resolve) => setTimeout(resolve, 350));
      expect(await two.renewLease('b', 60_000)).toEqual(['a']);
      // Thousands of ids in one script, in the lease's slot.
      const ids = Array.from({ length: 3_000 }, (_, i) => `t${i}`);
      await raw.zadd(two.heldKey('a'), ...ids.flatMap((id) => ['+inf', id]));
      expect(await two.releaseTasks('a', [...ids, 'h1'])).toBe(true);
      expect(await two.renewLease('b', 60_000)).toEqual([]);
      expect(await raw.exists(two.heldKey('a'))).toBe(0);
    } finally {
      await Promise.all([one.onApplicationShutdown(), two.onApplicationShutdown()]);
    }
  });
});

describe('RedisTaskNotifier on a Redis Cluster', () => {
  /** One app instance: its store, notifier and feeds, on connections of its own. */
  interface Instance {
    tasks: TasksService;
    notifier: RedisTaskNotifier;
    listenFeed: ListenFeed;
    waiters: WaiterFeed;
    close(): Promise<void>;
  }

  function instance(prefix: string): Instance {
    const connection = { connection: { cluster: cluster.nodes }, prefix };
    const store = new RedisTaskStore(connection);
    const listenFeed = new ListenFeed();
    const waiters = new WaiterFeed();
    const notifier = new RedisTaskNotifier(connection, listenFeed, waiters);
    const config = resolveTasksConfig({ janitor: false });
    const tasks = new TasksService(store, notifier, config, waiters);
    return {
      tasks,
      notifier,
      listenFeed,
      waiters,
      close: async () => {
        await Promise.all([notifier.onApplicationShutdown(), store.onApplicationShutdown()]);
      },
    };
  }

  /**
   * The next record `feed` hears for the task, once the instance is subscribed to the task's
   * changes (the feed's `listen` resolves then).
   */
  async function heard(
    feed: ListenFeed | WaiterFeed,
    taskId: string,
  ): Promise<{ next: Promise<TaskRecord> }> {
    let resolve!: (record: TaskRecord) => void;
    const next = new Promise<TaskRecord>((done) => (resolve = done));
    const listener = (record: TaskRecord): void => {
      feed.unlisten(taskId, listener);
      resolve(record);
    };
    await feed.listen(taskId, listener);
    return { next };
  }

  it('a change made on one instance reaches the listeners and waiters of every other', async () => {
    const prefix = nextPrefix('notify');
    // Four instances: their subscriptions and their publishes land on nodes ioredis picks, so
    // most changes cross from one master to another over the cluster bus.
    const instances = [instance(prefix), instance(prefix), instance(prefix), instance(prefix)];
    try {
      await Promise.all(instances.map((each) => each.notifier.ready));
      expect(instances.every((each) => each.notifier.subscribed)).toBe(true);
      const owner = { principal: 'p' };
      for (const [i, writer] of instances.entries()) {
        const task = await writer.tasks.create(owner);
        const others = instances.filter((each) => each !== writer);
        const hearing = await Promise.all([
          ...others.map((each) => heard(each.listenFeed, task.taskId)),
          ...others.map((each) => heard(each.waiters, task.taskId)),
        ]);
        const written = await writer.tasks.progress(task.taskId, `step ${i}`);
        for (const record of await Promise.all(hearing.map(({ next }) => next))) {
          expect(record).toMatchObject({
            taskId: task.taskId,
            version: written.version,
            statusMessage: `step ${i}`,
          });
        }
        // Another instance reads what the writer wrote, from the task's own slot.
        expect(await others[0]!.tasks.get(task.taskId, owner)).toMatchObject({
          version: written.version,
        });
      }
    } finally {
      await Promise.all(instances.map((each) => each.close()));
    }
  });

  it('a change published on one master is heard by the subscribers on the other two', async () => {
    // One notifier per master, on a plain connection to that master (its subscriber too, as a
    // duplicate): where the subscriptions and the publishes land is fixed, unlike with a Cluster.
    const prefix = nextPrefix('bus');
    const clients = cluster.nodes.map((node) => new Redis(node));
    const feeds = clients.map(() => new ListenFeed());
    const notifiers = clients.map(
      (client, i) => new RedisTaskNotifier({ client, prefix }, feeds[i]!, new WaiterFeed()),
    );
    try {
      await Promise.all(notifiers.map((notifier) => notifier.ready));
      for (const [i, publisher] of notifiers.entries()) {
        const task = newTask(`bus-${i}`, { principal: 'p' }, { ttlMs: null }, Date.now());
        const hearing = await Promise.all(
          feeds.filter((_feed, j) => j !== i).map((feed) => heard(feed, task.taskId)),
        );
        await publisher.notify({ ...task, version: 2 });
        for (const record of await Promise.all(hearing.map(({ next }) => next))) {
          expect(record).toMatchObject({ taskId: task.taskId, version: 2 });
        }
      }
    } finally {
      await Promise.all(notifiers.map((notifier) => notifier.onApplicationShutdown()));
      for (const client of clients) client.disconnect();
    }
  });

  it('closes the Cluster connections it made', async () => {
    const one = instance(nextPrefix('close'));
    await one.notifier.ready;
    await one.close();
    const { publisher, subscriber } = one.notifier as unknown as Record<string, Redis | Cluster>;
    expect([publisher!.status, subscriber!.status]).toEqual(['end', 'end']);
  });
});
