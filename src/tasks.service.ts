import { randomUUID } from 'node:crypto';
import { Inject, Injectable, Logger, type OnApplicationShutdown, Optional } from '@nestjs/common';
import { ProtocolErrorCode } from '@modelcontextprotocol/server';
import { TaskChangeListeners } from './notify/task-change.listeners.js';
import {
  INTERNAL_ERROR_MESSAGE,
  InvalidTaskParamsError,
  messageOf,
  TaskConflictError,
  TaskError,
  TaskInternalError,
  TaskNotFoundError,
  TaskStoreFullError,
  TaskTooLargeError,
} from './errors.js';
import { TaskNotifier } from './notify/task-notifier.js';
import { BoundedMap } from './store/bounded-map.js';
import { WaiterFeed } from './notify/waiter-feed.js';
import {
  hasLeases,
  type TaskListPage,
  TaskStore,
  type TaskStoreListOptions,
} from './store/task-store.js';
import {
  type CallToolResult,
  cancelTask,
  deliveryMark,
  isNews,
  completeTask,
  failTask,
  type InputRequest,
  type InputResponse,
  isCancellationRequested,
  markCancelledTask,
  newTask,
  progressTask,
  keptBytes,
  requireInputTask,
  takeInputResponsesTask,
  type TaskFailure,
  type TaskOwner,
  type TaskRecord,
  toJsonRpcError,
  toStoredResult,
  type TransitionResult,
  updateTask,
  validateInputRequests,
  validateInputResponses,
  validateNewTaskParams,
  validateProgressMessage,
  validateStatusFilter,
  validateTaskLabel,
  validateStatusMessage,
  validateTaskId,
  type TaskState,
} from './task.js';
import { couldBeTaskId, newTaskId } from './task-id.js';
import {
  MAX_TRANSITION_ATTEMPTS,
  SAFETY_REREAD_MS,
  TASKS_CONFIG,
  WATCH_POLL_MS,
  MAX_UNCONFIRMED_WRITE_BYTES,
  MAX_UNSENT_CHANGE_BYTES,
} from './tasks.constants.js';
import type { TasksConfig } from './interfaces/tasks-module-options.interface.js';
import { TasksTelemetry } from './telemetry/tasks.telemetry.js';

export interface CreateTaskParams {
  /** Lifetime in ms; `null` = unlimited. Default: the module's `defaultTtlMs`; capped by `maxTtlMs`. */
  ttlMs?: number | null;
  /** The poll interval suggested to clients. */
  pollIntervalMs?: number;
  statusMessage?: string;
}

export interface CreateTaskOptions {
  /**
   * This process runs the task's work itself (as for an in-process `@TaskTool` call): on a store
   * with leases (`lease` option) the task is held by this instance, and should the process die
   * before the task ends, another instance fails it with -32603 "The server stopped before the
   * task finished". Leave it off for work a queue or another service drives. Default false.
   */
  held?: boolean;
  /**
   * The tool whose call makes the task (`@TaskTool` calls set it): kept on the record and shown
   * by `list`, never on the wire.
   */
  toolName?: string;
  /**
   * A copy of the call's arguments to keep on the record (redact it first): JSON data, at most
   * 4 KiB serialized, else TasksConfigError. Shown by `list`, never on the wire.
   */
  arguments?: unknown;
}

export interface ListTasksOptions {
  /** The `nextCursor` of the previous page. */
  cursor?: string;
  /** Page size, 1–100. Default 50. */
  limit?: number;
  /** Only tasks in this state, or in one of these states. Default: every state. */
  status?: TaskState | TaskState[];
}

export interface ListAllTasksOptions extends ListTasksOptions {
  /** Only tasks made by this tool (their record's `toolName`). Default: every task. */
  toolName?: string;
}

/** Page size of `list` when none is asked for, and the most one page holds. */
export const DEFAULT_LIST_LIMIT = 50;
export const MAX_LIST_LIMIT = 100;
/** Store pages one `list` call reads at most when it filters by status for the store. */
const LIST_FILTER_READS = 4;

export interface StatusMessageOption {
  statusMessage?: string;
  /**
   * The caller's latest copy of the task (a running call's watch hears every write): the change
   * is tried on it first, without a read; a stale copy loses the compare-and-set and the task is
   * read as usual.
   */
  known?: TaskRecord;
}

