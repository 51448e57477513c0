import { Inject } from '@nestjs/common';
import type { TaskOwner, TaskRecord, TaskState } from '../task.js';

export interface TaskStoreCreateOptions {
  /** Refuse the create with TaskStoreFullError when this many tasks are stored; `null` = no limit. */
  maxRows: number | null;
  /**
   * The most tasks one owner (principal and tenant, compared exactly) may have stored; absent or
   * `null` = no limit. At the limit, the owner's finished tasks make room: the one that expires
   * first is deleted (a task without a TTL expires last), as many as needed. When every one of
   * them is still running or waiting for input, the create is refused with TaskQuotaError. Counted
   * atomically with the create (two concurrent creates cannot both take the last place), and
   * expired tasks never count. Other owners' tasks are never touched.
   */
  maxTasksPerOwner?: number | null;
}

export interface TaskStoreListOptions {
  /** Where the previous page ended (its `nextCursor`); absent for the first page. */
  cursor?: string;
  /** At most this many tasks in the page. */
  limit: number;
  /**
   * Only tasks in this state, or in one of these states (never empty when given). TasksService
   * passes it only to a store that declares `listsByStatus`; it filters for any other store.
   */
  status?: TaskState | readonly TaskState[];
}

/** What `listAll` takes: the options of `list`, and a filter by tool. */
export interface TaskStoreListAllOptions extends TaskStoreListOptions {
  /**
   * Only tasks whose record has this `toolName` (a task made without one never matches). Every
   * store with `listAll` honours it, while paging like `status`.
   */
  toolName?: string;
}

/** One page of tasks (an owner's for `list`, every owner's for `listAll`), newest first. */
export interface TaskListPage {
  tasks: TaskRecord[];
  /** Present when more tasks may follow: pass it back as `cursor`. Opaque. */
  nextCursor?: string;
}

/** How `compareAndSet` writes (see there). */
export interface TaskStoreWriteOptions {
  /** No listener needs to hear this write. */
  quiet?: boolean;
  /**
   * The write moves the task to the instance its record's `heldBy` names (another instance took
   * over a durable call whose instance died): a store with leases holds it for that instance
   * from now on, as `create` holds a new task (`heldTasks` of that instance lists it). The
   * instance that held it before keeps it in its list until `releaseTasks` drops it.
   */
  hold?: boolean;
}

export interface TaskStoreCleanupOptions {
  /** Terminal tasks without a TTL are removed once their last update is this old. */
  terminalTtlMs: number;
}

/**
 * Leases: how instances sharing a store learn that one of them died with tool calls running. A
 * store that several processes share implements all four methods; a store one process uses needs
 * none (without them no lease runs). An instance renews its lease on a timer; a task whose record
 * has `heldBy` is held by that instance from its `create` until a `compareAndSet` writes it
 * terminal. When an instance's lease runs out, any other instance fails what it still holds.
 *
 * The cost must not depend on how many tasks run: a renewal is a constant number of writes, and
 * holding a task rides on the writes that create and finish it.
 */
export interface TaskStoreLeases {
  /**
   * Renews the lease of `instanceId` until `ttlMs` from now, and returns the instances whose lease
   * has run out (never `instanceId` itself). Instances may run on different machines: a store
   * with a clock of its own (Redis's) should judge by it.
   */
  renewLease(instanceId: string, ttlMs: number): Promise<string[]>;

  /** The ids of the tasks `instanceId` holds; it may include tasks since gone or finished. */
  heldTasks(instanceId: string): Promise<string[]>;

  /**
   * Stops holding `taskIds` for `instanceId`: tasks it handed to someone else, or tasks of a dead
   * instance that another instance has just failed (or found finished or gone). Then, when its
   * lease has run out and it holds nothing else, forgets the instance. Returns whether it was
   * forgotten. Several instances may do this at once for one dead instance.
   */
  releaseTasks(instanceId: string, taskIds: readonly string[]): Promise<boolean>;

  /**
   * Ends the lease of `instanceId`, which is leaving (a graceful shutdown that leaves its running
   * tasks as they are): what it holds is no longer held, and no one fails it.
   */
  releaseLease(instanceId: string): Promise<void>;
}

/**
 * Where tasks live. A store is small and atomic: it never applies lifecycle rules (those are the
 * pure functions of `task.ts`); it stores, finds, and swaps whole records by version.
 *
 * Every store passes the same contract suite (`taskStoreContract` of `nestjs-mcp-tasks/testing`).
 */
export interface TaskStore extends Partial<TaskStoreLeases> {
  /**
   * True when only this process writes the store (the in-memory store): every change of a task
   * then passes through this process's TasksService, and code waiting on a task hears it without
   * re-reading the store. Absent or false: other processes may write it.
   */
  readonly local?: boolean;

  /**
   * Stores a new record. Refuses with `TaskStoreFullError` when `maxRows` tasks are stored
   * (expired tasks do not count), with `TaskQuotaError` when the owner holds `maxTasksPerOwner`
   * live tasks (finished ones make room first, see TaskStoreCreateOptions), and with a
   * `TaskError` when the id is taken. A store with leases
   * holds a record with `heldBy` for that instance, in the same write.
   */
  create(record: TaskRecord, options: TaskStoreCreateOptions): Promise<void>;

