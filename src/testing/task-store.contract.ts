/**
 * The TaskStore contract: the rules every store must keep, as plain test cases that any runner
 * (Jest, Vitest, node:test, Mocha) can run. It speaks to a store only through the public
 * TaskStore interface, and builds its records by hand (stores never apply lifecycle rules).
 *
 * This file may import only the package's main entry and node builtins.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import {
  TaskError,
  TaskQuotaError,
  TaskStoreFullError,
  type TaskOwner,
  type TaskRecord,
  type TaskState,
  type TaskStore,
  type TaskStoreLeases,
} from '../index.js';

/** How the contract gets a store: a fresh, empty one per case, released after it. */
export interface TaskStoreHarness<S extends TaskStore = TaskStore> {
  /** A new, empty store (for a shared database: a fresh key prefix, schema or table). */
  create(): S | Promise<S>;
  /** Releases it (closes connections); runs after each case, passed or failed. Optional. */
  dispose?(store: S): void | Promise<void>;
}

/** One rule of the contract. `run` takes no arguments, so `it(c.name, c.run)` works anywhere. */
export interface TaskStoreContractCase {
  readonly name: string;
  readonly run: () => Promise<void>;
}

const HOUR = 3_600_000;
const alice: TaskOwner = { principal: 'alice', tenant: null };
const aliceOfTenant: TaskOwner = { principal: 'alice', tenant: 't1' };
const bob: TaskOwner = { principal: 'bob', tenant: null };
const carol: TaskOwner = { principal: 'carol', tenant: null };
const unlimited = { maxRows: null };

/**
 * The TaskStore contract as a list of `{ name, run }` cases. Each `run` creates a fresh store
 * through the harness, checks one rule with `node:assert/strict`, and disposes of the store.
 *
 * ```ts
 * for (const c of taskStoreContract({ create: () => new MyTaskStore() })) it(c.name, c.run);
 * ```
 *
 * `harness` may also be the factory alone: `taskStoreContract(() => new MyTaskStore())`.
 */
export function taskStoreContract<S extends TaskStore>(
  harness: TaskStoreHarness<S> | (() => S | Promise<S>),
): TaskStoreContractCase[] {
  const { create, dispose } =
    typeof harness === 'function' ? { create: harness, dispose: undefined } : harness;
  if (typeof create !== 'function') {
    throw new TypeError('taskStoreContract: the harness needs a create() that returns a store');
  }
  return RULES.map(([name, check]) => ({
    name,
    run: async (): Promise<void> => {
      const store = await create.call(harness);
      if (store === null || typeof store !== 'object') {
        throw new TypeError(`harness.create() must return a TaskStore, got ${String(store)}`);
      }
      try {
        await check(store);
      } finally {
        await dispose?.call(harness, store);
      }
    },
  }));
}

/** The names of the contract's cases, in order (for reports and for filtering). */
export function taskStoreContractRules(): string[] {
  return RULES.map(([name]) => name);
}

// ---------------------------------------------------------------------------------------------
// Records, built by hand as a TasksService would write them
// ---------------------------------------------------------------------------------------------

const newId = (): string => randomBytes(32).toString('base64url');

/** A new `working` task, version 1, as `TasksService.create` stores it. */
function record(owner: TaskOwner = alice, ttlMs: number | null = HOUR, createdAt = Date.now()) {
  const task: TaskRecord = {
    taskId: newId(),
    owner: { principal: owner.principal, tenant: owner.tenant ?? null },
    status: 'working',
    createdAt,
    lastUpdatedAt: createdAt,
    ttlMs,
    version: 1,
  };
  return task;
}

/** The next version of `task` with a new status message (a progress write). */
function changed(task: TaskRecord, message: string): TaskRecord {
  return {
    ...task,
    statusMessage: message,
    lastUpdatedAt: Math.max(Date.now(), task.lastUpdatedAt),
    version: task.version + 1,
  };
}

/** The next version of `task`, completed at `at` (no pending input, no cancel request left). */
function completed(task: TaskRecord, at: number): TaskRecord {
  const { inputRequests, inputResponses, cancelRequested, ...kept } = task;
  return {
    ...kept,
    status: 'completed',
    result: { content: [], resultType: 'complete' },
    lastUpdatedAt: Math.max(at, task.lastUpdatedAt),
    version: task.version + 1,
  };
}

// ---------------------------------------------------------------------------------------------
// Assertions with messages that say what the store did wrong
// ---------------------------------------------------------------------------------------------

/**
 * A deep copy without `undefined` properties and with plain prototypes, so that records compare
 * by their data (a store that reads `statusMessage: undefined` back, or builds its objects with
 * another prototype, still holds the same record).
 */
function data(value: unknown): unknown {
  if (Array.isArray(value)) {
    // Built here, not with map(): an array from another realm (a test VM) would keep its prototype.
    const copy: unknown[] = [];
    for (const item of value) copy.push(data(item));
    return copy;
  }
  if (value === null || typeof value !== 'object') return value;
  const copy: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) if (item !== undefined) copy[key] = data(item);
  return copy;
}

function sameRecord(actual: unknown, expected: TaskRecord, what: string): void {
  if (actual === null || actual === undefined) {
    assert.fail(`${what}: expected the record of task ${short(expected)}, got ${String(actual)}`);
  }
  const [got, wanted] = [data(actual), data(expected)];
  try {
    assert.deepStrictEqual(got, wanted);
  } catch (error) {
    if (!(error instanceof assert.AssertionError)) throw error;
    // A message of our own (kept by every runner), with the actual and expected records for diffs.
    throw new assert.AssertionError({
      message: `${what}: the record read back differs from the one written\n${error.message}`,
      actual: got,
      expected: wanted,
      operator: 'deepStrictEqual',
    });
  }
}

function isNull(actual: unknown, what: string): void {
  if (actual !== null) {
    assert.fail(`${what}: expected null, got ${show(actual)}`);
  }
}

function is<T>(actual: T, expected: T, what: string): void {
  if (!Object.is(actual, expected)) {
    assert.fail(`${what}: expected ${show(expected)}, got ${show(actual)}`);
  }
}

/** Fails, saying what the store refused, when `promise` rejects. */
async function accepted(promise: Promise<unknown>, what: string): Promise<void> {
  try {
    await promise;
  } catch (error) {
    assert.fail(`${what}: expected it to be accepted, it was refused with ${errorName(error)}`);
  }
}