type Transition = (record: TaskRecord, now: number) => TransitionResult;

/**
 * What a worker-side write does when its record would pass `maxTaskBytes`: the record to write
 * instead (complete and fail end the task with a generic failure), or `undefined` to refuse.
 */
type Oversize = (current: TaskRecord, refused: TaskTooLargeError, now: number) => TransitionResult;

/** How a log line names a task: by its tool when it has one (never by its id). */
const toolOf = (task: TaskRecord): string =>
  task.toolName === undefined ? 'A task' : `Task tool ${task.toolName}`;

/** The failure a task gets when its own result or error is too large to keep. */
const TOO_LARGE_FAILURE: TaskFailure = [ProtocolErrorCode.InternalError, INTERNAL_ERROR_MESSAGE];

/** The cursor, page size and status filter of `list` and `listAll`, checked (else -32602). */
function validateListOptions(options: ListTasksOptions): {
  cursor: string | undefined;
  limit: number;
  status: TaskState[] | undefined;
} {
  const { cursor, limit = DEFAULT_LIST_LIMIT } = options;
  if (cursor !== undefined && typeof cursor !== 'string') {
    throw new InvalidTaskParamsError('Invalid params: cursor must be a string');
  }
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIST_LIMIT) {
    throw new InvalidTaskParamsError(
      `Invalid params: limit must be an integer from 1 to ${MAX_LIST_LIMIT}`,
    );
  }
  return { cursor, limit, status: validateStatusFilter(options.status) };
}

/**
 * The one API of the extension. Caller-side methods (`create`, `get`, `update`, `cancel`) are
 * scoped to an owner; a missing, expired and foreign task all answer TaskNotFoundError.
 * Worker-side methods take the task id alone: the id is the capability.
 *
 * Every change is read → pure transition (`task.ts`) → compare-and-set on the store, retried on
 * a version conflict. Within one process, changes to one task run one after another, so only
 * other processes sharing the store can cause a conflict.
 */
const STORE_UNAVAILABLE = 'Task store unavailable';
/** While the store fails, how often the outage is logged again. */
const STORE_FAULT_LOG_MS = 60_000;
/**
 * Writes kept to confirm when their task is read again (see TasksService.confirmed): tasks, and
 * bytes of their records (MAX_UNCONFIRMED_WRITE_BYTES: what `maxTaskBytes` counts of each, plus
 * KEPT_RECORD_BYTES).
 */
const MAX_UNCERTAIN = 10_000;
/** Tries of one task's writes kept to confirm. */
const MAX_UNCERTAIN_PER_TASK = 8;
/** Changes kept for the notifier to send again while it fails (the latest per task); bytes: MAX_UNSENT_CHANGE_BYTES. */
const MAX_UNANNOUNCED = 10_000;
/** What a kept record is counted for beyond what `maxTaskBytes` counts (ids, owner, times). */
const KEPT_RECORD_BYTES = 512;
const heldBytes = (record: TaskRecord): number => (record.bytes ?? 0) + KEPT_RECORD_BYTES;
/** The first wait before a change the notifier failed to send is sent again, and the longest. */
const REANNOUNCE_FIRST_MS = 250;
const REANNOUNCE_MAX_MS = 5_000;
const SENT = (): true => true;

/** Whether `error` is TasksService's answer to a store fault (the store is down or too slow). */
export function isStoreUnavailable(error: unknown): boolean {
  return error instanceof TaskInternalError && error.message === STORE_UNAVAILABLE;
}

