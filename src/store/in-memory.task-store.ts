import { Injectable } from '@nestjs/common';
import {
  expiresAt,
  isExpired,
  isTerminal,
  type TaskOwner,
  type TaskRecord,
  terminalSince,
} from '../task.js';
import { ExpiryHeap } from './expiry-heap.js';
import { ExpiryIndex } from './expiry-index.js';
import {
  bytesFull,
  createLimits,
  createRefusal,
  ID_TAKEN,
  QUOTA_REACHED,
  recordBytes,
  roomOrder,
  STORE_FULL,
  visibleTo,
} from './store-rules.js';
import { InMemoryListing } from './in-memory-listing.js';
import { ownerKey } from './task-listing.js';
import type {
  TaskListPage,
  TaskStore,
  TaskStoreCleanupOptions,
  TaskStoreCreateOptions,
  TaskStoreListAllOptions,
  TaskStoreListOptions,
} from './task-store.js';

/**
 * What a `get` of a missing id checks in place of a record (see `get`); it is never returned. It
 * has the fields of a stored task in their order, and a TTL, so that its checks take the steps a
 * real record's take (an expiry computed, then an owner compared).
 */
const NOBODY: TaskRecord = Object.freeze({
  taskId: '',
  owner: Object.freeze({ principal: '\u0000no one', tenant: '\u0000' }),
  status: 'working',
  createdAt: 0,
  lastUpdatedAt: 0,
  ttlMs: Number.MAX_SAFE_INTEGER,
  version: 1,
  bytes: 0,
});

/** What the in-memory store may hold in all unless configured otherwise: 256 MiB of records. */
export const DEFAULT_IN_MEMORY_MAX_BYTES = 256 * 1_048_576;

export interface InMemoryTaskStoreOptions {
  /**
   * The most bytes of task records the store holds, every owner together (what each keeps from
   * clients and tools, as `maxTaskBytes` counts it, and 256 bytes for the rest of it): a
   * create beyond it is refused like a full store (-32603 "Task store is full (maxBytes …)"), and
   * so is a write that would grow a record past it. Default 256 MiB; `null` = no limit. Size the
   * process's heap above it (records are about their JSON's size in memory).
   */
  maxBytes?: number | null;
}

/** An owner's count of stored tasks, and its finished tasks by expiry (for making room). */
interface OwnerTally {
  count: number;
  /**
   * The owner's finished tasks by expiry (`Infinity`: no TTL), made when the first one finishes;
   * entries may be stale.
   */
  finished?: ExpiryHeap;
}

/**
 * The default store: one process, one Map. Two expiry indexes make cleanup cost O(expired): one
 * by `createdAt + ttlMs` (a lane per TTL), one by the moment a task without a TTL became
 * terminal. InMemoryListing keeps the indexes by creation that serve listing, per owner and across
 * owners. Records are frozen on write, so a record handed out
 * cannot change the store behind its back.
 */
@Injectable()
export class InMemoryTaskStore implements TaskStore {
  /** One process, one Map: every write passes through this process. */
  readonly local = true;
  /** `list` filters by status itself. */
  readonly listsByStatus: boolean = true;
  private readonly tasks = new Map<string, TaskRecord>();
  /** Tasks with a TTL, by expiry instant, a lane per TTL. */
  private readonly byExpiry = new ExpiryIndex();
  /** Terminal tasks without a TTL, by the instant they became terminal (one lane). */
  private readonly byTerminal = new ExpiryIndex();
  /** Each owner's tasks and every task by creation, for `list` and `listAll`. */
  private readonly listing = new InMemoryListing(this.tasks);
  /** Heap entries whose task was deleted directly: compacted away when they pile up. */
  private stale = 0;
  /** Each owner's count and finished tasks, for `maxTasksPerOwner`; an owner without tasks goes. */
  private readonly tallies = new Map<string, OwnerTally>();
  /** The bytes of every stored record (see `recordBytes`), and the most it may reach. */
  private heldBytes = 0;
  private readonly maxBytes: number | null;

