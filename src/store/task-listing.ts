/**
 * The order, cursors and filters of task listing, shared by the stores: a task's listing key sorts
 * tasks by creation (then id) as plain strings, a cursor is the last key of a page, encoded, and
 * a page ends by the same rule in every store (`endPage`).
 */
import { InvalidTaskParamsError } from '../errors.js';
import type { TaskOwner, TaskRecord, TaskState } from '../task.js';
import type { TaskListPage, TaskStoreListOptions } from './task-store.js';

const KEY = /^\d{15}:[A-Za-z0-9_-]{1,128}$/;

/** `<createdAt, 15 digits>:<taskId>`: string order is creation order. */
export function listingKey(record: Pick<TaskRecord, 'createdAt' | 'taskId'>): string {
  return `${String(record.createdAt).padStart(15, '0')}:${record.taskId}`;
}

/** The opaque cursor that continues after `key`. */
export function cursorAfter(key: string): string {
  return Buffer.from(key, 'utf8').toString('base64url');
}

/** The listing key a cursor continues after; a cursor no store made is -32602. */
export function keyOfCursor(cursor: string): string {
  const key = Buffer.from(cursor, 'base64url').toString('utf8');
  if (!KEY.test(key) || cursorAfter(key) !== cursor) {
    throw new InvalidTaskParamsError('Invalid params: unknown cursor');
  }
  return key;
}

/** The listing key a page continues after (`options.cursor`, checked), none for the first page. */
export function cursorKey(options: TaskStoreListOptions): string | undefined {
  return options.cursor === undefined ? undefined : keyOfCursor(options.cursor);
}

/** The creation instant and task id of a listing key. */
export function placeOfKey(key: string): { createdAt: number; taskId: string } {
  return { createdAt: Number(key.slice(0, 15)), taskId: key.slice(16) };
}

/**
 * One string per owner (principal and tenant), for index keys: each part is `-` for none or its
 * length and itself, so no two owners share a key whatever their strings hold.
 */
export function ownerKey(owner: TaskOwner): string {
  const tenant = owner.tenant ?? null;
  return `${part(owner.principal)}${part(tenant)}`;
}

const part = (value: string | null): string => (value === null ? '-' : `${value.length}:${value}`);

/**
 * The states a listing keeps, or `undefined` for every state. A store takes `status` as the
 * service validated it; an empty list keeps nothing.
 */
export function statusFilter(
  status: TaskState | readonly TaskState[] | undefined,
): ReadonlySet<TaskState> | undefined {
  if (status === undefined) return undefined;
  return new Set(typeof status === 'string' ? [status] : status);
}

/**
 * What a page keeps of the live tasks it looks at: those in `status` (when given) whose `toolName`
 * is `toolName` (when given); `undefined` when it keeps them all.
 */
export function listingFilter(
  status: TaskState | readonly TaskState[] | undefined,
  toolName?: string,
): ((record: TaskRecord) => boolean) | undefined {
  const states = statusFilter(status);
  if (states === undefined && toolName === undefined) return undefined;
  return (record) =>
    (states === undefined || states.has(record.status)) &&
    (toolName === undefined || record.toolName === toolName);
}

/**
 * A page of `matches` (newest first, as many as were found, up to one past `limit`): with more
 * than `limit`, it ends at its last task and more follow; else, when the store stopped reading
 * before the end of its index (a window of entries looked at), it goes on after `stoppedAfter`,
 * the last entry looked at; else the listing is done.
 */
export function endPage(
  matches: TaskRecord[],
  limit: number,
  stoppedAfter: string | undefined,
): TaskListPage {
  if (matches.length > limit) {
    const tasks = matches.slice(0, limit);
    return { tasks, nextCursor: cursorAfter(listingKey(tasks[limit - 1]!)) };
  }
  if (stoppedAfter !== undefined) return { tasks: matches, nextCursor: cursorAfter(stoppedAfter) };
  return { tasks: matches };
}

/** Listing order of records, newest first: by `createdAt`, then id, bytewise. */
export function newestFirst(a: TaskRecord, b: TaskRecord): number {
  if (a.createdAt !== b.createdAt) return b.createdAt - a.createdAt;
  return a.taskId < b.taskId ? 1 : a.taskId > b.taskId ? -1 : 0;
}