@Injectable()
export class TasksService implements OnApplicationShutdown {
  private readonly logger = new Logger('TasksService');
  /** The tail of the change queue of each task with changes in flight in this process. */
  private readonly queues = new Map<string, Promise<unknown>>();
  /**
   * This instance among those sharing the store: what its held tasks carry (`heldBy`) and what
   * its lease is renewed under. Random per registration; not a secret (it gives no access).
   */
  readonly instanceId: string = randomUUID();
  /**
   * Whether this instance holds the tasks it runs under a lease: the `lease` option is on and the
   * store has leases (see TasksLease).
   */
  readonly leased: boolean;
  /** When this process's store calls began to fail (epoch ms), while they fail. */
  private storeDownSince: number | undefined;
  /** Store calls failed since then, and when the outage was last logged. */
  private storeFaults = 0;
  private storeFaultLoggedAt = 0;
  /**
   * When a store call of this process last failed (epoch ms; 0: never). The lease judges other
   * instances only after a whole lease TTL without one (see TasksLease).
   */
  lastStoreFaultAt = 0;
  /** Writes whose compare-and-set failed without an answer, by task (see `confirmed`). */
  private readonly uncertain = new BoundedMap<{ record: TaskRecord; previous: TaskRecord }[]>(
    MAX_UNCERTAIN,
    MAX_UNCONFIRMED_WRITE_BYTES,
  );
  /** Changes the notifier failed to send, the latest per task, to send again (see `publish`). */
  private readonly unannounced = new BoundedMap<TaskRecord>(
    MAX_UNANNOUNCED,
    MAX_UNSENT_CHANGE_BYTES,
  );
  private reannouncing: ReturnType<typeof setTimeout> | undefined;
  /**
   * The wait before the next resend: doubled at each resend, back to the first once a resend is
   * taken. (A send fails asynchronously, after its resend round has ended, so the round itself
   * cannot tell whether it should back off.)
   */
  private reannounceDelay = REANNOUNCE_FIRST_MS;
  private notifierFaultLoggedAt = 0;

  constructor(
    @Inject(TaskStore) private readonly store: TaskStore,
    @Optional() @Inject(TaskNotifier) private readonly notifier: TaskNotifier | null,
    @Inject(TASKS_CONFIG) private readonly config: TasksConfig,
    /** Where each write is published for this process's waiters (see tools/task-watch.ts). */
    @Optional() private readonly waiters: WaiterFeed = new WaiterFeed(),
    /** The app's `@OnTaskChange` methods: every write this process makes, beside the notifier. */
    @Optional() private readonly listeners?: TaskChangeListeners,
    /** Metrics of every write this process makes (see telemetry/), when telemetry is on. */
    @Optional() private readonly telemetry?: TasksTelemetry,
  ) {
    this.leased = Boolean(config.lease) && hasLeases(store);
  }

  /** Stops sending again what the notifier failed to send: it is closing too. */
  onApplicationShutdown(): void {
    clearTimeout(this.reannouncing);
    this.reannouncing = undefined;
    this.unannounced.clear();
  }

  // ----- caller side ----------------------------------------------------------------------------

  /** Creates a `working` task owned by `owner`; it is stored before this resolves. */
  async create(
    owner: TaskOwner,
    params: CreateTaskParams = {},
    options: CreateTaskOptions = {},
  ): Promise<TaskRecord> {
    const valid = validateNewTaskParams(params, this.config);
    if (options.held === true && this.leased) valid.heldBy = this.instanceId;
    Object.assign(valid, validateTaskLabel(options));
    const record = this.sized(newTask(newTaskId(), owner, valid, Date.now()));
    if (record instanceof TaskTooLargeError) throw record;
    try {
      await this.store.create(record, {
        maxRows: this.config.maxRows,
        maxTasksPerOwner: this.config.maxTasksPerOwner,
      });
    } catch (error) {
      throw this.storeFault(error);
    }
    if (this.storeDownSince !== undefined) this.storeAnswered();
    this.waiters.publish(record);
    this.telemetry?.wrote(record, undefined);
    this.announce(record);
    return record;
  }

  /** The task as its owner sees it. */
  get(taskId: string, owner: TaskOwner): Promise<TaskRecord> {
    return this.read(taskId, owner);
  }

  /**
   * Which of `taskIds` the owner may see: its own live tasks, each id once, in the order given.
   * Unknown, expired and foreign ids are dropped alike, so the answer reveals nothing of other
   * owners' tasks. The ids are read at once; a store fault fails the whole read as one
   * "Task store unavailable", logged once.
   */
  async ownTaskIds(taskIds: readonly string[], owner: TaskOwner): Promise<string[]> {
    const unique = [...new Set(taskIds)].filter(couldBeTaskId);
    let found: (TaskRecord | null)[];
    try {
      found = await Promise.all(unique.map((taskId) => this.store.get(taskId, owner)));
    } catch (error) {
      throw this.storeFault(error);
    }
    return unique.filter((_, i) => found[i] !== null);
  }