  /**
   * The record, or `null` when it is missing or expired, or, when `owner` is given, when it
   * belongs to another owner. The three cases are indistinguishable by design, in time too: the
   * owner is checked before the record is transferred or parsed, so another owner's large task
   * answers as fast as a made-up id.
   */
  get(taskId: string, owner?: TaskOwner): Promise<TaskRecord | null>;

  /**
   * Replaces the stored record by `record` if, and only if, the stored version is
   * `expectedVersion` and the task has not expired. Returns whether the write happened. A store
   * with leases stops holding a task written terminal for its `heldBy` instance. A store that
   * caps the bytes it holds (the in-memory store) refuses a write that grows a record past its cap
   * with TaskStoreFullError; a write that does not grow it is never refused for size.
   *
   * `options.quiet`: no listener needs to hear this write (nothing of it shows on the wire: the
   * answers a worker took, a step it journaled). A store that sends each write's change itself (the
   * PostgreSQL store with its notifier) sends none for it; any other store may ignore it.
   */
  compareAndSet(
    record: TaskRecord,
    expectedVersion: number,
    options?: TaskStoreWriteOptions,
  ): Promise<boolean>;

  /** Removes a task; returns whether it was there. */
  delete(taskId: string): Promise<boolean>;

  /**
   * Removes the tasks past `createdAt + ttlMs`, and terminal tasks without a TTL whose last
   * update is `terminalTtlMs` old. Idempotent. Returns how many tasks it removed.
   */
  cleanup(now: number, options: TaskStoreCleanupOptions): Promise<number>;

  /**
   * One page of the owner's live tasks, newest first (by `createdAt`, then id); expired tasks and
   * other owners' never appear. A cursor this store did not hand out is refused with
   * `InvalidTaskParamsError`. Optional: without it the server does not offer listing.
   *
   * A page may hold fewer than `limit` tasks while `nextCursor` is present (entries of tasks that
   * are gone, or a status filter that matched few of the tasks it looked at); only the absence of
   * `nextCursor` says that the listing is done.
   */
  list?(owner: TaskOwner, options: TaskStoreListOptions): Promise<TaskListPage>;

  /**
   * True when `list` honours `status` itself (both stores of this package), and `listAll` too
   * when the store has it. Absent or false: TasksService never hands this store a `status`; it
   * pages the store's unfiltered listing and filters what it reads (see `TasksService.list`), so
   * a store written before the filter existed keeps working.
   */
  readonly listsByStatus?: boolean;

  /**
   * One page of every owner's live tasks, newest first (by `createdAt`, then id, as `list`), for
   * an operator's console: expired tasks never appear, and the owner is not checked (TasksService
   * offers it to operator code only, see `TasksService.listAll`). Its cursors follow the rules of
   * `list` (one this store did not hand out is refused with `InvalidTaskParamsError`), it honours `status` when the store declares
   * `listsByStatus`, and `toolName` always. A page may hold fewer than `limit` tasks while
   * `nextCursor` is present, as for `list`. Optional: without it the server offers no listing
   * across owners (`TasksService.canListAll` is false).
   *
   * It needs an index of its own across owners (never a read of every task per page): both
   * stores of this package keep one, written together with each create.
   */
  listAll?(options: TaskStoreListAllOptions): Promise<TaskListPage>;

  /**
   * Resolves when the store answers, rejects when it cannot be reached: the cheapest round trip
   * it has (a health check times it). Optional: without it a health check reads a task that does
   * not exist.
   */
  ping?(): Promise<void>;
}

/** Injection token of the active TaskStore (same name as the interface, one import for both). */
export const TaskStore = Symbol('TaskStore');

/** Injects the module's TaskStore. */
export const InjectTaskStore = (): PropertyDecorator & ParameterDecorator => Inject(TaskStore);

const STORE_METHODS = ['create', 'get', 'compareAndSet', 'delete', 'cleanup'] as const;

const LEASE_METHODS = ['renewLease', 'heldTasks', 'releaseTasks', 'releaseLease'] as const;

/** The names of TaskStore methods `candidate` lacks (empty when it is a store). */
export function missingStoreMethods(candidate: unknown): string[] {
  if (candidate === null || typeof candidate !== 'object') return [...STORE_METHODS];
  const object = candidate as Record<string, unknown>;
  return STORE_METHODS.filter((name) => typeof object[name] !== 'function');
}

/**
 * The lease methods a store lacks when it has some of them: a store has leases whole or not at
 * all. Empty for a store with all four or none.
 */
export function missingLeaseMethods(store: TaskStore): string[] {
  const object = store as unknown as Record<string, unknown>;
  const missing = LEASE_METHODS.filter((name) => typeof object[name] !== 'function');
  return missing.length === LEASE_METHODS.length ? [] : missing;
}

/** Whether the store has leases (all four methods of TaskStoreLeases). */
export function hasLeases(store: TaskStore): store is TaskStore & TaskStoreLeases {
  const object = store as unknown as Record<string, unknown>;
  return LEASE_METHODS.every((name) => typeof object[name] === 'function');
}