  constructor(options: InMemoryTaskStoreOptions = {}) {
    const { maxBytes = DEFAULT_IN_MEMORY_MAX_BYTES } = options;
    if (maxBytes !== null && !(Number.isSafeInteger(maxBytes) && maxBytes > 0)) {
      throw new TypeError(
        `InMemoryTaskStore maxBytes must be a positive integer or null, got ${String(maxBytes)}`,
      );
    }
    this.maxBytes = maxBytes;
  }

  /** The bytes of records held now (expired ones not yet cleaned up included). */
  get bytes(): number {
    return this.heldBytes;
  }

  /** The number of stored tasks, expired ones not yet cleaned up included. */
  get size(): number {
    return this.tasks.size;
  }

  async create(record: TaskRecord, options: TaskStoreCreateOptions): Promise<void> {
    if (this.tasks.has(record.taskId)) throw createRefusal(ID_TAKEN, options);
    const size = recordBytes(record);
    const { maxRows, quota } = createLimits(options);
    const key = this.keyOfOwner(record.owner);
    let tally = this.tallies.get(key);
    if (
      (maxRows !== null && this.tasks.size >= maxRows) ||
      (quota !== null && tally !== undefined && tally.count >= quota) ||
      this.overBytes(size)
    ) {
      // Expired tasks never count: remove them first, then judge again.
      this.removeDue(this.byExpiry, Date.now(), expiresAt);
      tally = this.tallies.get(key);
      if (quota !== null && tally !== undefined && tally.count >= quota) {
        this.makeRoom(tally, quota);
        if (tally.count >= quota) throw createRefusal(QUOTA_REACHED, options);
      }
      if (maxRows !== null && this.tasks.size >= maxRows) throw createRefusal(STORE_FULL, options);
      if (this.overBytes(size)) throw bytesFull(this.maxBytes!);
    }
    this.tasks.set(record.taskId, Object.freeze(record));
    this.heldBytes += size;
    // Making room may have forgotten the owner (its last task gone): look it up again.
    tally = this.tallies.get(key);
    if (tally === undefined) {
      tally = { count: 0 };
      this.tallies.set(key, tally);
    }
    tally.count++;
    this.index(record, undefined);
    this.listing.add(record, key);
  }

  /** The owner object last keyed, and its key: a task's versions share their owner object. */
  private lastOwner: TaskOwner | undefined;
  private lastOwnerKey = '';

  /** `ownerKey(owner)`, kept for the owner object last asked about (one task's writes). */
  private keyOfOwner(owner: TaskOwner): string {
    if (owner !== this.lastOwner) {
      this.lastOwnerKey = ownerKey(owner);
      this.lastOwner = owner;
    }
    return this.lastOwnerKey;
  }

  /** Whether `more` bytes would take the store past `maxBytes`. */
  private overBytes(more: number): boolean {
    return this.maxBytes !== null && this.heldBytes + more > this.maxBytes;
  }

  /**
   * Deletes the owner's finished tasks, the one that expires first first, until it holds fewer
   * than `quota` (or has no finished task left). Entries of tasks gone, re-created or not finished
   * are skipped and dropped.
   */
  private makeRoom(tally: OwnerTally, quota: number): void {
    const heap = tally.finished;
    while (heap !== undefined && tally.count >= quota && heap.size > 0) {
      const deadline = heap.peekDeadline();
      const record = this.tasks.get(heap.pop());
      if (record !== undefined && isTerminal(record.status) && roomOrder(record) === deadline) {
        this.remove(record);
        this.noteStale();
      }
    }
  }

  /** Always answers: the Map is in this process. */
  async ping(): Promise<void> {}

  /**
   * A missing id runs the checks a foreign one does, on a record of no one's (NOBODY), so that the
   * two take the same time: which ids exist is not told by how long a `get` takes.
   */
  async get(taskId: string, owner?: TaskOwner): Promise<TaskRecord | null> {
    const found = this.tasks.get(taskId);
    const record = found ?? NOBODY;
    if (isExpired(record, Date.now()) || !visibleTo(record, owner)) return null;
    return found ?? null;
  }

  async compareAndSet(record: TaskRecord, expectedVersion: number): Promise<boolean> {
    const current = this.tasks.get(record.taskId);
    if (current === undefined || current.version !== expectedVersion) return false;
    if (isExpired(current, Date.now())) return false;
    const grows = recordBytes(record) - recordBytes(current);
    if (grows > 0 && this.overBytes(grows)) throw bytesFull(this.maxBytes!);
    this.tasks.set(record.taskId, Object.freeze(record));
    this.heldBytes += grows;
    this.index(record, current);
    return true;
  }