  /**
   * How often code waiting on a task (a running call, an input wait, a `tasks/result`) must
   * re-read it to see changes made elsewhere: never when only this process writes the store
   * (every change reaches WaiterFeed); once per `janitor.intervalMs` (30 s without a janitor) as a
   * safety net against a lost message when the notifier delivers other processes' changes; else
   * at the task's poll interval capped at 1 s.
   */
  rereadMs(pollIntervalMs?: number): number | null {
    if (this.store.local === true) return null;
    if (this.notifier?.deliversRemoteChanges === true) {
      return this.config.janitor ? this.config.janitor.intervalMs : SAFETY_REREAD_MS;
    }
    return Math.min(pollIntervalMs ?? WATCH_POLL_MS, WATCH_POLL_MS);
  }

  /** Whether the store can list tasks (`list`); the 2025-11-25 `tasks/list` depends on it. */
  get canList(): boolean {
    return typeof this.store.list === 'function';
  }

  /**
   * One page of the owner's tasks, newest first; expired and other owners' tasks never appear.
   * A cursor that is not a `nextCursor` of this store is InvalidTaskParamsError (-32602), and so
   * is a `status` that is not a task state (or a list of them). A page may hold fewer than `limit`
   * tasks while `nextCursor` is present: only its absence ends the listing.
   */
  async list(owner: TaskOwner, options: ListTasksOptions = {}): Promise<TaskListPage> {
    const { cursor, limit, status } = validateListOptions(options);
    const store = this.store;
    if (!store.list) throw new TaskInternalError('The task store cannot list tasks');
    return await this.listThrough((page) => store.list!(owner, page), status, limit, cursor);
  }

  /** Whether the store can list every owner's tasks (`listAll`), for an operator's console. */
  get canListAll(): boolean {
    return typeof this.store.listAll === 'function';
  }

  /**
   * OPERATOR ONLY: one page of EVERY owner's tasks, newest first, for an admin's console. It
   * checks no owner at all: call it only from operator code that the app's own admin rule already
   * guards (an admin-only route, a CLI), never with what a caller's request asks for; a caller's
   * listing is `list`, scoped to the caller.
   *
   * Limits and validation are those of `list` (cursor, `limit` 1–100, `status` else
   * InvalidTaskParamsError -32602), plus `toolName`, a non-empty string. Expired tasks never
   * appear; a page may hold fewer than `limit` tasks while `nextCursor` is present. A store
   * without `listAll` (see `canListAll`) makes it throw TaskInternalError naming the fix.
   */
  async listAll(options: ListAllTasksOptions = {}): Promise<TaskListPage> {
    const { cursor, limit, status } = validateListOptions(options);
    const { toolName } = options;
    if (toolName !== undefined && (typeof toolName !== 'string' || toolName === '')) {
      throw new InvalidTaskParamsError('Invalid params: toolName must be a non-empty string');
    }
    const store = this.store;
    if (!store.listAll) {
      throw new TaskInternalError(
        "The task store cannot list every owner's tasks (it has no listAll): use the in-memory " +
          'or Redis store, or give the custom store a listAll; check TasksService.canListAll first',
      );
    }
    const filters = toolName === undefined ? {} : { toolName };
    return await this.listThrough(
      (page) => store.listAll!({ ...page, ...filters }),
      status,
      limit,
      cursor,
    );
  }

  /**
   * One page through `read` (the store's `list` or `listAll`): the store filters by `status`
   * when it says so (`listsByStatus`), else `listFiltering` does. Store faults become
   * TaskInternalError.
   */
  private async listThrough(
    read: (options: TaskStoreListOptions) => Promise<TaskListPage>,
    status: readonly TaskState[] | undefined,
    limit: number,
    cursor: string | undefined,
  ): Promise<TaskListPage> {
    try {
      if (status !== undefined && this.store.listsByStatus !== true) {
        return await this.listFiltering(read, status, limit, cursor);
      }
      return await read({
        limit,
        ...(cursor !== undefined && { cursor }),
        ...(status !== undefined && { status }),
      });
    } catch (error) {
      throw this.storeFault(error);
    }
  }

