/**
 * The TaskStore contract: every store implementation runs this suite against a fresh store.
 * It speaks to the store only through the TaskStore interface.
 */
import { randomBytes } from 'node:crypto';
import { TaskError, TaskStoreFullError } from '../src/errors.js';
import type { TaskStore } from '../src/store/task-store.js';
import {
  completeTask,
  newTask,
  progressTask,
  type TaskOwner,
  type TaskRecord,
  toStoredResult,
} from '../src/task.js';

export interface StoreHarness {
  /** A new, empty store. */
  create(): Promise<TaskStore>;
  /** Releases it (close connections); optional. */
  dispose?(store: TaskStore): Promise<void>;
}

const HOUR = 3_600_000;
const alice: TaskOwner = { principal: 'alice', tenant: null };
const id = (): string => randomBytes(32).toString('base64url');

function record(
  owner: TaskOwner = alice,
  ttlMs: number | null = HOUR,
  createdAt = Date.now(),
): TaskRecord {
  return newTask(id(), owner, { ttlMs }, createdAt);
}

function changed(task: TaskRecord, message: string): TaskRecord {
  const next = progressTask(task, message, Date.now());
  if (next instanceof TaskError) throw next;
  return next;
}

function completed(task: TaskRecord, at: number): TaskRecord {
  const next = completeTask(task, toStoredResult({ content: [] }), {}, at);
  if (next instanceof TaskError) throw next;
  return next;
}

