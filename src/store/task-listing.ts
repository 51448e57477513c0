/**
 * The order and cursors of task listing, shared by the stores: a task's listing key sorts tasks
 * by creation (then id) as plain strings, and a cursor is the last key of a page, encoded.
 */
import { InvalidTaskParamsError } from '../errors.js';
import type { TaskOwner, TaskRecord, TaskState } from '../task.js';

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