  /**
   * The status filter for a store that does not filter itself: reads the store's unfiltered
   * pages (`read`: its `list` or `listAll`) and keeps the matching tasks. Each read asks for no
   * more tasks than the page still lacks, so no page is cut short of what it read and the store's
   * own cursor is where the next page goes on (a cursor stays the store's, opaque here). At most
   * LIST_FILTER_READS reads per call; a page that is not full then ends with the cursor of the
   * last read.
   */
  private async listFiltering(
    read: (options: TaskStoreListOptions) => Promise<TaskListPage>,
    status: readonly TaskState[],
    limit: number,
    cursor: string | undefined,
  ): Promise<TaskListPage> {
    const wanted = new Set(status);
    const tasks: TaskRecord[] = [];
    let next = cursor;
    for (let reads = 0; reads < LIST_FILTER_READS && tasks.length < limit; reads++) {
      const page = await read({
        limit: limit - tasks.length,
        ...(next !== undefined && { cursor: next }),
      });
      for (const task of page.tasks) if (wanted.has(task.status)) tasks.push(task);
      next = page.nextCursor;
      if (next === undefined) break;
    }
    return { tasks: tasks.slice(0, limit), ...(next !== undefined && { nextCursor: next }) };
  }

  /**
   * Delivers input responses. Keys outstanding now are taken, the rest ignored; when none is
   * left the task is `working` again. On a task that is not `input_required` nothing changes.
   */
  async update(
    taskId: string,
    owner: TaskOwner,
    inputResponses: Readonly<Record<string, InputResponse>>,
  ): Promise<TaskRecord> {
    const responses = validateInputResponses(inputResponses);
    return await this.transition(taskId, owner, (task, now) => updateTask(task, responses, now));
  }

  /** Cancels the task (at once, or as a request in cooperative mode); a finished task is kept. */
  async cancel(taskId: string, owner: TaskOwner): Promise<TaskRecord> {
    const mode = this.config.cancellation;
    return await this.transition(taskId, owner, (task, now) => cancelTask(task, mode, now));
  }

  // ----- worker side ----------------------------------------------------------------------------

  /**
   * Completes the task with what `tools/call` would have returned: a CallToolResult
   * (`{ content: [...] }`, `isError: true` for a tool error). Anything else is refused with
   * InvalidTaskParamsError.
   */
  async complete(
    taskId: string,
    result: CallToolResult,
    options: StatusMessageOption = {},
  ): Promise<TaskRecord> {
    const stored = toStoredResult(result);
    const message = validateStatusMessage(options.statusMessage);
    return await this.settleWithin(taskId, 'result', options.known, (task, now) =>
      completeTask(task, stored, { statusMessage: message }, now),
    );
  }

  /** Fails the task with a JSON-RPC error; the status message defaults to the error message. */
  async fail(
    taskId: string,
    failure: TaskFailure,
    options: StatusMessageOption = {},
  ): Promise<TaskRecord> {
    const error = toJsonRpcError(failure);
    const message = validateStatusMessage(options.statusMessage);
    return await this.settleWithin(taskId, 'error', options.known, (task, now) =>
      failTask(task, error, { statusMessage: message }, now),
    );
  }

  /**
   * Completes or fails a task (`change`) within `maxTaskBytes`: when what the worker hands in
   * would make the record too large, the task fails with -32603 "Internal error" instead (the
   * reason, with the tool's name, goes to the log) and the call throws TaskTooLargeError, so the
   * worker learns it and the task never stays live for want of a write.
   */
  private async settleWithin(
    taskId: string,
    what: 'result' | 'error',
    known: TaskRecord | undefined,
    change: Transition,
  ): Promise<TaskRecord> {
    let refused: TaskTooLargeError | undefined;
    const fail = (task: TaskRecord, now: number): TransitionResult =>
      failTask(task, toJsonRpcError(TOO_LARGE_FAILURE), {}, now);
    let record: TaskRecord;
    try {
      record = await this.transition(taskId, undefined, change, true, known, (task, error, now) => {
        refused = error;
        this.logger.error(
          `${toolOf(task)}: its ${what} would make the task ${error.bytes} bytes, over maxTaskBytes (${error.max}); the task fails with an internal error`,
        );
        return fail(task, now);
      });
    } catch (error) {
      // A store that caps its bytes (the in-memory store's maxBytes) refused the write: the task
      // fails as for a result too large for it, so it does not stay live for want of a write.
      if (!(error instanceof TaskStoreFullError)) throw error;
      const failed = await this.transition(taskId, undefined, fail);
      this.logger.error(
        `${toolOf(failed)}: its ${what} did not fit the store (${error.message}); the task fails with an internal error`,
      );
      throw error;
    }
    if (refused !== undefined) throw refused;
    return record;
  }

