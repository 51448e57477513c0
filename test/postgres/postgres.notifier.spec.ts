import { jest } from '@jest/globals';
import { ListenFeed } from '../../src/notify/listen-feed.js';
import { WaiterFeed } from '../../src/notify/waiter-feed.js';
import { PostgresTaskNotifier, PostgresTaskStore } from '../../src/postgres/index.js';
import { newTask, type TaskRecord } from '../../src/task.js';
import { newTaskId } from '../../src/task-id.js';
import { canStopServer, startTestPostgres, type TestPostgres } from '../support/postgres-server.js';

let postgres: TestPostgres;

beforeAll(async () => {
  postgres = await startTestPostgres();
}, 60_000);
afterAll(async () => {
  await postgres.stop();
});

/** One instance's notifier and feeds, with what each feed heard of every task. */
function instance(schema: string, store?: PostgresTaskStore) {
  const listenFeed = new ListenFeed();
  const waiters = new WaiterFeed();
  const heard = { listen: [] as TaskRecord[], waiters: [] as TaskRecord[] };
  listenFeed.listenAll((record) => heard.listen.push(record));
  waiters.listenAll((record) => heard.waiters.push(record));
  const notifier = new PostgresTaskNotifier(
    { connection: postgres.url, schema, timeoutMs: 2_000 },
    listenFeed,
    waiters,
    store,
  );
  /** Listens to the task on both feeds, so this instance LISTENs for it; resolves once it does. */
  const watch = async (taskId: string): Promise<void> => {
    const ignore = (): void => undefined;
    await Promise.all([listenFeed.listen(taskId, ignore), waiters.listen(taskId, ignore)]);
  };
  return { notifier, heard, watch, listenFeed };
}

