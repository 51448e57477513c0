/**
 * What every TaskStore engine of this package (in-memory, Redis, PostgreSQL) does alike, written
 * once: how a record is stored and read back, the fields an engine indexes it by, how a create is
 * refused, which finished task makes room first, what a record weighs, and cleanup in batches.
 * Listing's order and cursors are in task-listing.ts. An engine file holds only its own work.
 */
import {
  TaskInternalError,
  type TaskError,
  TaskQuotaError,
  TaskStoreFullError,
} from '../errors.js';
import {
  expiresAt,
  isOwnedBy,
  isTerminal,
  keptBytes,
  type TaskOwner,
  type TaskRecord,
  terminalSince,
} from '../task.js';
import { listingKey, ownerKey } from './task-listing.js';
import type { TaskStoreCreateOptions } from './task-store.js';

/**
 * A record as the Redis and PostgreSQL stores keep it: its JSON. Data already stored is read
 * back by `decodeRecord`, so this form never changes.
 */
export function encodeRecord(record: TaskRecord): string {
  return JSON.stringify(record);
}

/** A record `encodeRecord` wrote. */
export function decodeRecord(json: string): TaskRecord {
  return JSON.parse(json) as TaskRecord;
}

/** What an engine keeps beside a record to find it without reading it. */
export interface IndexedFields {
  /** The owner's key (`ownerKey`): compared by an owner-scoped read, and the quota's count. */
  readonly ownerKey: string;
  /** Its place in the listings (`listingKey`). */
  readonly listingKey: string;
  /** When it expires (`createdAt + ttlMs`), `null` without a TTL. */
  readonly expiresAt: number | null;
  /** When a finished task without a TTL became terminal (cleanup's index), else `null`. */
  readonly terminalAt: number | null;
  /** Whether it is finished: it then makes room for its owner, and stops being held. */
  readonly terminal: boolean;
  /** The instance whose lease holds it, `null` for none. */
  readonly heldBy: string | null;
  /** The instance a write of this record stops holding it for (a terminal write), else `null`. */
  readonly releasedBy: string | null;
  readonly toolName: string | null;
}

export function indexedFields(record: TaskRecord): IndexedFields {
  const terminal = isTerminal(record.status);
  const heldBy = record.heldBy ?? null;
  return {
    ownerKey: ownerKey(record.owner),
    listingKey: listingKey(record),
    expiresAt: expiresAt(record),
    terminalAt: terminalSince(record),
    terminal,
    heldBy,
    releasedBy: terminal ? heldBy : null,
    toolName: record.toolName ?? null,
  };
}

/**
 * Where a finished task stands among its owner's when room is made for a new one (the one that
 * expires first goes first): its expiry instant, `Infinity` without a TTL (it goes last).
 */
export function roomOrder(record: TaskRecord): number {
  return expiresAt(record) ?? Infinity;
}

/** Whether a `get` scoped to `owner` (none: unscoped) may answer `record`. */
export function visibleTo(record: TaskRecord, owner: TaskOwner | undefined): boolean {
  return owner === undefined || isOwnedBy(record, owner);
}

/**
 * What a record's fields every record has (ids, owner, times, version) take, about: what a
 * store's byte cap counts for a record beside what it keeps from clients and tools.
 */
const RECORD_BYTES = 256;

/** A record's weight against a store's byte cap: RECORD_BYTES and what it keeps (`bytes`, else keptBytes). */
export function recordBytes(record: TaskRecord): number {
  return RECORD_BYTES + (record.bytes ?? keptBytes(record));
}

/**
 * What an engine's atomic create answers (the Redis RESERVE script, PostgreSQL's create_task):
 * these numbers are in their scripts and SQL.
 */
export const CREATED = 1;
export const STORE_FULL = 0;
export const ID_TAKEN = -1;
export const QUOTA_REACHED = -2;

/** The limits of a create, `null` for none. */
export function createLimits(options: TaskStoreCreateOptions): {
  maxRows: number | null;
  quota: number | null;
} {
  return { maxRows: options.maxRows ?? null, quota: options.maxTasksPerOwner ?? null };
}

/** The error of a create that `outcome` (not CREATED) refused, under `options`. */
export function createRefusal(outcome: number, options: TaskStoreCreateOptions): TaskError {
  const { maxRows, quota } = createLimits(options);
  if (outcome === STORE_FULL) return new TaskStoreFullError(maxRows ?? 0);
  if (outcome === QUOTA_REACHED) return new TaskQuotaError(quota ?? 0);
  return new TaskInternalError('Task id already exists');
}

/** Returns when a create's `outcome` says it stored the task; else throws its refusal. */
export function checkCreated(outcome: number | undefined, options: TaskStoreCreateOptions): void {
  if (outcome !== CREATED) throw createRefusal(outcome ?? ID_TAKEN, options);
}

/** A create or write refused because it would take the store past its byte cap. */
export function bytesFull(maxBytes: number): TaskStoreFullError {
  return new TaskStoreFullError(maxBytes, 'maxBytes');
}

/**
 * Runs `removeBatch` (which removes at most `size` tasks, and says how many it did) until a batch
 * comes back short; returns how many it removed in all. Cleanup in batches keeps each call brief.
 */
export async function removeInBatches(
  size: number,
  removeBatch: () => Promise<number>,
): Promise<number> {
  let removed = 0;
  for (;;) {
    const count = await removeBatch();
    removed += count;
    if (count < size) return removed;
  }
}