  /** Asks the client for input; keys are unique over the task's life. */
  async requireInput(
    taskId: string,
    requests: Readonly<Record<string, InputRequest>>,
    options: StatusMessageOption = {},
  ): Promise<TaskRecord> {
    const valid = validateInputRequests(requests);
    const message = validateStatusMessage(options.statusMessage);
    return await this.transition(taskId, undefined, (task, now) =>
      requireInputTask(task, valid, { statusMessage: message }, now),
    );
  }

  /**
   * Sets the status message of a live task; `null` clears it. The same message again, or `null`
   * on a task without one, writes nothing and notifies no one.
   */
  async progress(taskId: string, message: string | null): Promise<TaskRecord> {
    const valid = validateProgressMessage(message);
    return await this.transition(taskId, undefined, (task, now) => progressTask(task, valid, now));
  }

  /**
   * Stops holding a task under this instance's lease: its work was handed to someone else, so
   * should this process die, the task stays as it is. Without a lease, or for a task this instance
   * does not hold, nothing happens.
   */
  async releaseHeld(taskId: string): Promise<void> {
    const store = this.store;
    if (!this.leased || !hasLeases(store)) return;
    try {
      await store.releaseTasks(this.instanceId, [validateTaskId(taskId)]);
    } catch (error) {
      throw this.storeFault(error);
    }
  }

  /** The stored record, with the input responses received and not yet taken. */
  status(taskId: string): Promise<TaskRecord> {
    return this.read(taskId, undefined);
  }

  /**
   * Whether the task is cancelled or (cooperative mode) cancellation was requested. An unknown,
   * expired or deleted id throws TaskNotFoundError rather than answering `false` (the worker would
   * go on for nothing) or `true` (a vanished task is not a cancelled one): a worker that polls
   * this should stop on either.
   */
  async isCancelled(taskId: string): Promise<boolean> {
    return isCancellationRequested(await this.read(taskId, undefined));
  }

  /** Returns the input responses received so far and removes them from the task, atomically. */
  async takeInputResponses(taskId: string): Promise<Record<string, InputResponse>> {
    let taken: Record<string, InputResponse> = {};
    await this.transition(
      taskId,
      undefined,
      (task, now) => {
        taken = { ...task.inputResponses };
        return takeInputResponsesTask(task, now);
      },
      false,
    );
    return taken;
  }

  /** The worker honours a cancellation (or cancels on its own): the task becomes `cancelled`. */
  async markCancelled(taskId: string): Promise<TaskRecord> {
    return await this.transition(taskId, undefined, (task, now) => markCancelledTask(task, now));
  }

  // ----- internals ------------------------------------------------------------------------------

  private async read(taskId: string, owner: TaskOwner | undefined): Promise<TaskRecord> {
    const id = validateTaskId(taskId);
    if (!couldBeTaskId(id)) throw new TaskNotFoundError();
    let record: TaskRecord | null;
    try {
      record = await this.store.get(id, owner);
    } catch (error) {
      throw this.storeFault(error);
    }
    if (this.storeDownSince !== undefined) this.storeAnswered();
    if (record === null) throw new TaskNotFoundError();
    return record;
  }