  async delete(taskId: string): Promise<boolean> {
    const record = this.tasks.get(taskId);
    if (record === undefined) return false;
    this.remove(record);
    if (expiresAt(record) !== null || terminalSince(record) !== null) this.noteStale();
    return true;
  }

  async cleanup(now: number, options: TaskStoreCleanupOptions): Promise<number> {
    const cutoff = now - options.terminalTtlMs;
    return (
      this.removeDue(this.byExpiry, now, expiresAt) +
      this.removeDue(this.byTerminal, cutoff, terminalSince)
    );
  }

  /** Forgets every task (for tests and shutdown). */
  clear(): void {
    this.tasks.clear();
    this.byExpiry.clear();
    this.byTerminal.clear();
    this.listing.clear();
    this.stale = 0;
    this.tallies.clear();
    this.heldBytes = 0;
  }

  /** Walks the owner's creation index down from the cursor, as `listAll` walks every task's. */
  async list(owner: TaskOwner, options: TaskStoreListOptions): Promise<TaskListPage> {
    return this.listing.list(owner, options);
  }

  /** Walks the creation index of every task down from the cursor. */
  async listAll(options: TaskStoreListAllOptions): Promise<TaskListPage> {
    return this.listing.listAll(options);
  }

  /** Drops a stored record; its listing entries go later (see InMemoryListing.removed). */
  private remove(record: TaskRecord): void {
    this.tasks.delete(record.taskId);
    this.heldBytes -= recordBytes(record);
    const key = this.keyOfOwner(record.owner);
    const tally = this.tallies.get(key);
    if (tally !== undefined && --tally.count === 0) this.tallies.delete(key);
    else if (tally?.finished !== undefined && tally.finished.size > 2 * tally.count + 64) {
      this.compactFinished(tally);
    }
    this.listing.removed();
  }

  /**
   * Removes the tasks of `index` due at `until`: an entry counts when its record is stored and
   * still due at that instant (`instantOf`); any other entry is stale, and is dropped.
   */
  private removeDue(
    index: ExpiryIndex,
    until: number,
    instantOf: (record: TaskRecord) => number | null,
  ): number {
    let removed = 0;
    index.popDue(until, (deadline, taskId) => {
      const record = this.tasks.get(taskId);
      if (record !== undefined && instantOf(record) === deadline) {
        this.remove(record);
        removed++;
      } else if (this.stale > 0) {
        this.stale--;
      }
    });
    return removed;
  }

  /** Adds the expiry entry a record needs: on create (TTL) or when it turns terminal (no TTL). */
  private index(record: TaskRecord, previous: TaskRecord | undefined): void {
    if (previous === undefined) {
      const at = expiresAt(record);
      if (at !== null) this.byExpiry.push(record.ttlMs!, at, record.taskId);
      return;
    }
    if (!isTerminal(record.status) || isTerminal(previous.status)) return;
    const since = terminalSince(record);
    if (since !== null) this.byTerminal.push(0, since, record.taskId);
    const tally = this.tallies.get(this.keyOfOwner(record.owner));
    if (tally !== undefined)
      (tally.finished ??= new ExpiryHeap()).push(roomOrder(record), record.taskId);
  }

  /** Keeps only the entries of an owner's finished tasks that are stored and finished. */
  private compactFinished(tally: OwnerTally): void {
    tally.finished?.compact((deadline, taskId) => {
      const task = this.tasks.get(taskId);
      return task !== undefined && isTerminal(task.status) && roomOrder(task) === deadline;
    });
  }

  private noteStale(): void {
    this.stale++;
    const entries = this.byExpiry.size + this.byTerminal.size;
    if (this.stale < 1024 || this.stale * 2 < entries) return;
    const live = (deadline: number, taskId: string): boolean => {
      const record = this.tasks.get(taskId);
      return record !== undefined && (expiresAt(record) ?? terminalSince(record)) === deadline;
    };
    this.byExpiry.compact(live);
    this.byTerminal.compact(live);
    this.stale = 0;
  }
}
