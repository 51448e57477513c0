import {
  type BeforeApplicationShutdown,
  Inject,
  Injectable,
  Logger,
  type OnApplicationBootstrap,
  type OnModuleDestroy,
  Optional,
} from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { ProtocolErrorCode } from '@modelcontextprotocol/server';
import {
  INTERNAL_ERROR_MESSAGE,
  ServerShuttingDownError,
  TaskInternalError,
  TaskNotFoundError,
  TaskQuotaError,
  TaskStoreFullError,
  TaskTerminalError,
  TaskTooLargeError,
  TasksConfigError,
} from '../errors.js';
import {
  type CallToolResult,
  expiresAt,
  type InputRequest,
  type InputResponse,
  isCancellationRequested,
  isTerminal,
  type TaskOwner,
  type TaskFailure,
  type TaskRecord,
  thrownJsonRpcError,
  toCallToolResult,
  validateInputRequests,
} from '../task.js';
import { isRefusal, OwnerSlots } from '../owner-slots.js';
import { TASKS_CONFIG } from '../tasks.constants.js';
import type { TasksConfig } from '../interfaces/tasks-module-options.interface.js';
import { TasksService } from '../tasks.service.js';
import { isStoreUnavailable } from '../tasks.writer.js';
import { JobTaskContext, RunningTaskContext } from './task-context.js';
import { backoff, CallOutage, jittered, OUTAGE_RETRY_FIRST_MS } from './store-outage.js';
import { type QueuedCall, TaskQueue, toolQueue } from './task-queue.js';
import { type TaskToolDefinition, TaskToolRegistry } from './task-tool.registry.js';
import { WaiterFeed } from '../notify/waiter-feed.js';
import { TaskWatch, waitForTask } from './task-watch.js';
import {
  type TelemetryRun,
  type TraceCarrier,
  type TraceParent,
  TasksTelemetry,
} from '../telemetry/tasks.telemetry.js';

/**
 * Why a call's signal fires when its task expired (its TTL ran out) or was deleted while the call
 * ran: nothing is left to settle, so the call's outcome is dropped.
 */
class TaskGone extends Error {
  constructor() {
    super('The task expired or was deleted before the call finished');
    this.name = 'TaskGone';
  }
}

class TaskCancelled extends Error {
  constructor() {
    super('The task was cancelled');
    this.name = 'AbortError';
  }
}

/**
 * Whether a failed write leaves the task settled all the same: finished by someone else meanwhile
 * (cancelled, failed at shutdown), or failed already because its result or error was too large
 * to keep, for the task or for a store that caps its bytes (TasksService logged why).
 */
const settles = (error: unknown): boolean =>
  error instanceof TaskTerminalError ||
  error instanceof TaskTooLargeError ||
  error instanceof TaskStoreFullError;

/** How often the calls stopped by their task's expiry are logged, at most. */
const LOST_TASK_LOG_MS = 60_000;

/** What a task fails with when its tool's own code threw a store fault (it called the store). */
const STORE_FAULT_FAILURE: TaskFailure = [
  ProtocolErrorCode.InternalError,
  'Task store unreachable: the call was stopped',
];

/**
 * One running call: its signal, the promise of its end, and the watch that aborts the signal when
 * the task is cancelled (here or in another process) or gone. The abort controller behind the
 * signal is made when someone first reads the signal (about 800 bytes in Node 20, with a
 * listener): a method that never looks at it costs none.
 */
class RunningCall extends TaskWatch {
  /** Set by the runner as soon as the call starts. */
  done!: Promise<void>;
  /** The run's span and count, when telemetry is on; ended with the call. */
  traced: TelemetryRun | undefined;
  /** The call's view of a store outage: past its window, the call gives up (its signal fires). */
  readonly outage: CallOutage;
  private controller: AbortController | undefined;
  private abortedWith: { reason: unknown } | undefined;
  /** Set while the call waits for its task's expiry (see `expireAt`). */
  private ends: (() => void) | undefined;

  constructor(
    tasks: TasksService,
    waiters: WaiterFeed,
    taskId: string,
    pollMs: number | null,
    outageMs: number,
  ) {
    super(tasks, waiters, taskId, pollMs);
    this.outage = new CallOutage(outageMs, (error) => this.abort(error));
    this.watch();
  }