  /**
   * read → pure transition → compare-and-set, one change at a time per task in this process. A
   * `known` copy (worker side only) stands in for the first read.
   */
  private transition(
    taskId: string,
    owner: TaskOwner | undefined,
    change: Transition,
    announce = true,
    known?: TaskRecord,
    oversize?: Oversize,
  ): Promise<TaskRecord> {
    return this.serialize(taskId, async () => {
      for (let attempt = 1; ; attempt++) {
        const current =
          attempt === 1 && known?.taskId === taskId && owner === undefined
            ? known
            : this.confirmed(await this.read(taskId, owner));
        const now = Date.now();
        const changed = change(current, now);
        if (changed instanceof TaskError) throw changed;
        if (changed === current) return current;
        let next = this.sized(changed, current);
        if (next instanceof TaskTooLargeError) {
          const instead = oversize?.(current, next, now);
          if (instead === undefined) throw next;
          if (instead instanceof TaskError) throw instead;
          next = this.sized(instead, current);
          if (next instanceof TaskError) throw next;
        }
        let written: boolean;
        try {
          written = await this.store.compareAndSet(next, current.version);
        } catch (error) {
          this.unconfirmed(next, current);
          throw this.storeFault(error);
        }
        if (this.storeDownSince !== undefined) this.storeAnswered();
        if (written) {
          this.waiters.publish(next);
          this.telemetry?.wrote(next, current);
          if (announce) this.announce(next);
          return next;
        }
        if (attempt >= MAX_TRANSITION_ATTEMPTS) throw new TaskConflictError(attempt);
        await new Promise((resolve) => setTimeout(resolve, Math.random() * attempt));
      }
    });
  }

  /**
   * Remembers a write whose compare-and-set failed without an answer (a timeout, a connection
   * lost while the store was taking it): the store may have taken it all the same.
   */
  private unconfirmed(record: TaskRecord, previous: TaskRecord): void {
    const tried = this.uncertain.get(record.taskId) ?? [];
    // Several tries of one write may each lose their answer (the store slow to come back).
    tried.push({ record, previous });
    if (tried.length > MAX_UNCERTAIN_PER_TASK) tried.shift();
    // The oldest tasks' tries go past the bounds: those writes are then announced only when a
    // later write to the task is.
    const bytes = tried.reduce((sum, kept) => sum + heldBytes(kept.record), 0);
    this.uncertain.set(record.taskId, tried, bytes + heldBytes(previous));
  }

  /**
   * A task read again after one of this process's writes to it failed without an answer: when the
   * store holds that very write (versions are never reused, see `nextVersion`), it was taken, and
   * is published and announced now, as it would have been had the answer come back. Else a later
   * terminal write by someone else would find the task finished and nobody would ever hear of it.
   * A write not found yet is kept: on a pool of connections it may still land.
   */
  private confirmed(current: TaskRecord): TaskRecord {
    if (this.uncertain.size === 0) return current;
    const tried = this.uncertain.get(current.taskId);
    if (tried === undefined) return current;
    const taken = tried.find(
      ({ record }) =>
        record.version === current.version &&
        record.status === current.status &&
        record.lastUpdatedAt === current.lastUpdatedAt,
    );
    if (taken === undefined) return current;
    this.uncertain.delete(current.taskId);
    this.waiters.publish(current);
    this.telemetry?.wrote(current, taken.previous);
    this.announce(current);
    return current;
  }

  /**
   * The record with its size (`bytes`, see keptBytes) set, or TaskTooLargeError when it passes
   * `maxTaskBytes`. Transitions hand out fresh copies, so the size is set on the copy before it
   * is stored.
   */
  private sized(record: TaskRecord, previous?: TaskRecord): TaskRecord | TaskTooLargeError {
    const bytes = keptBytes(record, previous);
    const max = this.config.maxTaskBytes;
    if (bytes > max) return new TaskTooLargeError(max, bytes);
    (record as { bytes?: number }).bytes = bytes;
    return record;
  }

  private serialize<T>(taskId: string, work: () => Promise<T>): Promise<T> {
    const previous = this.queues.get(taskId);
    const run = previous === undefined ? work() : previous.then(work, work);
    const done = (): void => {
      if (this.queues.get(taskId) === tail) this.queues.delete(taskId);
    };
    const tail: Promise<void> = run.then(done, done);
    this.queues.set(taskId, tail);
    return run;
  }