/** What `promise` rejected with; fails when it resolved. */
async function refusal(promise: Promise<unknown>, what: string): Promise<unknown> {
  const outcome = await promise.then(
    () => ({ resolved: true as const }),
    (error: unknown) => ({ resolved: false as const, error }),
  );
  if (outcome.resolved)
    assert.fail(`${what}: expected a refusal (a rejected promise), it resolved`);
  return outcome.error;
}

function short(task: TaskRecord): string {
  return `${task.taskId.slice(0, 8)}…`;
}

function show(value: unknown): string {
  if (value === null || value === undefined) return String(value);
  if (typeof value === 'object') {
    const task = value as Partial<TaskRecord>;
    if (typeof task.taskId === 'string') {
      return `a record (status ${String(task.status)}, version ${String(task.version)})`;
    }
    try {
      return JSON.stringify(value);
    } catch {
      return Object.prototype.toString.call(value);
    }
  }
  return typeof value === 'string' ? JSON.stringify(value) : String(value);
}

function errorName(error: unknown): string {
  if (error instanceof Error) return `${error.constructor.name}: ${error.message}`;
  return show(error);
}

// ---------------------------------------------------------------------------------------------
// The rules
// ---------------------------------------------------------------------------------------------

type Rule = readonly [name: string, check: (store: TaskStore) => Promise<void>];

