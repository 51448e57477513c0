import type { Logger } from '@nestjs/common';
import { ProtocolErrorCode } from '@modelcontextprotocol/server';
import {
  INTERNAL_ERROR_MESSAGE,
  messageOf,
  TaskConflictError,
  TaskError,
  TaskInternalError,
  TaskNotFoundError,
  TaskStoreFullError,
  TaskTooLargeError,
} from './errors.js';
import type { WaiterFeed } from './notify/waiter-feed.js';
import { BoundedMap } from './store/bounded-map.js';
import type { TaskStore, TaskStoreWriteOptions } from './store/task-store.js';
import {
  failTask,
  keptBytes,
  type TaskFailure,
  type TaskOwner,
  type TaskRecord,
  toJsonRpcError,
  type TransitionResult,
  validateTaskId,
} from './task.js';
import { couldBeTaskId } from './task-id.js';
import { heldBytes, type TaskAnnouncer } from './tasks.announcer.js';
import {
  MAX_TRANSITION_ATTEMPTS,
  MAX_UNCONFIRMED_WRITE_BYTES,
  STORE_FAULT_LOG_MS,
} from './tasks.constants.js';
import type { TasksConfig } from './interfaces/tasks-module-options.interface.js';
import type { TasksTelemetry } from './telemetry/tasks.telemetry.js';

/** A pure change of a task (see task.ts): the next record, the same one, or a TaskError. */
export type Transition = (record: TaskRecord, now: number) => TransitionResult;

/**
 * What a worker-side write does when its record would pass `maxTaskBytes`: the record to write
 * instead (complete and fail end the task with a generic failure), or `undefined` to refuse.
 */
type Oversize = (current: TaskRecord, refused: TaskTooLargeError, now: number) => TransitionResult;

/** How `TaskWriter.transition` makes one change. */
export interface TransitionOptions {
  /** Caller side: the owner the task must belong to (else TaskNotFoundError). Worker side: none. */
  owner?: TaskOwner;
  /** Tell the app's listeners and the notifier (default true): taking input responses does not. */
  announce?: boolean;
  /** The worker's latest copy of the task: tried first, without a read (worker side only). */
  known?: TaskRecord;
  /** What to write instead of a record over `maxTaskBytes` (default: refuse it). */
  oversize?: Oversize;
  /** The write moves the task to the instance its record names (see TaskStoreWriteOptions). */
  hold?: boolean;
}

const STORE_UNAVAILABLE = 'Task store unavailable';
/** A write no listener needs to hear (see TaskStoreWriteOptions). */
const QUIET: TaskStoreWriteOptions = Object.freeze({ quiet: true });
/** A write that moves the task's hold to the instance its record names. */
const HOLD: TaskStoreWriteOptions = Object.freeze({ hold: true });
const QUIET_HOLD: TaskStoreWriteOptions = Object.freeze({ quiet: true, hold: true });
/**
 * Writes kept to confirm when their task is read again (see TaskWriter.confirmed): tasks, and
 * bytes of their records (MAX_UNCONFIRMED_WRITE_BYTES: what `maxTaskBytes` counts of each, plus
 * what heldBytes adds).
 */
const MAX_UNCERTAIN = 10_000;
/** Tries of one task's writes kept to confirm. */
const MAX_UNCERTAIN_PER_TASK = 8;

/** How a log line names a task: by its tool when it has one (never by its id). */
const toolOf = (task: TaskRecord): string =>
  task.toolName === undefined ? 'A task' : `Task tool ${task.toolName}`;

/** The failure a task gets when its own result or error is too large to keep. */
const TOO_LARGE_FAILURE: TaskFailure = [ProtocolErrorCode.InternalError, INTERNAL_ERROR_MESSAGE];

/** Whether `error` is TasksService's answer to a store fault (the store is down or too slow). */
export function isStoreUnavailable(error: unknown): boolean {
  return error instanceof TaskInternalError && error.message === STORE_UNAVAILABLE;
}

/**
 * How TasksService reads and writes the store. Every change is read → pure transition (`task.ts`)
 * → compare-and-set, retried on a version conflict; within one process, changes to one task run
 * one after another, so only other processes sharing the store can cause a conflict. Each write
 * taken is published to this process's waiters, counted by telemetry and announced. Store faults
 * become one safe "Task store unavailable", the outage logged once a minute while it lasts; a
 * write whose answer was lost is confirmed when its task is read again.
 */
export class TaskWriter {
  /** The tail of the change queue of each task with changes in flight in this process. */
  private readonly queues = new Map<string, Promise<unknown>>();
  /** When this process's store calls began to fail (epoch ms), while they fail. */
  private storeDownSince: number | undefined;
  /** Store calls failed since then, and when the outage was last logged. */
  private storeFaults = 0;
  private storeFaultLoggedAt = 0;
  /** When a store call of this process last failed (epoch ms; 0: never). */
  lastStoreFaultAt = 0;
  /** Writes whose compare-and-set failed without an answer, by task (see `confirmed`). */
  private readonly uncertain = new BoundedMap<{ record: TaskRecord; previous: TaskRecord }[]>(
    MAX_UNCERTAIN,
    MAX_UNCONFIRMED_WRITE_BYTES,
  );

