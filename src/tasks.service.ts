import { randomUUID } from 'node:crypto';
import { Inject, Injectable, Logger, type OnApplicationShutdown, Optional } from '@nestjs/common';
import { TaskChangeListeners } from './notify/task-change.listeners.js';
import { InvalidTaskParamsError, TaskInternalError } from './errors.js';
import { TaskNotifier } from './notify/task-notifier.js';
import { WaiterFeed } from './notify/waiter-feed.js';
import {
  hasLeases,
  type TaskListPage,
  TaskStore,
  type TaskStoreLeases,
} from './store/task-store.js';
import {
  type CallToolResult,
  cancelTask,
  completeTask,
  failTask,
  type InputRequest,
  type InputResponse,
  isCancellationRequested,
  markCancelledTask,
  newTask,
  progressTask,
  recordStepTask,
  requireInputTask,
  takeInputResponsesTask,
  type TaskFailure,
  type TaskOwner,
  type TaskRecord,
  type TaskStepEntry,
  type TaskCallRecord,
  isParkId,
  keepAnswersTask,
  parkId,
  parkTask,
  resumeTask,
  toJsonRpcError,
  toStoredResult,
  updateTask,
  validateInputRequests,
  validateInputResponses,
  validateNewTaskParams,
  validateProgressMessage,
  validateTaskLabel,
  validateStatusMessage,
  validateTaskId,
} from './task.js';
import { couldBeTaskId, newTaskId } from './task-id.js';
import { SAFETY_REREAD_MS, TASKS_CONFIG, WATCH_POLL_MS } from './tasks.constants.js';
import type { TasksConfig } from './interfaces/tasks-module-options.interface.js';
import { TaskAnnouncer } from './tasks.announcer.js';
import {
  type ListAllTasksOptions,
  type ListQuery,
  listThrough,
  type ListRead,
  type ListTasksOptions,
  validateListOptions,
} from './tasks.listing.js';
import { TaskWriter, type Transition } from './tasks.writer.js';
import { TasksTelemetry } from './telemetry/tasks.telemetry.js';

export type { ListAllTasksOptions, ListTasksOptions } from './tasks.listing.js';

/**
 * The longest sleep whose park this process times itself (see `park`): a timer per parked task
 * is kept in memory, so only the near ones get one; a longer one wakes at a renewal's sweep.
 */
const LOCAL_WAKE_MAX_MS = 3_600_000;

/** How long after a park's lease has run out its timer asks for a sweep (clocks differ a little). */
const LOCAL_WAKE_MARGIN_MS = 10;

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
  /**
   * What a durable tool's call keeps so that another instance can run it again should this one
   * die (see `TaskRecord.call`); `@TaskTool({ durable: true })` calls set it. JSON data.
   */
  call?: TaskCallRecord;
}

export interface StatusMessageOption {
  statusMessage?: string;
  /**
   * The caller's latest copy of the task (a running call's watch hears every write): the change
   * is tried on it first, without a read; a stale copy loses the compare-and-set and the task is
   * read as usual.
   */
  known?: TaskRecord;
}

/**
 * The one API of the extension. Caller-side methods (`create`, `get`, `update`, `cancel`, `list`)
 * are scoped to an owner; a missing, expired and foreign task all answer TaskNotFoundError.
 * Worker-side methods take the task id alone: the id is the capability.
 *
 * Every change is read → pure transition (`task.ts`) → compare-and-set on the store, retried on
 * a version conflict (see TaskWriter); each write is then announced to the app's `@OnTaskChange`
 * methods and the notifier (see TaskAnnouncer).
 */
@Injectable()
export class TasksService implements OnApplicationShutdown {
  private readonly logger = new Logger('TasksService');
  private readonly announcer: TaskAnnouncer;
  private readonly writer: TaskWriter;
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

  constructor(
    @Inject(TaskStore) private readonly store: TaskStore,
    @Optional() @Inject(TaskNotifier) private readonly notifier: TaskNotifier | null,
    @Inject(TASKS_CONFIG) private readonly config: TasksConfig,
    /** Where each write is published for this process's waiters (see tools/task-watch.ts). */
    @Optional() private readonly waiters: WaiterFeed = new WaiterFeed(),
    /** The app's `@OnTaskChange` methods: every write this process makes, beside the notifier. */
    @Optional() listeners?: TaskChangeListeners,
    /** Metrics of every write this process makes (see telemetry/), when telemetry is on. */
    @Optional() telemetry?: TasksTelemetry,
  ) {
    this.leased = Boolean(config.lease) && hasLeases(store);
    this.announcer = new TaskAnnouncer(notifier, listeners, this.logger);
    this.writer = new TaskWriter(
      store,
      config,
      this.waiters,
      this.announcer,
      telemetry,
      this.logger,
    );
  }

  /**
   * When a store call of this process last failed (epoch ms; 0: never). The lease judges other
   * instances only after a whole lease TTL without one (see TasksLease).
   */
  get lastStoreFaultAt(): number {
    return this.writer.lastStoreFaultAt;
  }

