import { Redis } from 'ioredis';
import pg from 'pg';
import { ListenFeed } from '../../src/notify/listen-feed.js';
import { INLINE_CHANGE_BYTES } from '../../src/notify/change-message.js';
import { WaiterFeed } from '../../src/notify/waiter-feed.js';
import { PostgresTaskNotifier, PostgresTaskStore } from '../../src/postgres/index.js';
import { RedisTaskNotifier, RedisTaskStore } from '../../src/redis/index.js';
import type { TaskStore } from '../../src/store/task-store.js';
import { newTask, type TaskRecord } from '../../src/task.js';
import { newTaskId } from '../../src/task-id.js';
import { startTestPostgres, type TestPostgres } from '../support/postgres-server.js';
import { startTestRedisCluster, type TestRedisCluster } from '../support/redis-cluster-server.js';
import { startTestRedis, type TestRedis } from '../support/redis-server.js';

/**
 * Fan-out that grows with watchers, not with instances, on each engine: an instance receives the
 * changes of the tasks someone on it waits on or listens to, and nothing else; large records travel
 * as a reference; a listener that reads after its `listen` resolved misses no change.
 */

interface Notifier {
  notify(record: TaskRecord): Promise<void> | undefined;
  onApplicationShutdown(): Promise<void>;
  readonly ready: Promise<void>;
  readonly received: { messages: number; bytes: number; reads: number };
  readonly watchedTasks: number;
  readonly announcing: boolean;
}

interface Engine {
  name: string;
  store(): TaskStore & { onApplicationShutdown(): Promise<void> };
  notifier(listenFeed: ListenFeed, waiters: WaiterFeed): Notifier;
  /** Breaks the subscriber connection of `notifier`, which watches `taskId` (none: not tried). */
  cut?(notifier: Notifier, taskId: string): Promise<void>;
}

let redis: TestRedis;
let cluster: TestRedisCluster;
let postgres: TestPostgres;

beforeAll(async () => {
  [redis, cluster, postgres] = await Promise.all([
    startTestRedis({ persistence: false }),
    startTestRedisCluster(),
    startTestPostgres(),
  ]);
}, 120_000);
afterAll(async () => {
  await Promise.all([redis?.stop(), cluster?.stop(), postgres?.stop()]);
});

const engines: Engine[] = [
  {
    name: 'Redis',
    store: () => new RedisTaskStore({ connection: redis.url, prefix: 'fanout:' }),
    notifier: (listenFeed, waiters) =>
      new RedisTaskNotifier({ connection: redis.url, prefix: 'fanout:' }, listenFeed, waiters),
    cut: async () => {
      const admin = new Redis(redis.url);
      try {
        await admin.call('CLIENT', 'KILL', 'TYPE', 'pubsub');
      } finally {
        admin.disconnect();
      }
    },
  },
  {
    name: 'Redis Cluster',
    store: () => new RedisTaskStore({ connection: { cluster: cluster.nodes }, prefix: 'fanout:' }),
    notifier: (listenFeed, waiters) =>
      new RedisTaskNotifier(
        { connection: { cluster: cluster.nodes }, prefix: 'fanout:' },
        listenFeed,
        waiters,
      ),
  },
  {
    name: 'PostgreSQL',
    store: () => new PostgresTaskStore({ connection: postgres.url, schema: 'fanout' }),
    notifier: (listenFeed, waiters) =>
      new PostgresTaskNotifier(
        { connection: postgres.url, schema: 'fanout', timeoutMs: 2_000 },
        listenFeed,
        waiters,
      ),
    cut: async (notifier, taskId) => {
      const channel = (notifier as PostgresTaskNotifier).channelOf(taskId);
      const admin = new pg.Client({ connectionString: postgres.url });
      await admin.connect();
      try {
        const { rowCount } = await admin.query(
          `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
            WHERE pid <> pg_backend_pid() AND strpos(query, $1) > 0`,
          [channel],
        );
        expect(rowCount).toBe(1);
      } finally {
        await admin.end();
      }
    },
  },
];