  constructor(
    private readonly store: TaskStore,
    private readonly config: TasksConfig,
    private readonly waiters: WaiterFeed,
    private readonly announcer: TaskAnnouncer,
    private readonly telemetry: TasksTelemetry | undefined,
    /** TasksService's own logger: the lines read as they always did. */
    private readonly logger: Logger,
  ) {}

  /** Stores a new task (sized first, else TaskTooLargeError) and makes it known. */
  async create(record: TaskRecord): Promise<TaskRecord> {
    const sized = this.sized(record);
    if (sized instanceof TaskTooLargeError) throw sized;
    await this.call(() =>
      this.store.create(sized, {
        maxRows: this.config.maxRows,
        maxTasksPerOwner: this.config.maxTasksPerOwner,
      }),
    );
    this.taken(sized, undefined);
    return sized;
  }

  /** The task as `owner` sees it (`undefined`: any owner, worker side). */
  async read(taskId: string, owner: TaskOwner | undefined): Promise<TaskRecord> {
    const id = validateTaskId(taskId);
    if (!couldBeTaskId(id)) throw new TaskNotFoundError();
    const record = await this.call(() => this.store.get(id, owner));
    if (record === null) throw new TaskNotFoundError();
    return record;
  }

  /**
   * A store call: a fault becomes "Task store unavailable" (logged, see `fault`), an answer ends
   * an outage on record.
   */
  call<T>(work: () => Promise<T>): Promise<T> {
    let answer: Promise<T>;
    try {
      // A store's own promise is taken as it is (a value from a store of the app's, wrapped).
      answer = Promise.resolve(work());
    } catch (error) {
      return Promise.reject(this.fault(error));
    }
    // `then` on the store's own promise: no async frame of its own on every get and create.
    return answer.then(
      (value) => {
        if (this.storeDownSince !== undefined) this.storeAnswered();
        return value;
      },
      (error: unknown) => {
        throw this.fault(error);
      },
    );
  }

  /**
   * read → pure transition → compare-and-set, one change at a time per task in this process. A
   * `known` copy (worker side only) stands in for the first read.
   */
  transition(
    taskId: string,
    change: Transition,
    { owner, announce = true, known, oversize, hold = false }: TransitionOptions = {},
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
          written = await this.store.compareAndSet(
            next,
            current.version,
            hold ? (announce ? HOLD : QUIET_HOLD) : announce ? undefined : QUIET,
          );
        } catch (error) {
          this.unconfirmed(next, current);
          throw this.fault(error);
        }
        if (this.storeDownSince !== undefined) this.storeAnswered();
        if (written) {
          this.taken(next, current, announce);
          return next;
        }
        if (attempt >= MAX_TRANSITION_ATTEMPTS) throw new TaskConflictError(attempt);
        await new Promise((resolve) => setTimeout(resolve, Math.random() * attempt));
      }
    });
  }

  /**
   * Completes or fails a task (`change`) within `maxTaskBytes`: when what the worker hands in
   * would make the record too large, the task fails with -32603 "Internal error" instead (the
   * reason, with the tool's name, goes to the log) and the call throws TaskTooLargeError, so the
   * worker learns it and the task never stays live for want of a write.
   */
  async settleWithin(
    taskId: string,
    what: 'result' | 'error',
    known: TaskRecord | undefined,
    change: Transition,
  ): Promise<TaskRecord> {
    let refused: TaskTooLargeError | undefined;
    const fail = (task: TaskRecord, now: number): TransitionResult =>
      failTask(task, toJsonRpcError(TOO_LARGE_FAILURE), {}, now);
    const oversize: Oversize = (task, error, now) => {
      refused = error;
      this.logger.error(
        `${toolOf(task)}: its ${what} would make the task ${error.bytes} bytes, over maxTaskBytes (${error.max}); the task fails with an internal error`,
      );
      return fail(task, now);
    };
    let record: TaskRecord;
    try {
      record = await this.transition(taskId, change, { known, oversize });
    } catch (error) {
      // A store that caps its bytes (the in-memory store's maxBytes) refused the write: the task
      // fails as for a result too large for it, so it does not stay live for want of a write.
      if (!(error instanceof TaskStoreFullError)) throw error;
      const failed = await this.transition(taskId, fail);
      this.logger.error(
        `${toolOf(failed)}: its ${what} did not fit the store (${error.message}); the task fails with an internal error`,
      );
      throw error;
    }
    if (refused !== undefined) throw refused;
    return record;
  }

  /** A write the store took: this process's waiters, telemetry, and (`announce`) the listeners. */
  private taken(record: TaskRecord, previous: TaskRecord | undefined, announce = true): void {
    this.waiters.publish(record);
    this.telemetry?.wrote(record, previous);
    if (announce) this.announcer.announce(record);
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
    this.taken(current, taken.previous);
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
  fault(error: unknown): TaskError {
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
}