  /**
   * Stops the call as its task expires, at `at` (the task's `expiresAt`; `null`: never): its TTL
   * is fixed at creation, so the call needs no read of the store to know it is gone, and stops at
   * once however seldom it re-reads the task.
   */
  expireAt(at: number | null): void {
    if (at === null || this.ends !== undefined || this.aborted) return;
    this.ends = () => {
      this.ends = undefined;
      this.gone();
    };
    this.waiters.atExpiry(this.taskId, at, this.ends);
  }

  override stop(): void {
    super.stop();
    if (this.ends === undefined) return;
    this.waiters.cancelExpiry(this.taskId, this.ends);
    this.ends = undefined;
  }

  /** Whether the call stopped because its task expired or was deleted. */
  get lostTask(): boolean {
    return this.abortedWith?.reason instanceof TaskGone;
  }

  /** Why the signal fired, when it did. */
  get abortReason(): unknown {
    return this.abortedWith?.reason;
  }

  get signal(): AbortSignal {
    if (this.controller === undefined) {
      this.controller = new AbortController();
      if (this.abortedWith) this.controller.abort(this.abortedWith.reason);
    }
    return this.controller.signal;
  }

  get aborted(): boolean {
    return this.abortedWith !== undefined;
  }

  /** Aborts the signal (the first reason stays), whether or not it was read yet. */
  abort(reason: unknown): void {
    if (this.abortedWith) return;
    this.abortedWith = { reason };
    this.controller?.abort(reason);
  }

  protected matches(task: TaskRecord): boolean {
    return isCancellationRequested(task) || isTerminal(task.status);
  }

  protected matched(task: TaskRecord): void {
    if (isCancellationRequested(task)) this.abort(new TaskCancelled());
  }

  protected gone(): void {
    this.stop();
    this.abort(new TaskGone());
  }
}

/**
 * The running call of a queue job: its first read of the task (made once it listens, so no change
 * falls between the two) is the job's look at the task before the method runs. A cancel (or an
 * end) heard before that read stops the watch, and the read is then never made: the state heard
 * is the job's look instead, or the job would wait for it forever.
 */
class JobCall extends RunningCall {
  private settleFirst: ((outcome: TaskRecord | Error) => void) | undefined;
  /** The task as first read (or as heard, when a cancel came first), or the error of that read. */
  readonly first = new Promise<TaskRecord | Error>((resolve) => (this.settleFirst = resolve));

  protected override read(outcome: TaskRecord | unknown): void {
    const settle = this.settleFirst;
    if (settle === undefined) return;
    this.settleFirst = undefined;
    settle(outcome instanceof Error ? outcome : (outcome as TaskRecord));
  }

  protected override matched(task: TaskRecord): void {
    super.matched(task);
    this.read(task);
  }

  protected override gone(): void {
    super.gone();
    this.read(new TaskNotFoundError());
  }
}

/** A job of a queue-run tool, as its worker runs it (see `TaskToolRunner.runJob`). */
export interface TaskJob {
  /** Which run of the job this is, from 1. A later run restarts the method from its start. */
  readonly run: number;
  /** False while the queue will run the job again if this run throws. */
  readonly lastRun: boolean;
  /** Answers the method took in earlier runs, by input key. */
  readonly answers: Readonly<Record<string, InputResponse>>;
  /** Keeps the answers taken so far with the job, for a later run. */
  keepAnswers(answers: Readonly<Record<string, InputResponse>>): Promise<void>;
}

/**
 * What a queue worker does with a job after `runJob`: nothing more (`settled`), run it again as
 * a failed attempt (`retry`), or put it back for another worker as it was (`stopped`: this
 * process is shutting down and stopped the method).
 */
export type JobOutcome = 'settled' | 'retry' | 'stopped';

/**
 * Runs `@TaskTool` methods. The task is created and stored first; the method then runs in the
 * background with a TaskContext. Its return value completes the task; a thrown JSON-RPC error
 * fails it with that code; any other throw fails it with -32603 and a generic message (the error
 * is logged here, never sent). Work that ends after a cancel leaves the task cancelled.
 */