const RULES: readonly Rule[] = [
  [
    'create then get returns an equal record',
    async (store) => {
      const task = record();
      await store.create(task, unlimited);
      sameRecord(await store.get(task.taskId), task, 'get(taskId) after create');
    },
  ],

  [
    'get of an unknown id is null',
    async (store) => {
      isNull(await store.get(newId()), 'get(unknown id)');
      isNull(await store.get(newId(), alice), 'get(unknown id, owner)');
    },
  ],

  [
    'create refuses an id that exists, and keeps the first record',
    async (store) => {
      const task = record();
      await store.create(task, unlimited);
      const twin: TaskRecord = {
        ...record({ principal: 'mallory', tenant: 'x' }),
        taskId: task.taskId,
        statusMessage: 'twin',
      };
      const error = await refusal(
        store.create(twin, unlimited),
        'create(a record whose id exists)',
      );
      assert.ok(
        error instanceof TaskError,
        `create(a record whose id exists) must reject with a TaskError, got ${errorName(error)}`,
      );
      sameRecord(await store.get(task.taskId), task, 'get(taskId) after a refused duplicate');
    },
  ],

  [
    'owner-scoped get: the owner sees the task; another principal, tenant or anonymous do not',
    async (store) => {
      const task = record({ principal: 'alice', tenant: 't1' });
      await store.create(task, unlimited);
      sameRecord(
        await store.get(task.taskId, { principal: 'alice', tenant: 't1' }),
        task,
        'get(taskId, its owner)',
      );
      isNull(
        await store.get(task.taskId, { principal: 'bob', tenant: 't1' }),
        'get(taskId, another principal of the same tenant)',
      );
      isNull(
        await store.get(task.taskId, { principal: 'alice', tenant: 't2' }),
        'get(taskId, the same principal in another tenant)',
      );
      isNull(
        await store.get(task.taskId, { principal: 'alice' }),
        'get(taskId, the same principal without a tenant)',
      );
      isNull(
        await store.get(task.taskId, { principal: null, tenant: 't1' }),
        'get(taskId, anonymous in the same tenant)',
      );
    },
  ],

  [
    'an absent tenant is the null tenant',
    async (store) => {
      const task = record({ principal: 'alice' });
      await store.create(task, unlimited);
      sameRecord(
        await store.get(task.taskId, { principal: 'alice' }),
        task,
        'get(taskId, { principal }) of a task without a tenant',
      );
      sameRecord(
        await store.get(task.taskId, { principal: 'alice', tenant: null }),
        task,
        'get(taskId, { principal, tenant: null }) of a task without a tenant',
      );
      isNull(
        await store.get(task.taskId, { principal: 'alice', tenant: 't1' }),
        'get(taskId, the same principal with a tenant) of a task without a tenant',
      );
    },
  ],

  [
    'anonymous tasks belong to the anonymous owner only',
    async (store) => {
      const task = record({ principal: null });
      await store.create(task, unlimited);
      sameRecord(await store.get(task.taskId, { principal: null }), task, 'get(taskId, anonymous)');
      sameRecord(
        await store.get(task.taskId, { principal: null, tenant: null }),
        task,
        'get(taskId, anonymous with tenant null)',
      );
      isNull(await store.get(task.taskId, { principal: 'alice' }), 'get(anonymous task, alice)');
    },
  ],

  [
    'compareAndSet writes when the version matches and refuses a stale version',
    async (store) => {
      const task = record();
      await store.create(task, unlimited);
      const first = changed(task, 'one');
      const rival = changed(task, 'two');
      is(await store.compareAndSet(first, task.version), true, 'compareAndSet(matching version)');
      is(
        await store.compareAndSet(rival, task.version),
        false,
        'compareAndSet(a version that was already replaced)',
      );
      sameRecord(await store.get(task.taskId), first, 'get(taskId) after one write won');
    },
  ],

  [
    'compareAndSet replaces the whole record: fields the new record lacks are gone',
    async (store) => {
      const task: TaskRecord = {
        ...record(),
        status: 'input_required',
        statusMessage: 'Need a name',
        inputRequests: {
          name: {
            method: 'elicitation/create',
            params: { message: 'Name?', requestedSchema: { type: 'object', properties: {} } },
          },
        },
        usedInputKeys: ['name'],
        inputResponses: { earlier: { action: 'accept' } },
        cancelRequested: true,
      };
      await store.create(task, unlimited);
      const { statusMessage, ...rest } = completed(task, Date.now());
      is(await store.compareAndSet(rest, task.version), true, 'compareAndSet(matching version)');
      const read = await store.get(task.taskId);
      sameRecord(read, rest, 'get(taskId) after a write that drops fields');
      for (const key of ['statusMessage', 'inputRequests', 'inputResponses', 'cancelRequested']) {
        assert.ok(
          (read as unknown as Record<string, unknown>)[key] === undefined,
          `get(taskId) after compareAndSet of a record without ${key}: ${key} is still there`,
        );
      }
    },
  ],

  [
    'compareAndSet of a missing task is false and creates nothing',
    async (store) => {
      const task = record();
      is(
        await store.compareAndSet(changed(task, 'x'), task.version),
        false,
        'compareAndSet(a task never created)',
      );
      isNull(await store.get(task.taskId), 'get(taskId) after compareAndSet of a missing task');
    },
  ],

  [
    'of many concurrent compareAndSets on one version exactly one wins',
    async (store) => {
      const task = record();
      await store.create(task, unlimited);
      const rivals = Array.from({ length: 50 }, (_, i) => changed(task, `m${i}`));
      const results = await Promise.all(
        rivals.map((rival) => store.compareAndSet(rival, task.version)),
      );
      const winners = results.filter((won) => won === true).length;
      is(winners, 1, '50 concurrent compareAndSets on one version: number that returned true');
      const winner = rivals[results.indexOf(true)]!;
      const stored = await store.get(task.taskId);
      is(stored?.version, task.version + 1, 'the version stored after the race');
      sameRecord(stored, winner, 'get(taskId) after the race (the record of the one that won)');
    },
  ],

  [
    'delete removes the task and says whether it was there',
    async (store) => {
      const task = record();
      await store.create(task, unlimited);
      is(await store.delete(task.taskId), true, 'delete(a stored task)');
      isNull(await store.get(task.taskId), 'get(taskId) after delete');
      is(await store.delete(task.taskId), false, 'delete(a task deleted before)');
      is(await store.delete(newId()), false, 'delete(an id never stored)');
    },
  ],

  [
    'an expired task is not returned nor writable, even before cleanup',
    async (store) => {
      const task = record(alice, HOUR, Date.now() - 2 * HOUR);
      await store.create(task, unlimited);
      isNull(await store.get(task.taskId), 'get(an expired task)');
      isNull(await store.get(task.taskId, alice), 'get(an expired task, its owner)');
      is(
        await store.compareAndSet(changed(task, 'late'), task.version),
        false,
        'compareAndSet(an expired task)',
      );
      isNull(await store.get(task.taskId), 'get(an expired task) after a refused write');
    },
  ],

  [
    'a task with ttlMs null never expires by age',
    async (store) => {
      const task = record(alice, null, Date.now() - 1000 * HOUR);
      await store.create(task, unlimited);
      sameRecord(await store.get(task.taskId), task, 'get(a 1000 h old working task without TTL)');
      is(
        await store.cleanup(Date.now(), { terminalTtlMs: HOUR }),
        0,
        'cleanup() count with only a working task without TTL',
      );
      sameRecord(
        await store.get(task.taskId),
        task,
        'get(a working task without TTL) after cleanup',
      );
    },
  ],

  [
    'cleanup removes exactly the tasks past createdAt + ttlMs',
    async (store) => {
      const now = Date.now();
      const expired = [1, 2, 3].map((n) => record(alice, HOUR, now - HOUR - n * 1000));
      const boundary = record(alice, HOUR, now - HOUR); // expires exactly at `now`
      const live = [1, 2, 3].map((n) => record(alice, HOUR, now - HOUR + n * 1000));
      for (const task of [...live, ...expired, boundary]) await store.create(task, unlimited);
      is(
        await store.cleanup(now, { terminalTtlMs: HOUR }),
        4,
        'cleanup(now) count with 3 expired tasks and 1 expiring exactly at now (3 live)',
      );
      for (const task of [...expired, boundary]) {
        isNull(await store.get(task.taskId), 'get(a task cleanup removed)');
      }
      for (const task of live) sameRecord(await store.get(task.taskId), task, 'get(a live task)');
      is(await store.cleanup(now, { terminalTtlMs: HOUR }), 0, 'a second cleanup(now) count');
    },
  ],

  [
    'cleanup judges expiry at the `now` it is given',
    async (store) => {
      const now = Date.now();
      const task = record(alice, HOUR, now - HOUR - HOUR / 2); // expired half an hour ago
      await store.create(task, unlimited);
      is(
        await store.cleanup(now - HOUR, { terminalTtlMs: HOUR }),
        0,
        'cleanup(an hour ago) count, with a task that expired half an hour ago',
      );
      is(
        await store.cleanup(now, { terminalTtlMs: HOUR }),
        1,
        'cleanup(now) count, with a task that expired half an hour ago',
      );
    },
  ],

  [
    'cleanup removes terminal tasks without a TTL once terminalTtlMs old, and only those',
    async (store) => {
      const now = Date.now();
      const old = record(alice, null, now - 10 * HOUR);
      const recent = record(alice, null, now - 10 * HOUR);
      const working = record(alice, null, now - 10 * HOUR);
      for (const task of [old, recent, working]) await store.create(task, unlimited);
      const oldDone = completed(old, now - 2 * HOUR);
      const recentDone = completed(recent, now - HOUR / 2);
      is(await store.compareAndSet(oldDone, old.version), true, 'compareAndSet(completed)');
      is(await store.compareAndSet(recentDone, recent.version), true, 'compareAndSet(completed)');
      is(
        await store.cleanup(now, { terminalTtlMs: HOUR }),
        1,
        'cleanup(now, terminalTtlMs 1 h) count: finished 2 h ago, finished 30 min ago, working',
      );
      isNull(await store.get(old.taskId), 'get(a task finished 2 h ago) after cleanup');
      sameRecord(
        await store.get(recent.taskId),
        recentDone,
        'get(a task finished 30 min ago) after cleanup',
      );
      sameRecord(await store.get(working.taskId), working, 'get(a working task) after cleanup');
    },
  ],

  [
    'cleanup of finished tasks without a TTL: exactly terminalTtlMs old goes, younger stays, twice removes nothing more',
    async (store) => {
      const now = Date.now();
      const due = record(alice, null, now - 10 * HOUR);
      const young = record(alice, null, now - 10 * HOUR);
      for (const task of [due, young]) await store.create(task, unlimited);
      const dueDone = completed(due, now - HOUR);
      const youngDone = completed(young, now - HOUR + 1);
      is(await store.compareAndSet(dueDone, due.version), true, 'compareAndSet(completed)');
      is(await store.compareAndSet(youngDone, young.version), true, 'compareAndSet(completed)');
      is(
        await store.cleanup(now, { terminalTtlMs: HOUR }),
        1,
        'cleanup(now, terminalTtlMs 1 h) count: finished exactly 1 h ago, finished 1 ms later',
      );
      isNull(await store.get(due.taskId), 'get(a task finished exactly terminalTtlMs ago)');
      sameRecord(
        await store.get(young.taskId),
        youngDone,
        'get(a task finished 1 ms less than terminalTtlMs ago)',
      );
      is(await store.cleanup(now, { terminalTtlMs: HOUR }), 0, 'a second cleanup(now) count');
    },
  ],

  [
    'cleanup keeps a finished task with a TTL until that TTL ends',
    async (store) => {
      const now = Date.now();
      const task = record(alice, 24 * HOUR, now - 10 * HOUR);
      await store.create(task, unlimited);
      const done = completed(task, now - 9 * HOUR);
      is(await store.compareAndSet(done, task.version), true, 'compareAndSet(completed)');
      is(
        await store.cleanup(now, { terminalTtlMs: HOUR }),
        0,
        'cleanup(now, terminalTtlMs 1 h) count with a task finished 9 h ago whose 24 h TTL runs on',
      );
      sameRecord(await store.get(task.taskId), done, 'get(a finished task within its TTL)');
    },
  ],

  [
    'cleanup after delete counts only what it removed',
    async (store) => {
      const now = Date.now();
      const gone = record(alice, HOUR, now - 2 * HOUR);
      const due = record(alice, HOUR, now - 2 * HOUR);
      await store.create(gone, unlimited);
      await store.create(due, unlimited);
      await store.delete(gone.taskId);
      is(
        await store.cleanup(now, { terminalTtlMs: HOUR }),
        1,
        'cleanup(now) count with two expired tasks, one of them deleted before',
      );
    },
  ],

  [
    'maxRows: a create beyond it is refused as store full; freeing a row lets it in',
    async (store) => {
      const limit = { maxRows: 3 };
      const tasks = [record(), record(), record()];
      for (const task of tasks) await store.create(task, limit);
      const extra = record();
      const error = await refusal(store.create(extra, limit), 'create(a 4th task, maxRows 3)');
      assert.ok(
        error instanceof TaskStoreFullError,
        `create(a 4th task, maxRows 3) must reject with TaskStoreFullError, got ${errorName(error)}`,
      );
      is(error.code, -32603, 'the TaskStoreFullError code');
      assert.match(error.message, /full/, 'the TaskStoreFullError message must say "full"');
      isNull(await store.get(extra.taskId), 'get(the refused task)');
      await store.delete(tasks[0]!.taskId);
      await accepted(
        store.create(extra, limit),
        'create(at maxRows 3, after one of 3 was deleted)',
      );
      sameRecord(await store.get(extra.taskId), extra, 'get(a task created after a delete)');
    },
  ],

  [
    'maxRows: expired tasks do not hold rows',
    async (store) => {
      const limit = { maxRows: 2 };
      await store.create(record(alice, HOUR, Date.now() - 2 * HOUR), limit);
      await store.create(record(), limit);
      const third = record();
      await accepted(
        store.create(third, limit),
        'create(a task at maxRows 2, with one live and one expired task stored)',
      );
      sameRecord(
        await store.get(third.taskId),
        third,
        'get(a task created at maxRows 2 beside one live and one expired task)',
      );
    },
  ],

  [
    'maxRows is enforced under concurrent creates',
    async (store) => {
      const results = await Promise.allSettled(
        Array.from({ length: 20 }, () => store.create(record(), { maxRows: 5 })),
      );
      const accepted = results.filter((r) => r.status === 'fulfilled').length;
      is(accepted, 5, '20 concurrent creates with maxRows 5: number accepted');
      for (const result of results) {
        if (result.status === 'rejected' && !(result.reason instanceof TaskStoreFullError)) {
          assert.fail(
            `a concurrent create beyond maxRows must reject with TaskStoreFullError, got ${errorName(result.reason)}`,
          );
        }
      }
    },
  ],

  [
    "maxTasksPerOwner: at the quota the finished task that expires first makes room, never a live one or another owner's",
    async (store) => {
      const quota = { maxRows: null, maxTasksPerOwner: 3 };
      const now = Date.now();
      // `first` expires first (made earlier, same TTL); `second` finishes too; `live` runs.
      const first = record(alice, HOUR, now - 2000);
      const second = record(alice, HOUR, now - 1000);
      const live = record(alice, HOUR, now - 500);
      const bobs = record(bob);
      for (const task of [first, second, live, bobs]) await store.create(task, quota);
      const finished = (task: TaskRecord): TaskRecord => ({
        ...task,
        status: 'completed',
        result: { content: [], resultType: 'complete' },
        lastUpdatedAt: Date.now(),
        version: 2,
      });
      // Finished in the other order: room goes by expiry, not by when a task finished.
      const secondDone = finished(second);
      is(await store.compareAndSet(secondDone, 1), true, 'compareAndSet(finish a task)');
      is(await store.compareAndSet(finished(first), 1), true, 'compareAndSet(finish a task)');
      const fourth = record(alice);
      await accepted(store.create(fourth, quota), "create(alice's 4th task, quota 3, 2 finished)");
      isNull(await store.get(first.taskId), 'get(the finished task that expires first)');
      sameRecord(await store.get(second.taskId), secondDone, 'get(the other finished task)');
      sameRecord(await store.get(live.taskId), live, 'get(a live task at the quota)');
      sameRecord(await store.get(fourth.taskId), fourth, 'get(the task that took the place)');
      const fifth = record(alice);
      await accepted(store.create(fifth, quota), "create(alice's 5th task, quota 3, 1 finished)");
      isNull(await store.get(second.taskId), 'get(the last finished task, given up)');
      const sixth = record(alice);
      const error = await refusal(store.create(sixth, quota), 'create(at quota 3, all live)');
      assert.ok(
        error instanceof TaskQuotaError,
        `create(at maxTasksPerOwner 3, every task live) must reject with TaskQuotaError, got ${errorName(error)}`,
      );
      is(error.code, -32603, 'the TaskQuotaError code');
      assert.deepStrictEqual(error.data, { limit: 'maxTasksPerOwner', max: 3 });
      isNull(await store.get(sixth.taskId), 'get(the refused task)');
      for (const task of [live, fourth, fifth]) {
        sameRecord(await store.get(task.taskId), task, 'get(a live task after a refusal)');
      }
      sameRecord(await store.get(bobs.taskId), bobs, "get(bob's task, after alice's quota)");
      await accepted(
        store.create(record(bob), quota),
        "create(bob's 2nd task beside alice at her quota)",
      );
    },
  ],

  [
    'maxTasksPerOwner: owners are compared exactly, expired tasks do not count, a delete frees a place',
    async (store) => {
      const quota = { maxRows: null, maxTasksPerOwner: 2 };
      await store.create(record(alice, HOUR, Date.now() - 2 * HOUR), quota);
      const kept = record(alice);
      await store.create(kept, quota);
      const second = record(alice);
      await accepted(store.create(second, quota), 'create(at quota 2, beside one expired task)');
      await accepted(
        store.create(record(aliceOfTenant), quota),
        'create(the same principal in a tenant, another owner)',
      );
      await refusal(store.create(record(alice), quota), 'create(at quota 2, both live)');
      await store.delete(kept.taskId);
      await accepted(store.create(record(alice), quota), 'create(at quota 2, after a delete)');
      await accepted(
        store.create(record(alice), { maxRows: null }),
        'create(with no maxTasksPerOwner: no quota)',
      );
    },
  ],

  [
    'maxTasksPerOwner is enforced under concurrent creates',
    async (store) => {
      const quota = { maxRows: null, maxTasksPerOwner: 5 };
      const results = await Promise.allSettled(
        Array.from({ length: 20 }, () => store.create(record(carol), quota)),
      );
      is(
        results.filter((r) => r.status === 'fulfilled').length,
        5,
        '20 concurrent creates of one owner with maxTasksPerOwner 5: number accepted',
      );
      for (const result of results) {
        if (result.status === 'rejected' && !(result.reason instanceof TaskQuotaError)) {
          assert.fail(
            `a concurrent create beyond the quota must reject with TaskQuotaError, got ${errorName(result.reason)}`,
          );
        }
      }
      await accepted(
        store.create(record(bob), quota),
        'create(another owner, beside a full quota)',
      );
    },
  ],

  [
    'keeps every field of a detailed record intact',
    async (store) => {
      const task = record({ principal: 'p', tenant: 'acme' });
      const rich: TaskRecord = {
        ...task,
        status: 'input_required',
        statusMessage: 'Need a name',
        pollIntervalMs: 250,
        inputRequests: {
          name: {
            method: 'elicitation/create',
            params: { message: 'Name?', requestedSchema: { type: 'object', properties: {} } },
          },
        },
        usedInputKeys: ['name', 'earlier'],
        inputResponses: { earlier: { action: 'accept', content: { x: 1 } } },
        cancelRequested: true,
        version: 1,
      };
      await store.create(rich, unlimited);
      sameRecord(await store.get(task.taskId), rich, 'get(a record with every field)');
      const failed: TaskRecord = {
        ...task,
        status: 'failed',
        statusMessage: 'Boom',
        error: { code: -32001, message: 'Boom', data: { retry: false, at: [1, 'two'] } },
        lastUpdatedAt: task.lastUpdatedAt + 1,
        version: 2,
      };
      is(await store.compareAndSet(failed, rich.version), true, 'compareAndSet(failed)');
      sameRecord(await store.get(task.taskId), failed, 'get(a failed record with error data)');
      const done: TaskRecord = {
        ...task,
        status: 'completed',
        result: {
          content: [{ type: 'text', text: 'ünïcødé ✓' }],
          structuredContent: { sum: 3, nested: { list: [1, null, true] } },
          isError: false,
          _meta: { k: 'v' },
          resultType: 'complete',
        },
        version: 3,
      };
      is(await store.compareAndSet(done, failed.version), true, 'compareAndSet(completed)');
      sameRecord(await store.get(task.taskId), done, 'get(a completed record with its result)');
    },
  ],
  [
    'list (when the store has it): the owner’s tasks newest first, page by page, each once',
    async (store) => {
      if (!store.list) return;
      const t0 = Date.now() - 60_000;
      const mine: TaskRecord[] = [];
      for (let i = 0; i < 7; i++) mine.push(record(alice, HOUR, t0 + (i < 2 ? 0 : i) * 1000));
      const others = [record(bob), record(aliceOfTenant), record(bob)];
      for (const task of [...mine, ...others]) await store.create(task, unlimited);
      const expected = mine
        .slice()
        .sort((a, b) => b.createdAt - a.createdAt || (a.taskId < b.taskId ? 1 : -1))
        .map((task) => task.taskId);
      const seen = await listAll(store, alice, 3);
      assert.deepStrictEqual(seen, expected, 'list(alice, limit 3): the pages, in order');
      const page = await store.list(alice, { limit: 100 });
      sameRecord(page.tasks[0], mine[6]!, 'list(alice): the newest record');
      is(page.nextCursor, undefined, 'list(alice, limit 100): nextCursor of the only page');
      assert.deepStrictEqual(
        await listAll(store, aliceOfTenant, 10),
        [others[1]!.taskId],
        'list(alice of tenant t1): only her tasks in that tenant',
      );
      is((await listAll(store, carol, 10)).length, 0, 'list(an owner without tasks)');
    },
  ],
  [
    'list (when the store has it): expired and deleted tasks never appear',
    async (store) => {
      if (!store.list) return;
      const live = record();
      const expired = record(alice, HOUR, Date.now() - 2 * HOUR);
      const deleted = record();
      for (const task of [live, expired, deleted]) await store.create(task, unlimited);
      await store.delete(deleted.taskId);
      assert.deepStrictEqual(await listAll(store, alice, 1), [live.taskId], 'list(alice)');
    },
  ],
  [
    'list (when the store has it): a cursor keeps its place while tasks are created',
    async (store) => {
      if (!store.list) return;
      const t0 = Date.now() - 60_000;
      const first = [0, 1, 2, 3, 4].map((i) => record(alice, HOUR, t0 + i));
      for (const task of first) await store.create(task, unlimited);
      const page1 = await store.list(alice, { limit: 2 });
      for (let i = 0; i < 3; i++) await store.create(record(), unlimited);
      const rest: string[] = page1.tasks.map((task) => task.taskId);
      let cursor = page1.nextCursor;
      while (cursor !== undefined) {
        const page = await store.list(alice, { cursor, limit: 2 });
        rest.push(...page.tasks.map((task) => task.taskId));
        cursor = page.nextCursor;
      }
      assert.deepStrictEqual(
        rest,
        first.map((task) => task.taskId).reverse(),
        'the pages after the first: the older tasks, none twice, none missing',
      );
    },
  ],
  [
    'list (when the store has it): a cursor it did not make is refused with a TaskError',
    async (store) => {
      if (!store.list) return;
      await store.create(record(), unlimited);
      for (const cursor of ['nonsense', '', 'AAAA', Buffer.from('1:x').toString('base64url')]) {
        const error = await refusal(store.list(alice, { cursor, limit: 5 }), `list(${cursor})`);
        if (!(error instanceof TaskError)) {
          assert.fail(`list(cursor ${JSON.stringify(cursor)}): refused with ${errorName(error)}`);
        }
      }
    },
  ],
  [
    'list (when the store has it): a cursor keeps its place under concurrent creates, filtered or not',
    async (store) => {
      if (!store.list) return;
      const t0 = Date.now() - 60_000;
      const older = [0, 1, 2, 3, 4, 5].map((i) => ({
        ...record(alice, HOUR, t0 + i),
        status: (i % 2 === 0 ? 'completed' : 'working') as TaskState,
      }));
      for (const task of older) await store.create(task, unlimited);
      const status = store.listsByStatus === true ? (['completed'] as TaskState[]) : undefined;
      const first = await store.list(alice, { limit: 1, ...(status && { status }) });
      // Newer tasks, of both states, land while the rest of the pages are read.
      const creating = Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          store.create({ ...record(), status: i % 2 === 0 ? 'completed' : 'working' }, unlimited),
        ),
      );
      const rest = first.tasks.map((task) => task.taskId);
      let cursor = first.nextCursor;
      while (cursor !== undefined) {
        const page = await store.list(alice, { cursor, limit: 1, ...(status && { status }) });
        rest.push(...page.tasks.map((task) => task.taskId));
        cursor = page.nextCursor;
      }
      await creating;
      const expected = older
        .filter((task) => status === undefined || task.status === 'completed')
        .map((task) => task.taskId)
        .reverse();
      assert.deepStrictEqual(
        rest,
        expected,
        'the pages: the older tasks, none twice, none missing',
      );
    },
  ],
  [
    'list by status (when the store filters): one state or several, by the current status, newest first, owner-scoped',
    async (store) => {
      if (!store.list || store.listsByStatus !== true) return;
      const t0 = Date.now() - 60_000;
      const states: TaskState[] = ['working', 'completed', 'failed', 'cancelled', 'input_required'];
      const mine = Array.from({ length: 15 }, (_, i) => ({
        ...record(alice, HOUR, t0 + i * 10),
        status: states[i % states.length]!,
      }));
      const expiredDone = { ...record(alice, HOUR, Date.now() - 2 * HOUR), status: 'completed' };
      const othersDone = [bob, aliceOfTenant].map((owner) => ({
        ...record(owner),
        status: 'completed' as TaskState,
      }));
      for (const task of [...mine, expiredDone as TaskRecord, ...othersDone]) {
        await store.create(task, unlimited);
      }
      // A task that finishes is listed by the status it has now.
      const finished = completed(mine[0]!, Date.now());
      is(await store.compareAndSet(finished, mine[0]!.version), true, 'compareAndSet(completed)');
      const now = [finished, ...mine.slice(1)];
      const newest = (wanted: TaskState[]): string[] =>
        now
          .filter((task) => wanted.includes(task.status))
          .map((task) => task.taskId)
          .reverse();
      assert.deepStrictEqual(
        await listAll(store, alice, 2, 'completed'),
        newest(['completed']),
        'list(alice, status "completed", limit 2): the pages, in order',
      );
      assert.deepStrictEqual(
        await listAll(store, alice, 2, ['failed', 'cancelled']),
        newest(['failed', 'cancelled']),
        'list(alice, status ["failed", "cancelled"], limit 2): the pages, in order',
      );
      assert.deepStrictEqual(
        await listAll(store, alice, 100, ['working']),
        newest(['working']),
        'list(alice, status ["working"]): a finished task no longer listed as working',
      );
      const page = await store.list(alice, { limit: 100, status: 'input_required' });
      sameRecord(page.tasks[0], mine[14]!, 'list(alice, input_required): the newest record');
      assert.deepStrictEqual(
        await listAll(store, aliceOfTenant, 10, 'completed'),
        [othersDone[1]!.taskId],
        'list(alice of tenant t1, completed): only her task in that tenant',
      );
    },
  ],
  [
    'list by status (when the store filters): a rare state far down the listing is still reached, page by page',
    async (store) => {
      if (!store.list || store.listsByStatus !== true) return;
      const t0 = Date.now() - 60_000;
      const rare = [0, 1, 2].map((i) => ({ ...record(alice, HOUR, t0 + i), status: 'failed' }));
      for (const task of rare) await store.create(task as TaskRecord, unlimited);
      await Promise.all(
        Array.from({ length: 400 }, (_, i) =>
          store.create(record(alice, HOUR, t0 + 1000 + i), unlimited),
        ),
      );
      assert.deepStrictEqual(
        await listAll(store, alice, 2, 'failed'),
        rare.map((task) => task.taskId).reverse(),
        'list(alice, status "failed", limit 2) under 400 newer working tasks',
      );
    },
  ],
  [
    'listAll (when the store has it): every owner’s tasks newest first, page by page, each once',
    async (store) => {
      if (!store.listAll) return;
      const t0 = Date.now() - 60_000;
      const anonymous: TaskOwner = { principal: null, tenant: null };
      const owners = [alice, bob, aliceOfTenant, anonymous, carol];
      // Many tasks of one millisecond (their order is their id's), between older and newer ones.
      const tasks = Array.from({ length: 40 }, (_, i) =>
        record(owners[i % owners.length], HOUR, t0 + (i < 5 ? i : i < 35 ? 100 : i * 10)),
      );
      for (const task of tasks) await store.create(task, unlimited);
      const expected = newestFirst(tasks);
      assert.deepStrictEqual(
        await listEveryOwner(store, 4),
        expected,
        'listAll(limit 4): the pages, in order',
      );
      const page = await store.listAll({ limit: 100 });
      sameRecord(page.tasks[0], tasks[39]!, 'listAll(limit 100): the newest record');
      is(page.nextCursor, undefined, 'listAll(limit 100): nextCursor of the only page');
      // A cursor keeps its place when the task it ended at is deleted before the next page.
      const first = await store.listAll({ limit: 12 });
      const last = first.tasks[first.tasks.length - 1]!;
      is(await store.delete(last.taskId), true, 'delete(the last task of a page)');
      const rest = await listEveryOwner(store, 7, first.nextCursor);
      assert.deepStrictEqual(
        [...first.tasks.map((task) => task.taskId), ...rest],
        expected,
        'listAll after the page’s last task was deleted: the pages go on where it stood',
      );
    },
  ],
  [
    'listAll (when the store has it): expired and deleted tasks never appear, before or after cleanup',
    async (store) => {
      if (!store.listAll) return;
      const live = [record(alice), record(bob, null)];
      const expired = [record(alice, HOUR, Date.now() - 2 * HOUR), record(carol, 1000, 0)];
      const deleted = record(bob);
      for (const task of [...live, ...expired, deleted]) await store.create(task, unlimited);
      await store.delete(deleted.taskId);
      const listed = newestFirst(live);
      assert.deepStrictEqual(await listEveryOwner(store, 1), listed, 'listAll before cleanup');
      await store.cleanup(Date.now(), { terminalTtlMs: HOUR });
      assert.deepStrictEqual(await listEveryOwner(store, 1), listed, 'listAll after cleanup');
    },
  ],
  [
    'listAll (when the store has it): a cursor keeps its place under concurrent creates, filtered or not',
    async (store) => {
      if (!store.listAll) return;
      const t0 = Date.now() - 60_000;
      const older = [0, 1, 2, 3, 4, 5, 6, 7].map((i) => ({
        ...record(i % 2 === 0 ? alice : bob, HOUR, t0 + i),
        toolName: i % 4 < 2 ? 'render' : 'export',
      }));
      for (const task of older) await store.create(task, unlimited);
      const stored = [...older];
      for (const [round, toolName] of [undefined, 'render'].entries()) {
        const listed = newestFirst(
          stored.filter((task) => toolName === undefined || task.toolName === toolName),
        );
        const first = await store.listAll({ limit: 1, ...(toolName && { toolName }) });
        // Newer tasks, of both tools and several owners, land while the other pages are read
        // (later than any task of the round before, whose newest may start this round's pages).
        const later = Date.now() + (round + 1) * 1000;
        const newer = Array.from({ length: 20 }, (_, i) => ({
          ...record(i % 2 === 0 ? carol : alice, HOUR, later),
          toolName: i % 2 ? 'render' : 'export',
        }));
        const creating = Promise.all(newer.map((task) => store.create(task, unlimited)));
        const seen = first.tasks.map((task) => task.taskId);
        seen.push(...(await listEveryOwner(store, 1, first.nextCursor, { toolName })));
        await creating;
        stored.push(...newer);
        assert.deepStrictEqual(
          seen,
          listed,
          `listAll(toolName ${String(toolName)}): the tasks there at the first page, none twice, none missing`,
        );
      }
    },
  ],
  [
    'listAll (when the store has it): toolName keeps that tool’s tasks only, with a status filter too',
    async (store) => {
      if (!store.listAll) return;
      const t0 = Date.now() - 60_000;
      const tools = ['render', 'export', undefined];
      const tasks = Array.from({ length: 24 }, (_, i) => {
        const task: TaskRecord = {
          ...record([alice, bob, carol][i % 3], HOUR, t0 + i),
          status: i % 2 === 0 ? 'working' : 'completed',
        };
        const toolName = tools[i % 4 === 3 ? 2 : i % 2];
        return toolName === undefined ? task : { ...task, toolName };
      });
      for (const task of tasks) await store.create(task, unlimited);
      const wanted = (tool: string, status?: TaskState): string[] =>
        newestFirst(
          tasks.filter(
            (task) => task.toolName === tool && (status === undefined || task.status === status),
          ),
        );
      assert.deepStrictEqual(
        await listEveryOwner(store, 2, undefined, { toolName: 'render' }),
        wanted('render'),
        'listAll(toolName "render", limit 2)',
      );
      assert.deepStrictEqual(
        await listEveryOwner(store, 100, undefined, { toolName: 'nothing made me' }),
        [],
        'listAll(toolName of no task)',
      );
      if (store.listsByStatus !== true) return;
      assert.deepStrictEqual(
        await listEveryOwner(store, 2, undefined, { toolName: 'export', status: 'completed' }),
        wanted('export', 'completed'),
        'listAll(toolName "export", status "completed", limit 2)',
      );
    },
  ],
  [
    'listAll by status (when the store filters): one state or several, by the current status, every owner',
    async (store) => {
      if (!store.listAll || store.listsByStatus !== true) return;
      const t0 = Date.now() - 60_000;
      const states: TaskState[] = ['working', 'completed', 'failed', 'cancelled', 'input_required'];
      const tasks = Array.from({ length: 15 }, (_, i) => ({
        ...record([alice, bob, aliceOfTenant][i % 3], HOUR, t0 + i * 10),
        status: states[i % states.length]!,
      }));
      const expiredDone = { ...record(bob, HOUR, Date.now() - 2 * HOUR), status: 'completed' };
      for (const task of [...tasks, expiredDone as TaskRecord]) await store.create(task, unlimited);
      // A task that finishes is listed by the status it has now.
      const finished = completed(tasks[0]!, Date.now());
      is(await store.compareAndSet(finished, tasks[0]!.version), true, 'compareAndSet(completed)');
      const now = [finished, ...tasks.slice(1)];
      const wanted = (status: TaskState[]): string[] =>
        newestFirst(now.filter((task) => status.includes(task.status)));
      assert.deepStrictEqual(
        await listEveryOwner(store, 2, undefined, { status: 'completed' }),
        wanted(['completed']),
        'listAll(status "completed", limit 2)',
      );
      assert.deepStrictEqual(
        await listEveryOwner(store, 2, undefined, { status: ['failed', 'cancelled'] }),
        wanted(['failed', 'cancelled']),
        'listAll(status ["failed", "cancelled"], limit 2)',
      );
      assert.deepStrictEqual(
        await listEveryOwner(store, 100, undefined, { status: ['working'] }),
        wanted(['working']),
        'listAll(status ["working"]): a finished task no longer listed as working',
      );
    },
  ],
  [
    'listAll (when the store has it): a cursor it did not make is refused with a TaskError',
    async (store) => {
      if (!store.listAll) return;
      await store.create(record(), unlimited);
      for (const cursor of ['nonsense', '', 'AAAA', Buffer.from('1:x').toString('base64url')]) {
        const error = await refusal(store.listAll({ cursor, limit: 5 }), `listAll(${cursor})`);
        if (!(error instanceof TaskError)) {
          assert.fail(
            `listAll(cursor ${JSON.stringify(cursor)}): refused with ${errorName(error)}`,
          );
        }
      }
    },
  ],
  [
    'leases (when the store has them): a task created with heldBy is held until a write makes it terminal',
    async (store) => {
      if (!leased(store)) return;
      const held = { ...record(), heldBy: 'i1' };
      const free = record();
      const other = { ...record(), heldBy: 'i2' };
      for (const task of [held, free, other]) await store.create(task, unlimited);
      assert.deepStrictEqual(await store.heldTasks('i1'), [held.taskId], 'heldTasks(i1)');
      const progressed = changed(held, 'half way');
      await store.compareAndSet(progressed, held.version);
      assert.deepStrictEqual(
        await store.heldTasks('i1'),
        [held.taskId],
        'heldTasks(i1) after a write that leaves the task live',
      );
      assert.equal(await store.compareAndSet(completed(progressed, Date.now()), 2), true);
      assert.deepStrictEqual(await store.heldTasks('i1'), [], 'heldTasks(i1) once it completed');
      assert.deepStrictEqual(await store.heldTasks('i2'), [other.taskId], 'heldTasks(i2)');
    },
  ],
  [
    'leases (when the store has them): a lease that ran out is named to the others, and forgotten once it holds nothing',
    async (store) => {
      if (!leased(store)) return;
      const task = { ...record(), heldBy: 'dead' };
      await store.create(task, unlimited);
      assert.deepStrictEqual(await store.renewLease('dead', 100), [], 'renewLease(dead)');
      assert.deepStrictEqual(await store.renewLease('alive', HOUR), [], 'renewLease(alive)');
      assert.equal(await store.releaseTasks('dead', []), false, 'releaseTasks(a live lease)');
      await new Promise((resolve) => setTimeout(resolve, 200));
      assert.deepStrictEqual(await store.renewLease('alive', HOUR), ['dead'], 'expired leases');
      assert.deepStrictEqual(await store.heldTasks('dead'), [task.taskId], 'heldTasks(dead)');
      assert.equal(
        await store.releaseTasks('dead', []),
        false,
        'releaseTasks(a lease that ran out, still holding a task)',
      );
      assert.equal(await store.releaseTasks('dead', [task.taskId]), true, 'releaseTasks(all)');
      assert.equal(await store.releaseTasks('dead', [task.taskId]), true, 'releaseTasks, again');
      assert.deepStrictEqual(await store.renewLease('alive', HOUR), [], 'expired leases after');
      assert.deepStrictEqual(await store.get(task.taskId), task, 'the task itself');
    },
  ],
  [
    'leases (when the store has them): releaseLease ends a live lease with what it holds',
    async (store) => {
      if (!leased(store)) return;
      const task = { ...record(), heldBy: 'leaving' };
      await store.create(task, unlimited);
      await store.renewLease('leaving', 100);
      await store.releaseLease('leaving');
      await new Promise((resolve) => setTimeout(resolve, 200));
      assert.deepStrictEqual(await store.renewLease('alive', HOUR), [], 'expired leases');
      assert.deepStrictEqual(await store.heldTasks('leaving'), [], 'heldTasks(leaving)');
      assert.deepStrictEqual(await store.get(task.taskId), task, 'the task itself');
    },
  ],
];

