import type { IncomingHttpHeaders } from 'node:http';
import {
  type BeforeApplicationShutdown,
  Inject,
  Injectable,
  Logger,
  type OnApplicationBootstrap,
  type OnModuleDestroy,
  Optional,
} from '@nestjs/common';
import { ProtocolErrorCode } from '@modelcontextprotocol/server';
import {
  ServerShuttingDownError,
  TaskInternalError,
  TaskNotFoundError,
  TaskQuotaError,
  TasksConfigError,
} from '../errors.js';
import {
  type CallToolResult,
  expiresAt,
  type InputRequest,
  isAnswered,
  isCancellationRequested,
  isTerminal,
  type InputResponse,
  isParkId,
  type TaskCallRecord,
  type TaskOwner,
  type TaskRecord,
} from '../task.js';
import { HeldTaskResumer } from '../janitor/held-task-resumer.js';
import { isRefusal, type OwnerSlot, OwnerSlots } from '../owner-slots.js';
import { TASKS_CONFIG } from '../tasks.constants.js';
import type { TasksConfig } from '../interfaces/tasks-module-options.interface.js';
import { TasksService } from '../tasks.service.js';
import {
  JobTaskContext,
  NO_ANSWERS,
  RunningTaskContext,
  type TaskParking,
} from './task-context.js';
import { type QueuedCall, TaskQueue, toolQueue } from './task-queue.js';
import { type TaskToolDefinition, TaskToolRegistry } from './task-tool.registry.js';
import { WaiterFeed } from '../notify/waiter-feed.js';
import { waitForTask } from './task-watch.js';
import { drainCalls, JobCall, RunningCall } from './running-call.js';
import { JobHeaders, taskRequestOf } from './scoped-calls.js';
import { TaskToolSettler } from './task-tool.settler.js';
import {
  createCallTask,
  firstInputRequests,
  inlineResult,
  type JobOutcome,
  type JobPark,
  type StartCallOptions,
  type TaskJob,
  type ToolCall,
} from './task-tool.calls.js';
import {
  type TraceCarrier,
  type TraceParent,
  TasksTelemetry,
} from '../telemetry/tasks.telemetry.js';

/** How many times a durable call's method may start for one task (the first run and 3 resumes). */
export const MAX_RUNS = 4;

/**
 * The longest a durable call's task parks for input (an hour): unanswered by then, it wakes, and
 * its method runs again up to the question, which parks it again. An answer wakes it at once.
 */
const INPUT_PARK_MS = 3_600_000;

/** How often a wake's queue faults are logged at most (see `TaskToolRunner.wakeFault`). */
const WAKE_FAULT_LOG_MS = 60_000;

/**
 * Runs `@TaskTool` methods. The task is created and stored first; the method then runs in the
 * background with a TaskContext. Its return value completes the task; a thrown JSON-RPC error
 * fails it with that code; any other throw fails it with -32603 and a generic message (the error
 * is logged here, never sent). Work that ends after a cancel leaves the task cancelled (see
 * TaskToolSettler).
 */
