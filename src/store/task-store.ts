import { Inject } from '@nestjs/common';
import type { TaskOwner, TaskRecord } from '../task.js';

export interface TaskStoreCreateOptions {
  /** Refuse the create with TaskStoreFullError when this many tasks are stored; `null` = no limit. */
  maxRows: number | null;
}

export interface TaskStoreListOptions {
  /** Where the previous page ended (its `nextCursor`); absent for the first page. */
  cursor?: string;
  /** At most this many tasks in the page. */
  limit: number;
}

/** One page of an owner's tasks, newest first. */
export interface TaskListPage {
  tasks: TaskRecord[];
  /** Present when more tasks may follow: pass it back as `cursor`. Opaque. */
  nextCursor?: string;
}

export interface TaskStoreCleanupOptions {
  /** Terminal tasks without a TTL are removed once their last update is this old. */
  terminalTtlMs: number;
}

/**
 * Where tasks live. A store is small and atomic: it never applies lifecycle rules (those are the
 * pure functions of `task.ts`); it stores, finds, and swaps whole records by version.
 *
 * Every store passes the same contract suite (`taskStoreContract` of `nestjs-mcp-tasks/testing`).
 */
export interface TaskStore {
  /**
   * True when only this process writes the store (the in-memory store): every change of a task
   * then passes through this process's TasksService, and code waiting on a task hears it without
   * re-reading the store. Absent or false: other processes may write it.
   */
  readonly local?: boolean;

  /**
   * Stores a new record. Refuses with `TaskStoreFullError` when `maxRows` tasks are stored
   * (expired tasks do not count) and with a `TaskError` when the id is taken.
   */
  create(record: TaskRecord, options: TaskStoreCreateOptions): Promise<void>;

  /**
   * The record, or `null` when it is missing or expired, or, when `owner` is given, when it
   * belongs to another owner. The three cases are indistinguishable by design.
   */
  get(taskId: string, owner?: TaskOwner): Promise<TaskRecord | null>;

  /**
   * Replaces the stored record by `record` if, and only if, the stored version is
   * `expectedVersion` and the task has not expired. Returns whether the write happened.
   */
  compareAndSet(record: TaskRecord, expectedVersion: number): Promise<boolean>;

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
   */
  list?(owner: TaskOwner, options: TaskStoreListOptions): Promise<TaskListPage>;
}

/** Injection token of the active TaskStore (same name as the interface, one import for both). */
export const TaskStore = Symbol('TaskStore');

/** Injects the module's TaskStore. */
export const InjectTaskStore = (): PropertyDecorator & ParameterDecorator => Inject(TaskStore);

const STORE_METHODS = ['create', 'get', 'compareAndSet', 'delete', 'cleanup'] as const;

/** The names of TaskStore methods `candidate` lacks (empty when it is a store). */
export function missingStoreMethods(candidate: unknown): string[] {
  if (candidate === null || typeof candidate !== 'object') return [...STORE_METHODS];
  const object = candidate as Record<string, unknown>;
  return STORE_METHODS.filter((name) => typeof object[name] !== 'function');
}