  /** Stops sending again what the notifier failed to send: it is closing too. */
  onApplicationShutdown(): void {
    this.announcer.close();
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
    if (options.call !== undefined) valid.call = options.call;
    return await this.writer.create(newTask(newTaskId(), owner, valid, Date.now()));
  }

  /** The task as its owner sees it. */
  get(taskId: string, owner: TaskOwner): Promise<TaskRecord> {
    return this.writer.read(taskId, owner);
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
    const record = await this.writer.transition(
      taskId,
      (task, now) => updateTask(task, responses, now),
      { owner },
    );
    // Answers that no run has taken yet: the update that brought the last one (or the same update
    // again, after a wake that failed) wakes the parked task. Any other update on a `working` task
    // changes nothing and wakes nothing: a client must not make a sleeping task run again.
    if (record.status === 'working' && record.inputResponses !== undefined) {
      await this.wakeParked(record);
    }
    return record;
  }

  /**
   * Wakes a parked task (its answers came, or it was cancelled): a durable call's park's lease
   * runs out now; a queue job's is woken through `wakeJob`.
   */
  private async wakeParked(record: TaskRecord): Promise<void> {
    const holder = record.heldBy;
    if (holder === undefined) await this.wakeJob?.(record);
    else if (isParkId(holder)) await this.wake(holder);
  }

  /**
   * Wakes the parked job of a queue-run tool's task (see TaskToolRunner); nothing for a task
   * without one. Set by the tool runner when the app has a task queue.
   */
  wakeJob: ((record: TaskRecord) => Promise<void>) | undefined;

  /**
   * Called once a parked task's lease was made to run out (see `wake`): TasksLease sweeps soon.
   * Set by TasksLease; none without a lease.
   */
  whenWoken: (() => void) | undefined;

  /**
   * Makes a park's lease run out now, so that the first sweep wakes its task. A store fault is
   * answered as one (the caller, told "Task store unavailable", sends its answer again: the
   * update then changes nothing, and the wake is tried again).
   */
  private async wake(holder: string): Promise<void> {
    const store = this.store;
    if (!hasLeases(store)) return;
    await this.parkLease(store, holder, 1);
    this.whenWoken?.();
  }

  /** Cancels the task (at once, or as a request in cooperative mode); a finished task is kept. */
  async cancel(taskId: string, owner: TaskOwner): Promise<TaskRecord> {
    const mode = this.config.cancellation;
    const record = await this.writer.transition(
      taskId,
      (task, now) => cancelTask(task, mode, now),
      { owner },
    );
    // A parked task hears it now, not when it wakes: it acknowledges a cooperative cancel, and a
    // cancelled one's park is put away. The cancel stands without it: the task wakes in time.
    if (record.toolName !== undefined) await this.wakeParked(record).catch(() => undefined);
    return record;
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
    const query = validateListOptions(options);
    const store = this.store;
    if (!store.list) throw new TaskInternalError('The task store cannot list tasks');
    return await this.listThrough((page) => store.list!(owner, page), query);
  }

  // ----- for the endpoint's handlers ------------------------------------------------------------

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
      throw this.writer.fault(error);
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

