import { types } from 'node:util';
import { PostgresTaskStore } from '../../src/postgres/index.js';
import { completeTask, newTask, type TaskRecord, toStoredResult } from '../../src/task.js';
import { newTaskId } from '../../src/task-id.js';
import { canStopServer, startTestPostgres, type TestPostgres } from '../support/postgres-server.js';

let postgres: TestPostgres;

beforeAll(async () => {
  // Every commit synced, as in production: what a create answered must survive a crash.
  postgres = await startTestPostgres({ fsync: true });
}, 60_000);
afterAll(async () => {
  await postgres.stop();
});

/** pg's errors are made in Node's realm, not the test's: `instanceof Error` cannot tell. */
const isNativeError = (value: unknown): boolean => types.isNativeError(value);

/** What `promise` rejected with; fails when it resolved. */
async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => {
      throw new Error('expected a rejection, it resolved');
    },
    (error: unknown) => error,
  );
}

// These tests stop and start the server: only on a private one.
(canStopServer ? describe : describe.skip)('PostgresTaskStore: faults', () => {
  it('keeps every answered write through a crash, fails calls while PostgreSQL is down, and recovers by itself', async () => {
    const store = new PostgresTaskStore({
      connection: postgres.url,
      schema: 'crash',
      timeoutMs: 2_000,
    });
    try {
      const owner = { principal: 'alice' };
      const written: TaskRecord[] = [];
      for (let i = 0; i < 40; i++) {
        const task = newTask(newTaskId(), owner, { ttlMs: 3_600_000 }, Date.now());
        await store.create(task, { maxRows: 1_000, maxTasksPerOwner: 100 });
        if (i % 2 === 0) {
          const done = completeTask(task, toStoredResult({ content: [] }), {}, Date.now());
          if (done instanceof Error) throw done;
          expect(await store.compareAndSet(done, task.version)).toBe(true);
          written.push(done);
        } else {
          written.push(task);
        }
      }
      // As a crash would: no checkpoint, the restart replays the WAL.
      await postgres.kill();
      for (const call of [
        store.get(written[0]!.taskId),
        store.create(newTask(newTaskId(), owner, { ttlMs: 60_000 }, Date.now()), {
          maxRows: null,
        }),
        store.list(owner, { limit: 10 }),
        store.ping(),
      ]) {
        expect(isNativeError(await rejection(call))).toBe(true);
      }
      await postgres.start();
      // The same store, the same pool: its broken connections are replaced on the next calls.
      for (const task of written) expect(await store.get(task.taskId, owner)).toEqual(task);
      const listed = (await store.list(owner, { limit: 100 })).tasks.map((task) => task.taskId);
      expect(listed.sort()).toEqual(written.map((task) => task.taskId).sort());
      const after = newTask(newTaskId(), owner, { ttlMs: 60_000 }, Date.now());
      await store.create(after, { maxRows: 1_000, maxTasksPerOwner: 100 });
      expect(await store.get(after.taskId)).toEqual(after);
    } finally {
      await store.onApplicationShutdown();
    }
  });

  it('a store made while PostgreSQL is down sets its schema up once it is back', async () => {
    await postgres.kill();
    const store = new PostgresTaskStore({
      connection: postgres.url,
      schema: 'late_setup',
      timeoutMs: 2_000,
    });
    try {
      const task = newTask(newTaskId(), { principal: 'bob' }, { ttlMs: 60_000 }, Date.now());
      expect(isNativeError(await rejection(store.create(task, { maxRows: null })))).toBe(true);
      await postgres.start();
      await store.create(task, { maxRows: null });
      expect(await store.get(task.taskId)).toEqual(task);
    } finally {
      await store.onApplicationShutdown();
    }
  });
});