@Injectable()
export class TaskToolRunner
  implements OnModuleDestroy, BeforeApplicationShutdown, OnApplicationBootstrap
{
  private readonly logger = new Logger('TaskToolRunner');
  private readonly running = new Map<string, RunningCall>();
  /**
   * The in-process calls of each owner that have not returned yet, counted from their start to
   * their method's end, whether or not their task is still stored: `maxTasksPerOwner` bounds them
   * too (see `reserve`). None when the option is `null`.
   */
  private readonly runningSlots: OwnerSlots | undefined;
  /** Calls whose task expired or was deleted while they ran, not logged yet (see `lostTask`). */
  private lostTasks = 0;
  private lostTasksLoggedAt = -Infinity;
  /** The ids of the running calls that are queue jobs: shutdown leaves their tasks as they are. */
  private readonly jobs = new Set<string>();
  /** Set at shutdown: ending calls then leave their tasks as shutdown decided. */
  private shuttingDown = false;
  /** Aborted at shutdown: ends the waits between tries to settle a task. */
  private readonly shutdown = new AbortController();
  /** Set when the drain starts (see `onModuleDestroy`): no new call starts from then on. */
  private draining = false;
  private startStopping!: () => void;
  /** Resolves when the app starts to shut down: queue workers take no new job from then on. */
  readonly whenStopping = new Promise<void>((resolve) => (this.startStopping = resolve));

  constructor(
    private readonly tasks: TasksService,
    private readonly waiters: WaiterFeed,
    @Inject(TASKS_CONFIG) private readonly config: TasksConfig,
    private readonly registry: TaskToolRegistry,
    @Optional() @Inject(TaskQueue) private readonly queue: TaskQueue | null,
    @Optional() private readonly telemetry?: TasksTelemetry,
  ) {
    const max = config.maxTasksPerOwner;
    if (max !== null) {
      // Per owner only: the store's `maxRows` bounds the calls of every owner together.
      this.runningSlots = new OwnerSlots({
        refusal: 'Task quota reached',
        max: Number.POSITIVE_INFINITY,
        maxOption: 'maxRows',
        maxPerPrincipal: max,
        maxPerPrincipalOption: 'maxTasksPerOwner',
      });
    }
  }

  /** A queue-run tool without a queue to send its calls to fails the boot, naming the fix. */
  onApplicationBootstrap(): void {
    if (this.queue) return;
    const queued = this.registry.all().filter((tool) => tool.options.queue !== undefined);
    if (queued.length === 0) return;
    const names = queued.map((tool) => `"${tool.name}"`).join(', ');
    throw new TasksConfigError(
      `Task tools ${names} run on a queue, but the app has no task queue: add ` +
        `TasksQueueModule.forRoot() (entry nestjs-mcp-tasks/bullmq) to its imports`,
    );
  }

  /**
   * Whether the app is shutting down (from the start of the drain): no new call starts, and a
   * queue worker runs no job it takes.
   */
  get stopping(): boolean {
    return this.draining || this.shuttingDown;
  }

  /** How many tool calls run in this process now. */
  get size(): number {
    return this.running.size;
  }

  /**
   * Creates the task (readable before this resolves) and starts the method. `requestedTtlMs` is
   * the TTL the client asked for (2025-11-25 `task.ttl`), in place of the tool's; the module's
   * `maxTtlMs` caps both. `firstInput`: the answers to the tool's `requireInputFirst` gathered
   * before the task (2026-07-28 multi round-trip); without them the task asks them first.
   * `trace`: where the request names the trace the run's span continues (telemetry).
   */
  start(
    tool: TaskToolDefinition,
    input: unknown,
    owner: TaskOwner,
    requestedTtlMs?: number,
    firstInput?: Readonly<Record<string, InputResponse>>,
    trace?: TraceCarrier,
  ): Promise<TaskRecord> {
    return this.begin(tool, input, owner, false, trace, requestedTtlMs, firstInput);
  }

  /**
   * Runs one job of a queue-run tool, in the worker that took it: the method with a TaskContext
   * bound to the task, settled as an in-process call is. A task already finished or cancelled is
   * left as it is (its job is over). An error that is not a JSON-RPC error leaves the task
   * `working` and answers `'retry'` while the queue will run the job again.
   */
  async runJob(tool: TaskToolDefinition, call: QueuedCall, job: TaskJob): Promise<JobOutcome> {
    const { taskId } = call;
    const pollMs = this.pollMs(tool);
    const running = new JobCall(
      this.tasks,
      this.waiters,
      taskId,
      pollMs,
      this.config.storeOutageMs,
    );
    const record = await running.first;
    if (record instanceof Error || isTerminal(record.status) || isCancellationRequested(record)) {
      running.stop();
      if (record instanceof TaskNotFoundError) return 'settled';
      if (record instanceof Error) throw record;
      if (!isTerminal(record.status)) await this.acknowledgeCancel(taskId);
      return 'settled';
    }
    // Taken just before the drain began: not started yet, so it goes back for another worker.
    if (this.stopping) {
      running.stop();
      return 'stopped';
    }
    if (job.run > 1) {
      await this.settle(
        this.tasks.progress(taskId, `Restarted (run ${job.run}): the previous run stopped`),
      );
    }
    running.expireAt(expiresAt(record));
    const context = new JobTaskContext(
      this.tasks,
      this.waiters,
      taskId,
      record.owner,
      running,
      pollMs,
      record.usedInputKeys ?? [],
      job,
    );
    running.traced = this.telemetry?.startRun(
      tool.name,
      taskId,
      this.telemetry.parentFrom(call.trace),
    );
    this.running.set(taskId, running);
    this.jobs.add(taskId);
    let outcome: JobOutcome = 'settled';
    running.done = this.execute(tool, call.input, context, running, call.firstInput, (error) => {
      if (job.lastRun) return false;
      outcome = 'retry';
      this.logger.warn(
        `Task tool ${tool.name} failed in run ${job.run}; the queue runs it again: ${String(error)}`,
      );
      return true;
    });
    try {
      await running.done;
    } finally {
      this.jobs.delete(taskId);
    }
    return this.shuttingDown && running.aborted && !context.isHandedOff ? 'stopped' : outcome;
  }

  /** The requests of the tool's `requireInputFirst` for this input, or none. */
  async firstInputRequests(
    tool: TaskToolDefinition,
    input: unknown,
  ): Promise<Record<string, InputRequest> | undefined> {
    const ask = tool.options.requireInputFirst;
    const requests = typeof ask === 'function' ? await ask(input) : ask;
    if (requests === undefined || Object.keys(requests).length === 0) return undefined;
    return validateInputRequests(requests);
  }

  /**
   * For a client without the tasks extension: runs the method to the end, answers its result.
   * `trace` as for `start`.
   */
  async runInline(
    tool: TaskToolDefinition,
    input: unknown,
    owner: TaskOwner,
    trace?: TraceCarrier,
  ): Promise<CallToolResult> {
    const record = await this.begin(tool, input, owner, true, trace);
    const end = await waitForTask(
      this.tasks,
      this.waiters,
      record.taskId,
      (task) => isTerminal(task.status),
      {
        pollMs: this.pollMs(tool),
      },
    );
    if (end.status === 'completed' && end.result) {
      const { resultType, ...result } = end.result;
      return result as CallToolResult;
    }
    const message =
      end.status === 'failed'
        ? (end.error?.message ?? INTERNAL_ERROR_MESSAGE)
        : 'The task was cancelled';
    return { content: [{ type: 'text', text: message }], isError: true };
  }

  /**
   * The drain, the first step of a graceful shutdown: from here on no call starts (the endpoint
   * refuses task-tool calls, the queue workers take no job), and the calls and jobs running may
   * finish within `shutdown.drainMs`. It runs in the first shutdown hook, so every provider's
   * `beforeApplicationShutdown` comes after it: the lease is still renewed, listen streams and
   * `tasks/result` waits still answer, and the store (closed in `onApplicationShutdown`) is open.
   * What still runs after it is handed over by `beforeApplicationShutdown`.
   */
  async onModuleDestroy(): Promise<void> {
    this.draining = true;
    this.startStopping();
    const { drainMs } = this.config.shutdown;
    if (this.running.size === 0 || drainMs === 0) return;
    const started = Date.now();
    this.logger.log(
      `Shutting down: ${this.running.size} running tool call(s) get up to ${drainMs} ms to finish`,
    );
    const over = new AbortController();
    let timeUp = false;
    const timer = sleep(drainMs, undefined, { signal: over.signal }).then(
      () => (timeUp = true),
      () => undefined,
    );
    // A call that was starting as the drain began joins the running ones: wait for it too.
    while (this.running.size > 0 && !timeUp) {
      await Promise.race([Promise.all([...this.running.values()].map((call) => call.done)), timer]);
    }
    over.abort();
    const left = this.running.size;
    const took = Date.now() - started;
    if (left === 0) this.logger.log(`Drained: every running tool call finished in ${took} ms`);
    else this.logger.warn(`${left} tool call(s) still running after ${took} ms: handing over`);
  }

  /**
   * Ends every call still running after the drain: its signal fires, and (option
   * `runningTasksOnShutdown`, default `'fail'`) its task fails with a clear error, or is left for
   * another instance. A queue job's task is left as it is: its job goes back to the queue (see
   * `runJob`).
   */
  async beforeApplicationShutdown(): Promise<void> {
    const running = [...this.running.entries()];
    this.startStopping();
    this.shuttingDown = true;
    this.shutdown.abort();
    const leave = this.config.runningTasksOnShutdown === 'leave';
    await Promise.all(
      running.map(async ([taskId, call]) => {
        if (!leave && !this.jobs.has(taskId)) {
          await this.tasks
            .fail(taskId, [
              ProtocolErrorCode.InternalError,
              'The server shut down before the task finished',
            ])
            .catch(() => undefined);
        }
        call.abort(new Error('The server is shutting down'));
        await call.done;
      }),
    );
  }

  /**
   * Stores the call's task, then sends it to the tool's queue or starts the method here; the
   * run's span continues the trace the request names (`trace`), read before anything is awaited.
   */
  private async begin(
    tool: TaskToolDefinition,
    input: unknown,
    owner: TaskOwner,
    inline: boolean,
    trace: TraceCarrier | undefined,
    requestedTtlMs?: number,
    firstInput?: Readonly<Record<string, InputResponse>>,
  ): Promise<TaskRecord> {
    // Shutting down: the call is made again elsewhere, so nothing is created here.
    if (this.stopping) throw new ServerShuttingDownError();
    const parent = this.telemetry?.parentOf(trace);
    if (tool.options.queue !== undefined) {
      const record = await this.create(tool, input, owner, requestedTtlMs);
      await this.enqueue(tool, input, record, firstInput, parent);
      return record;
    }
    const release = this.reserve(owner);
    let record: TaskRecord;
    try {
      record = await this.create(tool, input, owner, requestedTtlMs);
    } catch (error) {
      release();
      throw error;
    }
    this.run(tool, input, record, inline, release, firstInput, parent);
    return record;
  }

  /**
   * Counts an in-process call against its owner until `release` (its method's end), or refuses it
   * with the quota error when the owner already has `maxTasksPerOwner` calls running here. The
   * store counts the owner's stored tasks; this counts the calls, which outlive their task when
   * it expires or is deleted while the method still runs (it is stopped through its signal, but
   * a method may take its time to return). Taken synchronously, before anything is awaited, so a
   * burst of concurrent calls never passes the bound.
   */
  private reserve(owner: TaskOwner): () => void {
    const slots = this.runningSlots;
    if (slots === undefined) return () => undefined;
    const slot = slots.take(owner);
    if (isRefusal(slot)) throw new TaskQuotaError(this.config.maxTasksPerOwner!);
    return () => slot.release();
  }

  /**
   * Notes a call whose task expired or was deleted while it ran: its outcome is dropped. Logged
   * once, then at most once a minute with the count since, however many calls it stops.
   */
  private lostTask(tool: TaskToolDefinition | undefined): void {
    this.lostTasks++;
    const now = Date.now();
    if (now - this.lostTasksLoggedAt < LOST_TASK_LOG_MS) return;
    this.lostTasksLoggedAt = now;
    this.logger.warn(
      `${this.lostTasks} call(s) stopped because their task expired or was deleted while they ` +
        `ran${tool === undefined ? '' : ` (the latest: task tool ${tool.name})`}; their outcome ` +
        "was dropped. A client's short " +
        'TTL (2025-11-25 task.ttl) ends its tasks this way; further ones are counted and logged ' +
        'at most once a minute',
    );
    this.lostTasks = 0;
  }

  /**
   * Stores the call's task, labelled with the tool's name and, when the tool keeps them, the
   * arguments its `keepArguments` returns (TasksService checks them: JSON, 4 KiB at most).
   */
  private async create(
    tool: TaskToolDefinition,
    input: unknown,
    owner: TaskOwner,
    requestedTtlMs?: number,
  ): Promise<TaskRecord> {
    const { pollIntervalMs, statusMessage, keepArguments } = tool.options;
    const ttlMs = requestedTtlMs ?? tool.options.ttlMs;
    let kept: unknown;
    try {
      kept = keepArguments?.(input);
    } catch (error) {
      // A fault of the tool's own code: the call fails as an internal error, the reason logged.
      throw new TasksConfigError(`Tool "${tool.name}": keepArguments threw: ${String(error)}`);
    }
    if (typeof (kept as { then?: unknown } | null)?.then === 'function') {
      throw new TasksConfigError(
        `Tool "${tool.name}": keepArguments must return its copy, not a promise`,
      );
    }
    // An in-process call is held by this instance's lease; a queue-run one by no one (a worker
    // runs it, and the queue runs it again should that worker die).
    return this.tasks.create(
      owner,
      {
        ...(ttlMs !== undefined && { ttlMs }),
        ...(pollIntervalMs !== undefined && { pollIntervalMs }),
        ...(statusMessage !== undefined && { statusMessage }),
      },
      {
        held: tool.options.queue === undefined,
        toolName: tool.name,
        ...(kept !== undefined && { arguments: kept }),
      },
    );
  }

  /** Sends the call to the tool's queue; a queue that refuses it fails the task at once. */
  private async enqueue(
    tool: TaskToolDefinition,
    input: unknown,
    record: TaskRecord,
    firstInput?: Readonly<Record<string, InputResponse>>,
    parent?: TraceParent,
  ): Promise<void> {
    const { taskId } = record;
    // A promise only when the call arrived before the telemetry API had loaded.
    const trace = await this.telemetry?.fieldsOf(parent);
    try {
      await this.queue!.enqueue(
        toolQueue(tool.options.queue!),
        {
          tool: tool.name,
          taskId,
          input,
          ...(firstInput !== undefined && { firstInput }),
          ...(trace !== undefined && { trace }),
        },
        record.owner,
      );
    } catch (error) {
      this.logger.error(`Task tool ${tool.name} could not enqueue its job: ${String(error)}`);
      await this.settle(
        this.tasks.fail(taskId, [ProtocolErrorCode.InternalError, 'Task queue unavailable']),
      ).catch(() => undefined);
      throw new TaskInternalError('Task queue unavailable', { cause: error });
    }
  }

  private pollMs(tool: TaskToolDefinition): number | null {
    return this.tasks.rereadMs(tool.options.pollIntervalMs);
  }

  private run(
    tool: TaskToolDefinition,
    input: unknown,
    record: TaskRecord,
    inline: boolean,
    release: () => void,
    firstInput?: Readonly<Record<string, InputResponse>>,
    parent?: TraceParent,
  ): void {
    const { taskId } = record;
    const pollMs = this.pollMs(tool);
    const call = new RunningCall(
      this.tasks,
      this.waiters,
      taskId,
      pollMs,
      this.config.storeOutageMs,
    );
    const context = new RunningTaskContext(
      this.tasks,
      this.waiters,
      taskId,
      record.owner,
      call,
      inline,
      pollMs,
    );
    call.traced = this.telemetry?.startRun(tool.name, taskId, parent);
    call.expireAt(expiresAt(record));
    this.running.set(taskId, call);
    call.done = this.execute(tool, input, context, call, firstInput).finally(release);
  }

  /**
   * Runs the method to its end and settles the task: one async frame per running call. `retry`
   * (queue jobs): given an error that is not a JSON-RPC error, true leaves the task as it is.
   */
  private async execute(
    tool: TaskToolDefinition,
    input: unknown,
    context: RunningTaskContext,
    call: RunningCall,
    firstInput: Readonly<Record<string, InputResponse>> | undefined,
    retry?: (error: unknown) => boolean,
  ): Promise<void> {
    const taskId = context.taskId;
    /** What the method threw when the task is left for the queue's next run. */
    let retried: unknown;
    try {
      try {
        if (firstInput !== undefined) {
          context.firstInput = firstInput;
        } else if (tool.options.requireInputFirst !== undefined) {
          const requests = await this.firstInputRequests(tool, input);
          if (requests !== undefined) context.firstInput = await context.requireInput(requests);
        }
        const value = await tool.invoke(input, context);
        context.close();
        if (context.isHandedOff) return;
        if (call.lostTask) return this.lostTask(tool);
        // A call that gave up on the store still writes a result its tool returned.
        if (call.aborted && call.outage.givenUp === undefined) {
          if (this.shuttingDown) return;
          return await this.acknowledgeCancel(taskId);
        }
        const result = toCallToolResult(value);
        await this.settleOutcome(tool, () =>
          this.tasks.complete(taskId, result, { known: call.latest }),
        );
      } catch (error) {
        context.close();
        if (call.lostTask) return this.lostTask(tool);
        const gaveUp = call.outage.givenUp;
        if (call.aborted && gaveUp === undefined) {
          if (this.shuttingDown) return;
          return await this.acknowledgeCancel(taskId);
        }
        // The task says what stopped it: its store away past the window, a store fault thrown by
        // the tool's own code, or the tool's error (a thrown JSON-RPC error keeps its code;
        // anything else is a generic internal error).
        const storeFault = gaveUp === undefined && isStoreUnavailable(error);
        const failure =
          gaveUp?.toJsonRpcError() ?? (storeFault ? undefined : thrownJsonRpcError(error));
        if (failure === undefined && retry?.(error)) {
          retried = error;
          return;
        }
        if (failure === undefined && !storeFault) {
          this.logger.error(
            `Task tool ${tool.name} failed: ${(error as Error)?.stack ?? String(error)}`,
          );
        }
        await this.settleOutcome(tool, () =>
          this.tasks.fail(
            taskId,
            failure ??
              (storeFault
                ? STORE_FAULT_FAILURE
                : [ProtocolErrorCode.InternalError, INTERNAL_ERROR_MESSAGE]),
            { known: call.latest },
          ),
        );
      }
    } catch (error) {
      this.logger.error(`Task tool ${tool.name} could not settle its task: ${String(error)}`);
    } finally {
      context.close();
      call.stop();
      this.running.delete(taskId);
      call.traced?.end(call.latest, retried);
    }
  }

  /**
   * Awaits a write that settles a task; a failure that leaves it settled all the same (see
   * `settles`) is no failure.
   */
  private async settle(write: Promise<TaskRecord>): Promise<void> {
    try {
      await write;
    } catch (error) {
      if (!settles(error)) throw error;
    }
  }

  /**
   * Writes the outcome of a call that ran here (its result, its error, its cancellation) as
   * `settle` does, and while the store is away writes it again with backoff, until the store
   * takes it, the task is gone or finished, or the app shuts down (the task then fails as every
   * running one does). The call stays running meanwhile, so its lease still holds it; a store
   * that stays away past `storeOutageMs` changes nothing here: the outcome is the call's own, and
   * the store takes it whenever it is back.
   */
  private async settleOutcome(
    tool: TaskToolDefinition | undefined,
    write: () => Promise<TaskRecord>,
  ): Promise<void> {
    const who = tool === undefined ? 'A cancelled call' : `Task tool ${tool.name}`;
    for (let delay = OUTAGE_RETRY_FIRST_MS, tries = 1; ; tries++) {
      try {
        await write();
        if (tries > 1) this.logger.log(`${who} settled its task at try ${tries}`);
        return;
      } catch (error) {
        if (settles(error)) return;
        // Gone meanwhile (expired or deleted): nothing is left to settle.
        if (error instanceof TaskNotFoundError) return this.lostTask(tool);
        if (!isStoreUnavailable(error) || this.shuttingDown) throw error;
        if (tries === 1) {
          this.logger.warn(`${who} could not settle its task yet (the store is away): retrying`);
        }
        try {
          await sleep(jittered(delay), undefined, { signal: this.shutdown.signal });
        } catch {
          throw error;
        }
        delay = backoff(delay);
      }
    }
  }

  private async acknowledgeCancel(taskId: string): Promise<void> {
    if (this.config.cancellation === 'cooperative') {
      await this.settleOutcome(undefined, () => this.tasks.markCancelled(taskId));
    }
  }
}