@Injectable()
export class TaskToolRunner
  extends HeldTaskResumer
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
  /** The ids of the running calls that are queue jobs: shutdown leaves their tasks as they are. */
  private readonly jobs = new Set<string>();
  /**
   * Aborted at shutdown: ends the waits between tries to settle a task, and ending calls then
   * leave their tasks as shutdown decided.
   */
  private readonly shutdown = new AbortController();
  /** Runs each call's method to its end and writes its outcome. */
  private readonly settler: TaskToolSettler;
  /** What the jobs of request-scoped tools carry of their calls' headers. */
  private readonly jobHeaders = new JobHeaders();
  /** When a wake's queue fault was last logged, and how many came since (see `wakeFault`). */
  private wakeFaultLoggedAt = Number.NEGATIVE_INFINITY;
  private wakeFaultsSince = 0;
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
    super();
    if (queue?.wake !== undefined) tasks.wakeJob = (record) => this.wakeJob(record);
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
    this.settler = new TaskToolSettler(tasks, config, this.shutdown.signal, this.logger, (id) =>
      this.running.delete(id),
    );
  }

  /** Set at shutdown (see `beforeApplicationShutdown`). */
  private get shuttingDown(): boolean {
    return this.shutdown.signal.aborted;
  }

  /**
   * A queue-run tool without a queue to send its calls to fails the boot, naming the fix; durable
   * tools that nothing would resume are named in one WARN.
   */
  onApplicationBootstrap(): void {
    this.checkDurable();
    if (this.queue) return;
    const queued = this.registry.all().filter((tool) => tool.options.queue !== undefined);
    if (queued.length === 0) return;
    const names = queued.map((tool) => `"${tool.name}"`).join(', ');
    throw new TasksConfigError(
      `Task tools ${names} run on a queue, but the app has no task queue: add ` +
        `TasksQueueModule.forRoot() (entry nestjs-mcp-tasks/bullmq, or nestjs-mcp-tasks/pg-boss) to its imports`,
    );
  }

  /**
   * Durable in-process tools on a store shared between processes, on an instance that holds no
   * lease (`lease: false`, or a store without leases): no other instance learns that this one
   * died, so nothing resumes their calls. Said once at boot. (On the in-memory store there is no
   * other instance: nothing to say.)
   */
  private checkDurable(): void {
    if (this.tasks.leased || this.tasks.rereadMs() === null) return;
    const names = this.registry
      .all()
      .filter((tool) => tool.options.durable === true && tool.options.queue === undefined)
      .map((tool) => `"${tool.name}"`);
    if (names.length === 0) return;
    this.logger.warn(
      `Task tools ${names.join(', ')} are durable, but this instance holds no lease (option ` +
        'lease: false, or a store without leases): should it die, no other instance resumes ' +
        'their calls. Turn the lease on, on a store with leases (Redis, PostgreSQL)',
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
   * Creates the task (readable before this resolves) and starts the method (see
   * StartCallOptions for the TTL, the first input and the trace).
   */
  start(
    tool: TaskToolDefinition,
    input: unknown,
    owner: TaskOwner,
    options: StartCallOptions = {},
  ): Promise<TaskRecord> {
    return this.begin({ ...options, tool, input, owner, inline: false });
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
    const running = this.watch(JobCall, taskId, pollMs);
    const record = await running.first;
    if (record instanceof Error || isTerminal(record.status) || isCancellationRequested(record)) {
      running.stop();
      if (record instanceof TaskNotFoundError) return 'settled';
      if (record instanceof Error) throw record;
      if (!isTerminal(record.status)) await this.settler.acknowledgeCancel(taskId);
      return 'settled';
    }
    // Taken just before the drain began: not started yet, so it goes back for another worker.
    if (this.stopping) {
      running.stop();
      return 'stopped';
    }
    if (job.run > 1 && job.woken !== true) {
      await this.settler.settle(
        this.tasks.progress(taskId, `Restarted (run ${job.run}): the previous run stopped`),
      );
    }
    running.expireAt(expiresAt(record));
    let park: JobPark | undefined;
    const context = new JobTaskContext(
      this.tasks,
      this.waiters,
      taskId,
      record.owner,
      running,
      pollMs,
      record.usedInputKeys ?? [],
      job,
      this.jobParking(job, running, (parked) => (park = parked)),
      call.inline === true,
    );
    running.traced = this.telemetry?.startRun(
      tool.name,
      taskId,
      this.telemetry.parentFrom(call.trace),
    );
    this.running.set(taskId, running);
    this.jobs.add(taskId);
    running.listenSoon(() => !context.isClosed);
    let outcome: JobOutcome = 'settled';
    const retry = (error: unknown): boolean => {
      if (job.lastRun) return false;
      outcome = 'retry';
      this.logger.warn(
        `Task tool ${tool.name} failed in run ${job.run}; the queue runs it again: ${String(error)}`,
      );
      return true;
    };
    const { input, firstInput } = call;
    // A sub-tree per run (see ScopedToolCalls): its REQUEST is the task's owner, with the
    // headers the job carried.
    const request = tool.scoped
      ? taskRequestOf(record.owner, taskId, tool.name, call.headers)
      : undefined;
    running.done = this.settler.execute({
      tool,
      input,
      context,
      call: running,
      firstInput,
      retry,
      request,
    });
    try {
      await running.done;
    } finally {
      this.jobs.delete(taskId);
    }
    if (context.isParked && park !== undefined) return park;
    return this.shuttingDown && running.aborted && !context.isHandedOff ? 'stopped' : outcome;
  }

  /**
   * How a job parks, when its worker parks jobs (`TaskJob.parkAfterMs`) and the queue wakes them
   * (`TaskQueue.wake`): the park is noted for `runJob` to answer, and the worker moves the job.
   * A park for input whose answers the task has already taken in is refused: the method takes
   * them. (The context ends a park at its task's expiry at the latest, so that a client's short
   * TTL leaves no job parked, its data kept and its fair turn held, for the rest of a long sleep
   * or an hour's wait for input.)
   */
  private jobParking(
    job: TaskJob,
    running: RunningCall,
    parked: (park: JobPark) => void,
  ): TaskParking | undefined {
    const afterMs = job.parkAfterMs;
    if (afterMs === undefined || this.queue?.wake === undefined) return undefined;
    return {
      afterMs,
      inputMs: INPUT_PARK_MS,
      held: false,
      park: async (until, waitingFor) => {
        const latest = running.latest;
        if (waitingFor !== undefined && latest !== undefined && isAnswered(latest, waitingFor)) {
          return false;
        }
        parked(waitingFor === undefined ? { until } : { until, waitingFor });
        return true;
      },
    };
  }

  /**
   * Called by a worker once it has moved a parked job back to its queue (see JobPark): should the
   * answers (or a cancel) have come while it parked, before the queue could be woken for them,
   * the job is woken now. One store read. It does not throw: a read or a wake that fails (the
   * store or the queue away) is a WARN, and the job stays parked, woken at its end or sooner by
   * the next answer's write.
   */
  async parked(tool: TaskToolDefinition, taskId: string, park: JobPark): Promise<void> {
    try {
      const record = await this.tasks.status(taskId);
      const due =
        isTerminal(record.status) ||
        isCancellationRequested(record) ||
        (park.waitingFor !== undefined && isAnswered(record, park.waitingFor));
      if (due) await this.queue!.wake!(toolQueue(tool.options.queue!), taskId);
    } catch (error) {
      if (error instanceof TaskNotFoundError) return;
      this.logger.warn(
        `Task tool ${tool.name}: a parked job could not check for answers that came meanwhile: ` +
          String(error),
      );
    }
  }

  /**
   * Logs a queue fault met by a wake (see `wakeJob`): the first, then once a minute with how many
   * came meanwhile, so that a queue away for a while does not log a line per answer or cancel.
   */
  private wakeFault(tool: string, error: unknown): void {
    const now = Date.now();
    if (now - this.wakeFaultLoggedAt < WAKE_FAULT_LOG_MS) {
      this.wakeFaultsSince++;
      return;
    }
    const more =
      this.wakeFaultsSince > 0 ? ` (${this.wakeFaultsSince} more since the last one logged)` : '';
    this.wakeFaultLoggedAt = now;
    this.wakeFaultsSince = 0;
    this.logger.error(
      `Task tool ${tool} could not wake a parked job: ${String(error)}${more} (logged once a minute)`,
    );
  }

  /**
   * Wakes the parked job of a queue-run tool's task, after `tasks/update` brought its last answer
   * or the task was cancelled (TasksService calls it). Nothing for a task of another tool, or when
   * its job is not parked. A queue that cannot be reached is answered as a fault: the client that
   * sends its answer again wakes the job then.
   */
  private async wakeJob(record: TaskRecord): Promise<void> {
    const { toolName } = record;
    const tool = toolName === undefined ? undefined : this.registry.get(toolName);
    const queue = tool?.options.queue;
    if (queue === undefined || this.queue?.wake === undefined) return;
    try {
      await this.queue.wake(toolQueue(queue), record.taskId);
    } catch (error) {
      this.wakeFault(tool!.name, error);
      throw new TaskInternalError('Task queue unavailable', { cause: error });
    }
  }

  /**
   * What a durable tool's in-process call keeps of itself, on a store with leases (see
   * `TaskRecord.call`): its input as JSON, its first answers, and the headers a request-scoped
   * tool's REQUEST carries (as a job carries them). None for any other call, nor for an inline
   * one.
   */
  private durableCall({
    tool,
    input,
    firstInput,
    headers,
    inline,
  }: ToolCall): TaskCallRecord | undefined {
    // An inline call's client waits in the request itself: should the instance die, so does it.
    if (tool.options.durable !== true || !this.tasks.leased || inline) return undefined;
    const carried = tool.scoped ? this.jobHeaders.of(tool.name, headers) : undefined;
    return {
      input: input === undefined ? undefined : (JSON.parse(JSON.stringify(input)) as unknown),
      ...(firstInput !== undefined && { firstInput }),
      ...(carried !== undefined && { headers: carried }),
    };
  }

  /**
   * Runs a durable call again here, for a task whose instance died (TasksLease asks before it
   * fails the task): the task is moved to this instance first (one compare-and-set; another
   * instance that moved it first wins), then the method starts as a call does, with the task's
   * journal, the answers it took and its first input. Past MAX_RUNS runs the task fails instead.
   * False for a task this process cannot run again (not a durable in-process call of one of its
   * tools, or the app shutting down): the lease fails it as before.
   */
  async resume(record: TaskRecord): Promise<boolean> {
    const { call, toolName } = record;
    const tool = toolName === undefined ? undefined : this.registry.get(toolName);
    if (
      call === undefined ||
      tool === undefined ||
      tool.options.durable !== true ||
      tool.options.queue !== undefined ||
      this.stopping
    ) {
      return false;
    }
    const runs = record.runs ?? 1;
    const from = record.heldBy;
    // A parked task wakes (its sleep is over): its call did not stop, and its runs stay.
    const waking = from !== undefined && isParkId(from);
    if (runs >= MAX_RUNS && !waking) {
      this.logger.error(
        `Task tool ${tool.name}: its instance stopped in each of ${runs} runs; the task fails`,
      );
      await this.tasks.fail(
        record.taskId,
        [
          ProtocolErrorCode.InternalError,
          `The task was run ${runs} times and its server stopped each time`,
        ],
        { known: record },
      );
      return true;
    }
    const moved = await this.tasks.resumeHeld(record.taskId, { known: record, from });
    // Another instance took it over first: it is no longer the dead one's either way.
    if (moved.heldBy !== this.tasks.instanceId || moved.version === record.version) return true;
    // Its cancel was asked (cooperative mode) while it parked, or while its instance was dying:
    // the cancel is acknowledged, the method does not run again.
    if (isCancellationRequested(moved)) {
      await this.settler.acknowledgeCancel(moved.taskId);
      return true;
    }
    const slots = this.runningSlots?.take(moved.owner);
    if (!waking) {
      this.logger.log(
        `Task tool ${tool.name}: resuming a task whose instance stopped (run ${moved.runs})`,
      );
    }
    this.run(
      {
        tool,
        input: call.input,
        owner: moved.owner,
        inline: false,
        ...(call.firstInput !== undefined && { firstInput: call.firstInput }),
      },
      moved,
      slots === undefined || isRefusal(slots) ? undefined : slots,
      undefined,
      call,
    );
    return true;
  }

  /**
   * How a durable call parks its task for a long sleep (see TasksService.park): a sleep of at
   * least two leases parks (a parked task wakes at a lease renewal's sweep, every third of a
   * lease, so a shorter one would wake late by much of its length). None without a lease.
   */
  private parking(taskId: string, call: RunningCall): TaskParking | undefined {
    const { lease } = this.config;
    if (!this.tasks.leased || lease === false) return undefined;
    return {
      afterMs: 2 * lease.ttlMs,
      inputMs: INPUT_PARK_MS,
      held: true,
      park: async (until, waitingFor) => {
        const parked = await this.tasks.park(taskId, until, { known: call.latest, waitingFor });
        call.saw(parked);
        // A park for input whose answers all came is refused (see TasksService.park); a sleep's
        // task no longer held here has moved, and this run stops (TaskMoved) either way.
        return waitingFor === undefined || (parked.heldBy !== undefined && isParkId(parked.heldBy));
      },
    };
  }

  /** The requests of the tool's `requireInputFirst` for this input, or none. */
  firstInputRequests(
    tool: TaskToolDefinition,
    input: unknown,
  ): Promise<Record<string, InputRequest> | undefined> {
    return firstInputRequests(tool, input);
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
    /** The request's headers, for a request-scoped tool's REQUEST (see StartCallOptions). */
    headers?: IncomingHttpHeaders,
  ): Promise<CallToolResult> {
    const record = await this.begin({ tool, input, owner, inline: true, trace, headers });
    const ended = (task: TaskRecord): boolean => isTerminal(task.status);
    const end = await waitForTask(this.tasks, this.waiters, record.taskId, ended, {
      pollMs: this.pollMs(tool),
    });
    return inlineResult(end);
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
    await drainCalls(this.running, drainMs, this.logger);
  }

  /**
   * Ends every call still running after the drain: its signal fires, and (option
   * `runningTasksOnShutdown`, default `'fail'`) its task fails with a clear error, or is left for
   * another instance. A queue job's task is left as it is: its job goes back to the queue (see
   * `runJob`); so is a durable call's: another instance resumes it (see `resume`).
   */
  async beforeApplicationShutdown(): Promise<void> {
    const running = [...this.running.entries()];
    this.startStopping();
    this.shutdown.abort();
    const leave = this.config.runningTasksOnShutdown === 'leave';
    await Promise.all(
      running.map(async ([taskId, call]) => {
        // A durable call is resumed by another instance once this one's lease runs out.
        if (!leave && !this.jobs.has(taskId) && call.latest?.call === undefined) {
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
  private async begin(begun: ToolCall): Promise<TaskRecord> {
    const { tool, owner } = begun;
    // Shutting down: the call is made again elsewhere, so nothing is created here.
    if (this.stopping) throw new ServerShuttingDownError();
    const parent = this.telemetry?.parentOf(begun.trace);
    if (tool.options.queue !== undefined) {
      const record = await createCallTask(this.tasks, begun);
      await this.enqueue(begun, record, parent);
      return record;
    }
    const slot = this.reserve(owner);
    let record: TaskRecord;
    try {
      record = await createCallTask(this.tasks, begun, this.durableCall(begun));
    } catch (error) {
      slot?.release();
      throw error;
    }
    this.run(begun, record, slot, parent);
    return record;
  }

  /**
   * Counts an in-process call against its owner until its slot is given back (its method's end,
   * RunningCall.release), or refuses it with the quota error when the owner already has
   * `maxTasksPerOwner` calls running here. The
   * store counts the owner's stored tasks; this counts the calls, which outlive their task when
   * it expires or is deleted while the method still runs (it is stopped through its signal, but
   * a method may take its time to return). Taken synchronously, before anything is awaited, so a
   * burst of concurrent calls never passes the bound.
   */
  private reserve(owner: TaskOwner): OwnerSlot | undefined {
    const slots = this.runningSlots;
    if (slots === undefined) return undefined;
    const slot = slots.take(owner);
    if (isRefusal(slot)) throw new TaskQuotaError(this.config.maxTasksPerOwner!);
    return slot;
  }

  /** Sends the call to the tool's queue; a queue that refuses it fails the task at once. */
  private async enqueue(
    { tool, input, firstInput, headers, inline }: ToolCall,
    record: TaskRecord,
    parent: TraceParent | undefined,
  ): Promise<void> {
    const { taskId } = record;
    // A promise only when the call arrived before the telemetry API had loaded.
    const trace = await this.telemetry?.fieldsOf(parent);
    const carried = tool.scoped ? this.jobHeaders.of(tool.name, headers) : undefined;
    try {
      await this.queue!.enqueue(
        toolQueue(tool.options.queue!),
        {
          tool: tool.name,
          taskId,
          input,
          ...(inline && { inline: true }),
          ...(firstInput !== undefined && { firstInput }),
          ...(trace !== undefined && { trace }),
          ...(carried !== undefined && { headers: carried }),
        },
        record.owner,
      );
    } catch (error) {
      this.logger.error(`Task tool ${tool.name} could not enqueue its job: ${String(error)}`);
      await this.settler
        .settle(
          this.tasks.fail(taskId, [ProtocolErrorCode.InternalError, 'Task queue unavailable']),
        )
        .catch(() => undefined);
      throw new TaskInternalError('Task queue unavailable', { cause: error });
    }
  }

  private pollMs(tool: TaskToolDefinition): number | null {
    return this.tasks.rereadMs(tool.options.pollIntervalMs);
  }

  /** A watch of the call's task: its signal, its store outage window. */
  private watch<C extends RunningCall>(
    Call: new (...args: ConstructorParameters<typeof RunningCall>) => C,
    taskId: string,
    pollMs: number | null,
  ): C {
    return new Call(this.tasks, this.waiters, taskId, pollMs, this.config.storeOutageMs);
  }

  private run(
    { tool, input, inline, firstInput, headers }: ToolCall,
    record: TaskRecord,
    slot: OwnerSlot | undefined,
    parent: TraceParent | undefined,
    /** A durable call run again (see `resume`): what its task kept of it. */
    resumed?: TaskCallRecord,
  ): void {
    const { taskId } = record;
    const pollMs = this.pollMs(tool);
    const call = this.watch(RunningCall, taskId, pollMs);
    // The record just created (or taken over): a first step writes on it without a read.
    call.saw(record);
    const context =
      record.call === undefined
        ? new RunningTaskContext(
            this.tasks,
            this.waiters,
            taskId,
            record.owner,
            call,
            inline,
            pollMs,
          )
        : new JobTaskContext(
            this.tasks,
            this.waiters,
            taskId,
            record.owner,
            call,
            pollMs,
            resumed === undefined ? [] : (record.usedInputKeys ?? []),
            {
              answers: record.answers ?? NO_ANSWERS,
              keepAnswers: async (answers: Readonly<Record<string, InputResponse>>) => {
                call.saw(await this.tasks.keepAnswers(taskId, answers, { known: call.latest }));
              },
            },
            this.parking(taskId, call),
          );
    call.traced = this.telemetry?.startRun(tool.name, taskId, parent);
    call.expireAt(expiresAt(record));
    this.running.set(taskId, call);
    // Made now, while the headers are at hand: the call keeps this copy, never the request.
    const request = tool.scoped
      ? taskRequestOf(record.owner, taskId, tool.name, resumed?.headers ?? headers)
      : undefined;
    // The settler gives the slot back as the method's run ends (no promise or closure of its own).
    call.slot = slot;
    call.done = this.settler.execute({ tool, input, context, call, firstInput, request });
  }
}