/** Resolves once `check` holds, polling; fails after 5 s. */
async function until(check: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 5_000;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe.each(engines)('fan-out on $name', (engine) => {
  /** One instance: a notifier and its two feeds, with what its listen feed heard. */
  function instance() {
    const listenFeed = new ListenFeed();
    const waiters = new WaiterFeed();
    const notifier = engine.notifier(listenFeed, waiters);
    const heard: TaskRecord[] = [];
    listenFeed.listenAll((record) => heard.push(record));
    return { listenFeed, waiters, notifier, heard };
  }
  type Instance = ReturnType<typeof instance>;
  let instances: Instance[] = [];
  let store: ReturnType<Engine['store']>;

  beforeEach(async () => {
    store = engine.store();
    instances = [instance(), instance(), instance()];
    await Promise.all(instances.map((each) => each.notifier.ready));
  });
  afterEach(async () => {
    await Promise.all([
      ...instances.map((each) => each.notifier.onApplicationShutdown()),
      store.onApplicationShutdown(),
    ]);
  });

  const task = (): TaskRecord =>
    newTask(newTaskId(), { principal: 'alice' }, { ttlMs: 60_000 }, Date.now());

  it('an instance that watches nothing receives nothing; the watching one hears every change once', async () => {
    const [writer, watcher, idle] = instances as [Instance, Instance, Instance];
    const watched = task();
    const other = task();
    const ignore = (): void => undefined;
    // A listen stream and a waiter on the watcher: two feeds, one subscription.
    await Promise.all([
      watcher.listenFeed.listen(watched.taskId, ignore),
      watcher.waiters.listen(watched.taskId, ignore),
    ]);
    expect(watcher.notifier.watchedTasks).toBe(1);
    for (let version = 2; version <= 11; version++) {
      await writer.notifier.notify({ ...watched, version });
      await writer.notifier.notify({ ...other, version });
    }
    await until(
      () => watcher.heard.length === 10,
      `the watcher to hear 10 changes (${JSON.stringify([watcher.heard.length, watcher.notifier.received])})`,
    );
    expect(watcher.heard.map((record) => record.version)).toEqual([2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
    expect(watcher.heard.every((record) => record.taskId === watched.taskId)).toBe(true);
    expect(watcher.notifier.received.messages).toBe(10);
    // The writer watches neither task: it hears nothing back; the idle instance hears nothing.
    expect(writer.notifier.received.messages).toBe(0);
    expect(idle.notifier.received).toEqual({ messages: 0, bytes: 0, reads: 0 });
  });

  it('once the last listener of a task leaves, the instance hears no more of it', async () => {
    const [writer, watcher] = instances as [Instance, Instance];
    const watched = task();
    const listener = (): void => undefined;
    const waiter = (): void => undefined;
    await watcher.listenFeed.listen(watched.taskId, listener);
    await watcher.waiters.listen(watched.taskId, waiter);
    await writer.notifier.notify({ ...watched, version: 2 });
    await until(() => watcher.heard.length === 1, 'the first change');
    watcher.listenFeed.unlisten(watched.taskId, listener);
    // The waiter still listens: still subscribed.
    await writer.notifier.notify({ ...watched, version: 3 });
    await until(() => watcher.heard.length === 2, 'the second change');
    watcher.waiters.unlisten(watched.taskId, waiter);
    await until(() => watcher.notifier.watchedTasks === 0, 'the unsubscription');
    const before = watcher.notifier.received.messages;
    await writer.notifier.notify({ ...watched, version: 4 });
    // A change on a task it watches, sent after, proves the silence was not a delay.
    const next = task();
    await watcher.listenFeed.listen(next.taskId, listener);
    await writer.notifier.notify({ ...next, version: 2 });
    await until(() => watcher.heard.length === 3, 'the change of the next task');
    expect(watcher.heard.map((record) => `${record.taskId}@${record.version}`)).toEqual([
      `${watched.taskId}@2`,
      `${watched.taskId}@3`,
      `${next.taskId}@2`,
    ]);
    expect(watcher.notifier.received.messages).toBe(before + 1);
  });

  it('a record larger than a message is sent as its id and version, and read once by who hears it', async () => {
    const [writer, watcher] = instances as [Instance, Instance];
    const created = task();
    await store.create(created, { maxRows: null });
    const large = { ...created, statusMessage: 'x'.repeat(100_000), version: 2 };
    expect(await store.compareAndSet(large, 1)).toBe(true);
    // Two listeners on one feed, one on the other: one read.
    await Promise.all([
      watcher.listenFeed.listen(created.taskId, () => undefined),
      watcher.listenFeed.listen(created.taskId, () => undefined),
      watcher.waiters.listen(created.taskId, () => undefined),
    ]);
    await writer.notifier.notify(large);
    await until(() => watcher.heard.length === 1, 'the large change');
    expect(watcher.heard[0]).toEqual(large);
    const { messages, bytes, reads } = watcher.notifier.received;
    expect({ messages, reads }).toEqual({ messages: 1, reads: 1 });
    expect(bytes).toBeLessThan(100);
    // A record that fits travels whole: no read.
    const small = { ...large, statusMessage: 'done', version: 3 };
    expect(await store.compareAndSet(small, 2)).toBe(true);
    await writer.notifier.notify(small);
    await until(() => watcher.heard.length === 2, 'the small change');
    expect(watcher.notifier.received.reads).toBe(1);
    expect(watcher.notifier.received.bytes - bytes).toBeLessThanOrEqual(INLINE_CHANGE_BYTES);
  });

  it('a listener that reads after its listen resolved misses no change written right after', async () => {
    const [writer, watcher] = instances as [Instance, Instance];
    // Each round: listen on a new task, then the change is written at once elsewhere.
    const rounds = 100;
    const heard = new Set<string>();
    const listener = (record: TaskRecord): void => void heard.add(record.taskId);
    const tasks = Array.from({ length: rounds }, task);
    await Promise.all(
      tasks.map(async (each) => {
        await watcher.waiters.listen(each.taskId, listener);
        await writer.notifier.notify({ ...each, version: 2 });
      }),
    );
    await until(() => heard.size === rounds, `${rounds} changes`);
    expect(watcher.notifier.watchedTasks).toBe(rounds);
    for (const each of tasks) watcher.waiters.unlisten(each.taskId, listener);
    await until(() => watcher.notifier.watchedTasks === 0, 'every unsubscription');
  });

  // On the engines whose subscriber connection the test can break (not tried on the cluster).
  if (engine.cut !== undefined) {
    it('a change written while its connection was broken reaches the watcher once it is back', async () => {
      const [writer, watcher] = instances as [Instance, Instance];
      const created = task();
      await store.create(created, { maxRows: null });
      await watcher.waiters.listen(created.taskId, () => undefined);
      await engine.cut!(watcher.notifier, created.taskId);
      // Written and sent while the watcher's subscription is gone: it reads it once it is back.
      const changed = { ...created, statusMessage: 'while away', version: 2 };
      expect(await store.compareAndSet(changed, 1)).toBe(true);
      await writer.notifier.notify(changed);
      await until(() => watcher.heard.length > 0, 'the change after the reconnect');
      expect(watcher.heard.at(-1)).toMatchObject({ taskId: created.taskId, version: 2 });
      // And what is written after the reconnect arrives as usual.
      const later = { ...changed, statusMessage: 'back', version: 3 };
      expect(await store.compareAndSet(later, 2)).toBe(true);
      await writer.notifier.notify(later);
      await until(() => watcher.heard.at(-1)?.version === 3, 'the change after that');
    });
  }

  it('hearAll brings every task changed elsewhere while it is held, and nothing after', async () => {
    const [writer, console] = instances as [Instance, Instance];
    // Where it takes a message of its own, a change goes out for every-task hearers only once
    // the writer has heard that someone is one (a heartbeat, sent when the hold is in place).
    const always = engine.name === 'Redis';
    expect(writer.notifier.announcing).toBe(always);
    const hold = console.listenFeed.hearAll();
    await hold.ready;
    await until(() => writer.notifier.announcing, 'the writer to hear of the hearer');
    const [one, two] = [task(), task()];
    // Stored: on a Redis Cluster every task's changes are announced as references, read there.
    for (const each of [one, two]) {
      await store.create(each, { maxRows: null });
      expect(await store.compareAndSet({ ...each, version: 2 }, 1)).toBe(true);
      await writer.notifier.notify({ ...each, version: 2 });
    }
    await until(() => console.heard.length === 2, 'both changes');
    expect(console.heard.map((record) => record.version)).toEqual([2, 2]);
    hold.release();
    hold.release();
    // Released: the next changes reach it only for a task watched there.
    const watched = task();
    await console.listenFeed.listen(watched.taskId, () => undefined);
    await writer.notifier.notify({ ...one, version: 3 });
    await writer.notifier.notify({ ...watched, version: 2 });
    await until(() => console.heard.length === 3, 'the watched change');
    // The first two in either order: on a Cluster each is read after its reference, and the two
    // reads may end in either order.
    const heard = console.heard.map((record) => record.taskId);
    expect(new Set(heard.slice(0, 2))).toEqual(new Set([one.taskId, two.taskId]));
    expect(heard[2]).toBe(watched.taskId);
  });
});