/** Whether the store has leases (all of TaskStoreLeases; the contract checks the rest). */
function leased(store: TaskStore): store is TaskStore & Required<TaskStoreLeases> {
  return (
    typeof store.renewLease === 'function' &&
    typeof store.heldTasks === 'function' &&
    typeof store.releaseTasks === 'function' &&
    typeof store.releaseLease === 'function'
  );
}

/** Every task id of `owner` (in `status`, when given), page after page. */
async function listAll(
  store: TaskStore,
  owner: TaskOwner,
  limit: number,
  status?: TaskState | TaskState[],
): Promise<string[]> {
  const ids: string[] = [];
  let cursor: string | undefined;
  for (let pages = 0; pages < 1000; pages++) {
    const page = await store.list!(owner, {
      limit,
      ...(cursor !== undefined && { cursor }),
      ...(status !== undefined && { status }),
    });
    if (page.tasks.length > limit) assert.fail(`list(limit ${limit}): ${page.tasks.length} tasks`);
    ids.push(...page.tasks.map((task) => task.taskId));
    cursor = page.nextCursor;
    if (cursor === undefined) return ids;
  }
  return assert.fail('list: still a nextCursor after 1,000 pages');
}

/** The ids of `tasks` in listing order: newest first, by `createdAt`, then id. */
function newestFirst(tasks: readonly TaskRecord[]): string[] {
  return tasks
    .slice()
    .sort((a, b) => b.createdAt - a.createdAt || (a.taskId < b.taskId ? 1 : -1))
    .map((task) => task.taskId);
}

/** Every task id `listAll` gives (with `filters`), page after page from `cursor`. */
async function listEveryOwner(
  store: TaskStore,
  limit: number,
  cursor?: string,
  filters: { status?: TaskState | TaskState[]; toolName?: string | undefined } = {},
): Promise<string[]> {
  const ids: string[] = [];
  const { status, toolName } = filters;
  let next = cursor;
  for (let pages = 0; pages < 1000; pages++) {
    const page = await store.listAll!({
      limit,
      ...(next !== undefined && { cursor: next }),
      ...(status !== undefined && { status }),
      ...(toolName !== undefined && { toolName }),
    });
    if (page.tasks.length > limit) {
      assert.fail(`listAll(limit ${limit}): ${page.tasks.length} tasks`);
    }
    ids.push(...page.tasks.map((task) => task.taskId));
    next = page.nextCursor;
    if (next === undefined) return ids;
  }
  return assert.fail('listAll: still a nextCursor after 1,000 pages');
}