/** Resolves once `check` holds, polling; fails after 5 s. */
async function until(check: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 5_000;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe('PostgresTaskNotifier', () => {
  it('a change sent by one instance reaches the feeds of the others, and its own listen streams at once', async () => {
    const [a, b] = [instance('notify_small'), instance('notify_small')];
    try {
      await Promise.all([a.notifier.ready, b.notifier.ready]);
      expect(a.notifier.subscribed && b.notifier.subscribed).toBe(true);
      expect(a.notifier.deliversRemoteChanges).toBe(true);
      const task = newTask(newTaskId(), { principal: 'alice' }, { ttlMs: 60_000 }, Date.now());
      await Promise.all([a.watch(task.taskId), b.watch(task.taskId)]);
      const changed = { ...task, statusMessage: 'half way', version: 2 };
      const sent = a.notifier.notify(changed);
      // Its own streams hear it before any round trip; its own waiters hear it from TasksService.
      expect(a.heard.listen).toEqual([changed]);
      await sent;
      await until(() => b.heard.listen.length === 1 && b.heard.waiters.length === 1, 'B');
      expect(b.heard).toEqual({ listen: [changed], waiters: [changed] });
      // A new task is not sent: no one waits on an id before its creation returns it.
      expect(a.notifier.notify(task)).toBeUndefined();
      // Its own change, heard back from PostgreSQL, is not delivered twice.
      await a.notifier.notify({ ...changed, version: 3 });
      await until(() => b.heard.listen.length === 2, 'the second change at B');
      expect(a.heard.listen.map((record) => record.version)).toEqual([2, 3]);
      expect(a.heard.waiters).toEqual([]);
    } finally {
      await Promise.all([a.notifier.onApplicationShutdown(), b.notifier.onApplicationShutdown()]);
    }
  });

  it('a record too large for a NOTIFY payload is sent as its id and version, and read by who hears it', async () => {
    const store = new PostgresTaskStore({ connection: postgres.url, schema: 'notify_large' });
    const [a, b] = [instance('notify_large'), instance('notify_large')];
    try {
      await Promise.all([a.notifier.ready, b.notifier.ready]);
      const task = newTask(newTaskId(), { principal: 'alice' }, { ttlMs: 60_000 }, Date.now());
      await store.create(task, { maxRows: null });
      await b.watch(task.taskId);
      const large = { ...task, statusMessage: 'x'.repeat(20_000), version: 2 };
      expect(await store.compareAndSet(large, 1)).toBe(true);
      // Sent with another message than the stored one: what B delivers is what it read.
      await a.notifier.notify({ ...large, statusMessage: 'y'.repeat(20_000) });
      await until(() => b.heard.listen.length === 1, 'B');
      expect(b.heard.listen).toEqual([large]);
      expect(b.heard.waiters).toEqual([large]);
    } finally {
      await Promise.all([
        a.notifier.onApplicationShutdown(),
        b.notifier.onApplicationShutdown(),
        store.onApplicationShutdown(),
      ]);
    }
  });

  it("a write of the module's store on its database and schema sends its change itself, in its own statement", async () => {
    const store = new PostgresTaskStore({ connection: postgres.url, schema: 'notify_written' });
    const other = new PostgresTaskStore({ connection: postgres.url, schema: 'notify_apart' });
    const [a, b] = [instance('notify_written', store), instance('notify_written')];
    const apart = instance('notify_written', other);
    const queries = jest.spyOn(store.pool, 'query');
    try {
      await Promise.all([a.notifier.ready, b.notifier.ready, apart.notifier.ready]);
      const task = newTask(newTaskId(), { principal: 'alice' }, { ttlMs: 60_000 }, Date.now());
      await store.create(task, { maxRows: null });
      await b.watch(task.taskId);
      queries.mockClear();
      // One statement: the write and its NOTIFY, one commit; the notifier sends nothing more.
      const changed = { ...task, statusMessage: 'half way', version: 2 };
      expect(await store.compareAndSet(changed, 1)).toBe(true);
      expect(queries).toHaveBeenCalledTimes(1);
      expect(a.notifier.notify(changed)).toBeUndefined();
      expect(a.heard.listen).toEqual([changed]);
      await until(() => b.heard.listen.length === 1, 'B');
      expect(b.heard).toEqual({ listen: [changed], waiters: [changed] });
      // Too large to carry: a reference, and B reads the record.
      const large = { ...changed, statusMessage: 'x'.repeat(20_000), version: 3 };
      expect(await store.compareAndSet(large, 2)).toBe(true);
      expect(a.notifier.notify(large)).toBeUndefined();
      await until(() => b.heard.listen.length === 2, 'B, the large change');
      expect(b.heard.listen[1]).toEqual(large);
      // A write that lost its compare-and-set sends nothing; a record the store did not write
      // (a copy) the notifier sends itself.
      expect(await store.compareAndSet({ ...large, version: 4 }, 2)).toBe(false);
      const copy = { ...large, statusMessage: 'sent by the notifier', version: 4 };
      await expect(a.notifier.notify(copy)).resolves.toBeUndefined();
      await until(() => b.heard.listen.length === 3, 'B, the copy');
      expect(b.heard.listen.map((record) => record.version)).toEqual([2, 3, 4]);
      // A store on another schema is left alone: its writes send nothing.
      const elsewhere = newTask(newTaskId(), { principal: 'alice' }, { ttlMs: 60_000 }, Date.now());
      await other.create(elsewhere, { maxRows: null });
      await b.watch(elsewhere.taskId);
      expect(await other.compareAndSet({ ...elsewhere, version: 2 }, 1)).toBe(true);
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(b.heard.listen.map((record) => record.taskId)).not.toContain(elsewhere.taskId);
    } finally {
      queries.mockRestore();
      await Promise.all([
        a.notifier.onApplicationShutdown(),
        b.notifier.onApplicationShutdown(),
        apart.notifier.onApplicationShutdown(),
        store.onApplicationShutdown(),
        other.onApplicationShutdown(),
      ]);
    }
  });

  it('schemas do not hear each other', async () => {
    const [a, b] = [instance('notify_one'), instance('notify_two')];
    try {
      await Promise.all([a.notifier.ready, b.notifier.ready]);
      const task = newTask(newTaskId(), { principal: 'alice' }, { ttlMs: 60_000 }, Date.now());
      await b.watch(task.taskId);
      await a.notifier.notify({ ...task, version: 2 });
      // A third instance on A's schema hears it: by then B would have too.
      const c = instance('notify_one');
      try {
        await c.watch(task.taskId);
        await a.notifier.notify({ ...task, version: 3 });
        await until(() => c.heard.listen.length === 1, 'C');
        expect(b.heard.listen).toEqual([]);
      } finally {
        await c.notifier.onApplicationShutdown();
      }
    } finally {
      await Promise.all([a.notifier.onApplicationShutdown(), b.notifier.onApplicationShutdown()]);
    }
  });

  // It stops and starts the server: only on a private one.
  (canStopServer ? it : it.skip)('LISTENs again by itself after PostgreSQL restarts', async () => {
    const [a, b] = [instance('notify_restart'), instance('notify_restart')];
    try {
      const task = newTask(newTaskId(), { principal: 'alice' }, { ttlMs: 60_000 }, Date.now());
      await Promise.all([a.notifier.ready, b.watch(task.taskId)]);
      await postgres.kill();
      await until(() => !b.notifier.subscribed, 'B to see the connection break');
      await postgres.start();
      await until(() => a.notifier.subscribed && b.notifier.subscribed, 'both to connect again');
      // B LISTENs again on the task it watches: a change sent once it does reaches it. (Sent until
      // heard: the LISTEN follows the connection by a round trip.)
      let version = 2;
      await until(() => {
        if (b.heard.listen.length > 0) return true;
        void a.notifier.notify({ ...task, version: version++ })?.catch(() => undefined);
        return false;
      }, 'B, after the restart');
      expect(b.heard.listen[0]).toMatchObject({ taskId: task.taskId });
    } finally {
      await Promise.all([a.notifier.onApplicationShutdown(), b.notifier.onApplicationShutdown()]);
    }
  });
});
