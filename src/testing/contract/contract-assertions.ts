/**
 * Assertions of the contract rules, with messages that say what the store did wrong (kept by
 * every runner: they are `node:assert` errors).
 */
import assert from 'node:assert/strict';
import { TaskError } from '../../index.js';
import type { TaskRecord } from '../../index.js';
import type { TaskListPage, TaskStore } from '../../entries/store.js';
import { changed, completed } from './contract-fixtures.js';

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

export function sameRecord(actual: unknown, expected: TaskRecord, what: string): void {
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

export function isNull(actual: unknown, what: string): void {
  if (actual !== null) {
    assert.fail(`${what}: expected null, got ${show(actual)}`);
  }
}

export function is<T>(actual: T, expected: T, what: string): void {
  if (!Object.is(actual, expected)) {
    assert.fail(`${what}: expected ${show(expected)}, got ${show(actual)}`);
  }
}

/** Fails, saying what the store refused, when `promise` rejects. */
export async function accepted(promise: Promise<unknown>, what: string): Promise<void> {
  try {
    await promise;
  } catch (error) {
    assert.fail(`${what}: expected it to be accepted, it was refused with ${errorName(error)}`);
  }
}

/** What `promise` rejected with; fails when it resolved. */
export async function refusal(promise: Promise<unknown>, what: string): Promise<unknown> {
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

export function show(value: unknown): string {
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

export function errorName(error: unknown): string {
  if (error instanceof Error) return `${error.constructor.name}: ${error.message}`;
  return show(error);
}

/**
 * Checks that the store refuses a write to `task`, which it must not hold (never created, or
 * expired), and that the refused write stores nothing. `what` names the task in the messages.
 */
export async function writeRefused(
  store: TaskStore,
  task: TaskRecord,
  what: string,
): Promise<void> {
  is(
    await store.compareAndSet(changed(task, 'late'), task.version),
    false,
    `compareAndSet(${what})`,
  );
  isNull(await store.get(task.taskId), `get(${what}) after a refused write`);
}

/** Writes `task` completed at `at` (its next version), failing when the store refuses the write. */
export async function finish(store: TaskStore, task: TaskRecord, at: number): Promise<TaskRecord> {
  const done = completed(task, at);
  is(await store.compareAndSet(done, task.version), true, 'compareAndSet(completed)');
  return done;
}

/**
 * Every task id of a listing, page after page from `cursor`: `read` gives the page after the
 * cursor it is given. A page of more than `limit` tasks, or a listing that never ends, fails,
 * naming `what` was called (`list`, `listAll`).
 */
export async function everyPage(
  what: string,
  limit: number,
  read: (cursor: string | undefined) => Promise<TaskListPage>,
  cursor?: string,
): Promise<string[]> {
  const ids: string[] = [];
  let next = cursor;
  for (let pages = 0; pages < 1000; pages++) {
    const page = await read(next);
    if (page.tasks.length > limit) {
      assert.fail(`${what}(limit ${limit}): ${page.tasks.length} tasks`);
    }
    ids.push(...page.tasks.map((task) => task.taskId));
    next = page.nextCursor;
    if (next === undefined) return ids;
  }
  return assert.fail(`${what}: still a nextCursor after 1,000 pages`);
}

/**
 * Checks that a listing refuses cursors it did not make (nonsense, empty, base64url of no page)
 * with a TaskError: `read` lists from the cursor it is given; `what` names the call.
 */
export async function refusesForeignCursors(
  what: string,
  read: (cursor: string) => Promise<unknown>,
): Promise<void> {
  for (const cursor of ['nonsense', '', 'AAAA', Buffer.from('1:x').toString('base64url')]) {
    const error = await refusal(read(cursor), `${what}(${cursor})`);
    if (!(error instanceof TaskError)) {
      assert.fail(`${what}(cursor ${JSON.stringify(cursor)}): refused with ${errorName(error)}`);
    }
  }
}