export function runTaskStoreContract(name: string, harness: StoreHarness): void {
  describe(`TaskStore contract: ${name}`, () => {
    let store: TaskStore;
    const unlimited = { maxRows: null };

    beforeEach(async () => {
      store = await harness.create();
    });
    afterEach(async () => {
      await harness.dispose?.(store);
    });

    it('create then get returns an equal record', async () => {
      const task = record();
      await store.create(task, unlimited);
      expect(await store.get(task.taskId)).toEqual(task);
    });

    it('get of an unknown id is null', async () => {
      expect(await store.get(id())).toBeNull();
    });

    it('create refuses an id that exists, and keeps the first record', async () => {
      const task = record();
      await store.create(task, unlimited);
      const twin = { ...record(), taskId: task.taskId, statusMessage: 'twin' };
      await expect(store.create(twin, unlimited)).rejects.toBeInstanceOf(TaskError);
      expect((await store.get(task.taskId))?.statusMessage).toBeUndefined();
    });

    it('owner-scoped get: the owner sees the task; another principal, tenant or anonymous do not', async () => {
      const task = record({ principal: 'alice', tenant: 't1' });
      await store.create(task, unlimited);
      expect(await store.get(task.taskId, { principal: 'alice', tenant: 't1' })).toEqual(task);
      expect(await store.get(task.taskId, { principal: 'bob', tenant: 't1' })).toBeNull();
      expect(await store.get(task.taskId, { principal: 'alice', tenant: 't2' })).toBeNull();
      expect(await store.get(task.taskId, { principal: 'alice' })).toBeNull();
      expect(await store.get(task.taskId, { principal: null, tenant: 't1' })).toBeNull();
    });

    it('anonymous tasks belong to the anonymous owner only', async () => {
      const task = record({ principal: null });
      await store.create(task, unlimited);
      expect(await store.get(task.taskId, { principal: null })).toEqual(task);
      expect(await store.get(task.taskId, { principal: null, tenant: null })).toEqual(task);
      expect(await store.get(task.taskId, { principal: 'alice' })).toBeNull();
    });

    it('compareAndSet writes when the version matches and refuses a stale version', async () => {
      const task = record();
      await store.create(task, unlimited);
      const first = changed(task, 'one');
      const rival = changed(task, 'two');
      expect(await store.compareAndSet(first, task.version)).toBe(true);
      expect(await store.compareAndSet(rival, task.version)).toBe(false);
      expect(await store.get(task.taskId)).toEqual(first);
    });

    it('compareAndSet of a missing task is false and creates nothing', async () => {
      const task = record();
      expect(await store.compareAndSet(changed(task, 'x'), task.version)).toBe(false);
      expect(await store.get(task.taskId)).toBeNull();
    });

    it('of many concurrent compareAndSets on one version exactly one wins', async () => {
      const task = record();
      await store.create(task, unlimited);
      const results = await Promise.all(
        Array.from({ length: 50 }, (_, i) =>
          store.compareAndSet(changed(task, `m${i}`), task.version),
        ),
      );
      expect(results.filter(Boolean)).toHaveLength(1);
      expect((await store.get(task.taskId))?.version).toBe(task.version + 1);
    });

    it('delete removes the task and says whether it was there', async () => {
      const task = record();
      await store.create(task, unlimited);
      expect(await store.delete(task.taskId)).toBe(true);
      expect(await store.get(task.taskId)).toBeNull();
      expect(await store.delete(task.taskId)).toBe(false);
    });

    it('an expired task is not returned nor writable, even before cleanup', async () => {
      const task = record(alice, HOUR, Date.now() - 2 * HOUR);
      await store.create(task, unlimited);
      expect(await store.get(task.taskId)).toBeNull();
      expect(await store.get(task.taskId, alice)).toBeNull();
      expect(await store.compareAndSet(changed(task, 'late'), task.version)).toBe(false);
    });

    it('a task with ttlMs null never expires by age', async () => {
      const task = record(alice, null, Date.now() - 1000 * HOUR);
      await store.create(task, unlimited);
      expect(await store.get(task.taskId)).toEqual(task);
      expect(await store.cleanup(Date.now(), { terminalTtlMs: HOUR })).toBe(0);
      expect(await store.get(task.taskId)).toEqual(task);
    });

    it('cleanup removes exactly the tasks past createdAt + ttlMs', async () => {
      const now = Date.now();
      const expired = [1, 2, 3].map((n) => record(alice, HOUR, now - HOUR - n * 1000));
      const boundary = record(alice, HOUR, now - HOUR); // expires exactly at `now`
      const live = [1, 2, 3].map((n) => record(alice, HOUR, now - HOUR + n * 1000));
      for (const task of [...live, ...expired, boundary]) await store.create(task, unlimited);
      expect(await store.cleanup(now, { terminalTtlMs: HOUR })).toBe(4);
      for (const task of [...expired, boundary]) expect(await store.get(task.taskId)).toBeNull();
      for (const task of live) expect(await store.get(task.taskId)).toEqual(task);
      expect(await store.cleanup(now, { terminalTtlMs: HOUR })).toBe(0);
    });

    it('cleanup removes terminal tasks without a TTL once terminalTtlMs old, and only those', async () => {
      const now = Date.now();
      const old = record(alice, null, now - 10 * HOUR);
      const recent = record(alice, null, now - 10 * HOUR);
      const working = record(alice, null, now - 10 * HOUR);
      for (const task of [old, recent, working]) await store.create(task, unlimited);
      const oldDone = completed(old, now - 2 * HOUR);
      const recentDone = completed(recent, now - HOUR / 2);
      expect(await store.compareAndSet(oldDone, old.version)).toBe(true);
      expect(await store.compareAndSet(recentDone, recent.version)).toBe(true);
      expect(await store.cleanup(now, { terminalTtlMs: HOUR })).toBe(1);
      expect(await store.get(old.taskId)).toBeNull();
      expect(await store.get(recent.taskId)).toEqual(recentDone);
      expect(await store.get(working.taskId)).toEqual(working);
    });

    it('cleanup after delete counts only what it removed', async () => {
      const now = Date.now();
      const gone = record(alice, HOUR, now - 2 * HOUR);
      const due = record(alice, HOUR, now - 2 * HOUR);
      await store.create(gone, unlimited);
      await store.create(due, unlimited);
      await store.delete(gone.taskId);
      expect(await store.cleanup(now, { terminalTtlMs: HOUR })).toBe(1);
    });

    it('maxRows: a create beyond it is refused as store full; freeing a row lets it in', async () => {
      const limit = { maxRows: 3 };
      const tasks = [record(), record(), record()];
      for (const task of tasks) await store.create(task, limit);
      const extra = record();
      const refusal = await store.create(extra, limit).catch((error: unknown) => error);
      expect(refusal).toBeInstanceOf(TaskStoreFullError);
      expect((refusal as TaskStoreFullError).code).toBe(-32603);
      expect((refusal as Error).message).toMatch(/full/);
      expect(await store.get(extra.taskId)).toBeNull();
      await store.delete(tasks[0]!.taskId);
      await store.create(extra, limit);
      expect(await store.get(extra.taskId)).toEqual(extra);
    });

    it('maxRows: expired tasks do not hold rows', async () => {
      const limit = { maxRows: 2 };
      await store.create(record(alice, HOUR, Date.now() - 2 * HOUR), limit);
      await store.create(record(), limit);
      const third = record();
      await store.create(third, limit);
      expect(await store.get(third.taskId)).toEqual(third);
    });

    it('maxRows is enforced under concurrent creates', async () => {
      const results = await Promise.allSettled(
        Array.from({ length: 20 }, () => store.create(record(), { maxRows: 5 })),
      );
      expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(5);
      expect(
        results.every((r) => r.status === 'fulfilled' || r.reason instanceof TaskStoreFullError),
      ).toBe(true);
    });

    it('keeps every field of a detailed record intact', async () => {
      const task = record({ principal: 'p', tenant: 'acme' });
      const rich: TaskRecord = {
        ...task,
        status: 'input_required',
        statusMessage: 'Need a name',
        pollIntervalMs: 250,
        inputRequests: {
          name: { method: 'elicitation/create', params: { message: 'Name?', requestedSchema: {} } },
        },
        usedInputKeys: ['name', 'earlier'],
        inputResponses: { earlier: { action: 'accept', content: { x: 1 } } },
        cancelRequested: true,
        version: 1,
      };
      await store.create(rich, unlimited);
      expect(await store.get(task.taskId)).toEqual(rich);
    });
  });
}