  // ----- operator side --------------------------------------------------------------------------

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
    const query = validateListOptions(options);
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
    return await this.listThrough((page) => store.listAll!({ ...page, ...filters }), query);
  }

  /** One page of a listing (see tasks.listing.ts); store faults become TaskInternalError. */
  private async listThrough(read: ListRead, query: ListQuery): Promise<TaskListPage> {
    try {
      return await listThrough(read, query, this.store.listsByStatus === true);
    } catch (error) {
      throw this.writer.fault(error);
    }
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
    const statusMessage = validateStatusMessage(options.statusMessage);
    return await this.writer.settleWithin(taskId, 'result', options.known, (task, now) =>
      completeTask(task, stored, { statusMessage }, now),
    );
  }

  /** Fails the task with a JSON-RPC error; the status message defaults to the error message. */
  async fail(
    taskId: string,
    failure: TaskFailure,
    options: StatusMessageOption = {},
  ): Promise<TaskRecord> {
    // Checked in this order, the failure first, as `complete` checks its result first.
    const [error, statusMessage] = [
      toJsonRpcError(failure),
      validateStatusMessage(options.statusMessage),
    ];
    const fail: Transition = (task, now) => failTask(task, error, { statusMessage }, now);
    return await this.writer.settleWithin(taskId, 'error', options.known, fail);
  }

  /** Asks the client for input; keys are unique over the task's life. */
  async requireInput(
    taskId: string,
    requests: Readonly<Record<string, InputRequest>>,
    options: StatusMessageOption = {},
  ): Promise<TaskRecord> {
    const valid = validateInputRequests(requests);
    const statusMessage = validateStatusMessage(options.statusMessage);
    return await this.writer.transition(taskId, (task, now) =>
      requireInputTask(task, valid, { statusMessage }, now),
    );
  }

  /**
   * Sets the status message of a live task; `null` clears it. The same message again, or `null`
   * on a task without one, writes nothing and notifies no one.
   */
  async progress(taskId: string, message: string | null): Promise<TaskRecord> {
    const valid = validateProgressMessage(message);
    return await this.writer.transition(taskId, (task, now) => progressTask(task, valid, now));
  }

  /**
   * Records a completed step in the task's journal (what `TaskContext.step` writes), unless a step
   * of that name is recorded already: another run of the method got there first, and its entry
   * stays. Returns the record, whose `steps[name]` is the entry to use. Listeners hear nothing (the
   * wire shows no step). A terminal task is refused with TaskTerminalError.
   */
  async recordStep(
    taskId: string,
    name: string,
    entry: TaskStepEntry,
    options: { known?: TaskRecord } = {},
  ): Promise<TaskRecord> {
    return await this.writer.transition(
      taskId,
      (task, now) => recordStepTask(task, name, entry, now),
      { announce: false, known: options.known },
    );
  }

  /**
   * Takes over a durable call of an instance that died (see `TaskRecord.call`): the task is held
   * by this instance from now on and its runs count one more; one no longer held by `from` (taken
   * over by another instance first) is left as it is. Announced like any write: the instance
   * that held it, should it still run the call, hears the move and stops it. A terminal
   * task is refused with TaskTerminalError.
   */
  async resumeHeld(
    taskId: string,
    options: { known?: TaskRecord; from?: string } = {},
  ): Promise<TaskRecord> {
    return await this.writer.transition(
      taskId,
      (task, now) => resumeTask(task, options.from, this.instanceId, now),
      // Announced: a process thought dead that still runs the call hears it and stops.
      { known: options.known, hold: true },
    );
  }

  /**
   * Parks a durable call's task until `until` (epoch ms): a lease of the task's own (`parkId`),
   * which no one renews, is set to run out then, and the task is moved from this instance to it;
   * the instance that finds that lease run out wakes the task (TasksLease, HeldTaskResumer).
   * Returns the record; one no longer held by this instance is left as it is (its `heldBy` says
   * so), and so is one parking for input (`waitingFor`) whose keys are all answered already. Only
   * on an instance that holds its tasks under a lease.
   */
  async park(
    taskId: string,
    until: number,
    options: { known?: TaskRecord; waitingFor?: readonly string[] } = {},
  ): Promise<TaskRecord> {
    const store = this.store;
    if (!this.leased || !hasLeases(store)) {
      throw new TaskInternalError('A task parks only on an instance that holds it under a lease');
    }
    // The lease first: should the move then fail, it runs out holding nothing, and is forgotten.
    const ms = Math.max(1, Math.ceil(until - Date.now()));
    await this.parkLease(store, parkId(taskId), ms);
    const parked = await this.writer.transition(
      taskId,
      (task, now) => parkTask(task, this.instanceId, now, options.waitingFor),
      { announce: false, known: options.known, hold: true },
    );
    // A sleep wakes at its end while this process lives, not at the next renewal's sweep (up to
    // a third of a lease later); should it die, another instance's sweep wakes the task.
    if (options.waitingFor === undefined && ms <= LOCAL_WAKE_MAX_MS) {
      setTimeout(() => this.whenWoken?.(), ms + LOCAL_WAKE_MARGIN_MS).unref();
    }
    return parked;
  }

  /** Sets a park's lease (see `park`) to run out `ms` from now; a store fault is answered as one. */
  private async parkLease(store: TaskStoreLeases, holder: string, ms: number): Promise<void> {
    try {
      await store.renewLease(holder, ms);
    } catch (error) {
      throw this.writer.fault(error);
    }
  }

  /** Keeps answers a durable call's method took, for a later run (see `TaskRecord.answers`). */
  async keepAnswers(
    taskId: string,
    answers: Readonly<Record<string, InputResponse>>,
    options: { known?: TaskRecord } = {},
  ): Promise<TaskRecord> {
    return await this.writer.transition(
      taskId,
      (task, now) => keepAnswersTask(task, answers, now),
      { announce: false, known: options.known },
    );
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
      throw this.writer.fault(error);
    }
  }

  /** The stored record, with the input responses received and not yet taken. */
  status(taskId: string): Promise<TaskRecord> {
    return this.writer.read(taskId, undefined);
  }

  /**
   * Whether the task is cancelled or (cooperative mode) cancellation was requested. An unknown,
   * expired or deleted id throws TaskNotFoundError rather than answering `false` (the worker would
   * go on for nothing) or `true` (a vanished task is not a cancelled one): a worker that polls
   * this should stop on either.
   */
  async isCancelled(taskId: string): Promise<boolean> {
    return isCancellationRequested(await this.writer.read(taskId, undefined));
  }

  /** Returns the input responses received so far and removes them from the task, atomically. */
  async takeInputResponses(taskId: string): Promise<Record<string, InputResponse>> {
    let taken: Record<string, InputResponse> = {};
    const take: Transition = (task, now) => {
      taken = { ...task.inputResponses };
      return takeInputResponsesTask(task, now);
    };
    await this.writer.transition(taskId, take, { announce: false });
    return taken;
  }

  /** The worker honours a cancellation (or cancels on its own): the task becomes `cancelled`. */
  async markCancelled(taskId: string): Promise<TaskRecord> {
    return await this.writer.transition(taskId, (task, now) => markCancelledTask(task, now));
  }
}