  /**
   * Store faults become one safe internal error; task errors pass through unchanged. An outage is
   * logged when it starts and then once a minute while it lasts, not once per failed call: twenty
   * running calls through a minute's failover would otherwise write hundreds of lines.
   */
  private storeFault(error: unknown): TaskError {
    if (error instanceof TaskError) return error;
    const now = Date.now();
    this.lastStoreFaultAt = now;
    this.storeFaults++;
    if (this.storeDownSince === undefined) {
      this.storeDownSince = now;
      this.storeFaultLoggedAt = now;
      this.logger.error(
        `Task store failed: ${messageOf(error)} (further failures are logged once a minute until it answers)`,
      );
    } else if (now - this.storeFaultLoggedAt >= STORE_FAULT_LOG_MS) {
      this.storeFaultLoggedAt = now;
      this.logger.error(
        `Task store still failing after ${Math.round((now - this.storeDownSince) / 1000)} s (${this.storeFaults} calls failed): ${messageOf(error)}`,
      );
    }
    return new TaskInternalError(STORE_UNAVAILABLE, { cause: error });
  }

  /** A store call succeeded while an outage was on record: the outage is over. */
  private storeAnswered(): void {
    const since = this.storeDownSince!;
    this.storeDownSince = undefined;
    this.logger.log(
      `Task store answers again after ${Math.round((Date.now() - since) / 1000)} s (${this.storeFaults} calls failed meanwhile)`,
    );
    this.storeFaults = 0;
  }

  private announce(record: TaskRecord): void {
    if (this.listeners?.size) this.listeners.hear(record);
    this.publish(record);
  }

  /**
   * Hands a change to the notifier. One it fails to send (its connection is away: a restart, a
   * failover) is kept, the latest per task, and sent again with backoff until the notifier takes
   * it: listeners on other instances hear a task's end even when it was written the moment the
   * store came back, before the notifier's own connection did.
   */
  private publish(record: TaskRecord): boolean | Promise<boolean> {
    const notifier = this.notifier;
    if (!notifier) return true;
    const unsent = this.unannounced.get(record.taskId);
    if (unsent !== undefined && !isNews(record, deliveryMark(unsent))) return true;
    this.unannounced.delete(record.taskId);
    try {
      const pending = notifier.notify(record);
      if (pending !== undefined && typeof pending.then === 'function') {
        return pending.then(SENT, (error: unknown) => this.notifierFailed(record, error));
      }
      return true;
    } catch (error) {
      return this.notifierFailed(record, error);
    }
  }

  /** Keeps a change the notifier failed to send, to send again; false (it was not sent). */
  private notifierFailed(record: TaskRecord, error: unknown): false {
    const now = Date.now();
    if (now - this.notifierFaultLoggedAt >= STORE_FAULT_LOG_MS) {
      this.notifierFaultLoggedAt = now;
      this.logger.error(
        `Task notifier failed: ${messageOf(error)} (changes it could not send are sent again; further failures are logged once a minute)`,
      );
    }
    const unsent = this.unannounced.get(record.taskId);
    if (unsent !== undefined && !isNews(record, deliveryMark(unsent))) return false;
    // Past the bounds the oldest change goes: its listeners read the task again when they
    // reconnect.
    this.unannounced.set(record.taskId, record, heldBytes(record));
    if (this.reannouncing === undefined) this.reannounce();
    return false;
  }

  /** Sends the changes the notifier failed to send again, after `reannounceDelay`, backing off. */
  private reannounce(): void {
    const delay = this.reannounceDelay;
    this.reannounceDelay = Math.min(delay * 2, REANNOUNCE_MAX_MS);
    this.reannouncing = setTimeout(() => {
      this.reannouncing = undefined;
      for (const record of this.unannounced.drain()) this.resend(record);
    }, delay);
    this.reannouncing.unref();
  }

  /** One resend: once the notifier takes one, the next outage starts from the first wait. */
  private resend(record: TaskRecord): void {
    const sent = this.publish(record);
    if (sent === true) this.reannounceDelay = REANNOUNCE_FIRST_MS;
    else if (sent !== false) {
      void sent.then((taken) => {
        if (taken) this.reannounceDelay = REANNOUNCE_FIRST_MS;
      });
    }
  }
}
