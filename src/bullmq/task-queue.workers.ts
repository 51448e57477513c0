import {
  Inject,
  Injectable,
  Logger,
  type OnApplicationBootstrap,
  type OnApplicationShutdown,
  type OnModuleDestroy,
} from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { DelayedError, type Job, type JobsOptions, UnrecoverableError, Worker } from 'bullmq';
import { ProtocolErrorCode } from '@modelcontextprotocol/server';
import { INTERNAL_ERROR_MESSAGE, show, TaskTerminalError, TasksConfigError } from '../errors.js';
import type { InputResponse } from '../task.js';
import { TasksService } from '../tasks.service.js';
import { toolQueue } from '../tools/task-queue.js';
import type { TaskToolQueue } from '../tools/task-tool.decorator.js';
import { type TaskToolDefinition, TaskToolRegistry } from '../tools/task-tool.registry.js';
import { JOB_PARK_AFTER_MS, type JobPark, type TaskJob } from '../tools/task-tool.calls.js';
import { TaskToolRunner } from '../tools/task-tool.runner.js';
import { BullTaskQueue, type TaskJobData } from './bull-task-queue.js';
import { FAIR_MAX_LEVEL, FAIR_RANKS } from './fair-turns.js';
import { checkQueueConnection, QUEUE_ERROR_LOG_MS, queueFault } from './queue-connection.js';
import {
  checkQueueOptions,
  TASKS_QUEUE_OPTIONS,
  type TasksQueueModuleOptions,
} from './tasks-queue.options.js';

/** How long a job given back at shutdown waits before another worker may take it. */
const PUT_BACK_DELAY_MS = 1_000;

/**
 * The BullMQ Workers of this process: one per queue that a `@TaskTool` names, started once the
 * app is ready (never before its providers are), each running its jobs through
 * TaskToolRunner.runJob. At shutdown they stop taking jobs as the runner's drain starts, and let
 * the jobs they run finish within it (`shutdown.drainMs`); the runner then stops the methods
 * still running, and their jobs go back to the queue (delayed a second) for another worker; the
 * workers close last. A job whose method sleeps (`task.sleep`, over a second) or waits for input
 * parks: it leaves its slot, back in the queue's delayed set until the sleep's end (an hour for
 * input), and is woken sooner by its answer or a cancel (BullTaskQueue.wake).
 */
@Injectable()
export class TaskQueueWorkers
  implements OnApplicationBootstrap, OnModuleDestroy, OnApplicationShutdown
{
  private readonly logger = new Logger('TaskQueueWorkers');
  private readonly workers: Worker<TaskJobData>[] = [];
  private closed: Promise<unknown> | undefined;
  /** When each queue's errors were last logged, and how many came since (see `queueError`). */
  private readonly faults = new Map<string, { loggedAt: number; since: number }>();
  /** The workers whose connections have been up (BullMQ's `ready`). */
  private readonly connected = new WeakSet<Worker<TaskJobData>>();

  constructor(
    @Inject(TASKS_QUEUE_OPTIONS) private readonly options: TasksQueueModuleOptions,
    private readonly queues: BullTaskQueue,
    private readonly modules: ModuleRef,
  ) {
    checkQueueOptions(options);
  }

  onApplicationBootstrap(): void {
    // The registration's internals: found in the app, not exported by it.
    const registry = this.modules.get(TaskToolRegistry, { strict: false });
    const names = new Set<string>();
    for (const tool of registry.all()) {
      if (tool.options.queue === undefined) continue;
      const queue = toolQueue(tool.options.queue);
      names.add(queue.name);
      // Every named queue must be registered, in a process that takes calls as in a worker.
      this.queues.queue(queue.name);
      checkJobOptions(tool.name, queue);
      if (this.queues.isFair(queue.name)) checkFairLevel(tool.name, queue, this.queues);
    }
    const queues = [...names].map((name) => this.queues.queue(name));
    for (const queue of queues) {
      checkQueueConnection(queue);
      // Without a listener of its own, a queue prints each connection error to the console, stack
      // and all; with this one, they are logged as the workers' are.
      if (queue.listenerCount('error') === 0) {
        queue.on('error', (error) => this.queueError(queue.name, queue.opts.connection, error));
      }
    }
    if (this.options.worker === false) return;
    const runner = this.modules.get(TaskToolRunner, { strict: false });
    const tasks = this.modules.get(TasksService, { strict: false });
    for (const queue of queues) {
      const worker: Worker<TaskJobData> = new Worker<TaskJobData>(
        queue.name,
        (job, token) => this.process(registry, runner, worker, job, token),
        {
          ...this.options.workers?.[queue.name],
          connection: queue.opts.connection,
          ...(queue.opts.prefix !== undefined && { prefix: queue.opts.prefix }),
        },
      );
      worker.on('completed', (job) => void this.ended(job));
      worker.on('failed', (job, error) => void this.failed(tasks, job, error));
      worker.on('error', (error) => this.queueError(queue.name, queue.opts.connection, error));
      worker.once('ready', () => this.connected.add(worker));
      this.workers.push(worker);
    }
    // The drain starts in the runner's first shutdown hook, which may come before this module's.
    void runner.whenStopping.then(() => this.onModuleDestroy());
  }

  /**
   * Logs a queue's (or its worker's) error, naming where its Redis is: the first, then once a
   * minute with how many came meanwhile. While Redis is away BullMQ reports each reconnect attempt
   * of each connection, several a second.
   */
  private queueError(queue: string, connection: unknown, error: unknown): void {
    const now = Date.now();
    const fault = this.faults.get(queue);
    if (fault !== undefined && now - fault.loggedAt < QUEUE_ERROR_LOG_MS) {
      fault.since++;
      return;
    }
    const more = fault?.since ? ` (${fault.since} more since the last one logged)` : '';
    this.faults.set(queue, { loggedAt: now, since: 0 });
    this.logger.error(
      `${queueFault(queue, connection, error)}${more} (this queue's errors are logged once a minute)`,
    );
  }

  /**
   * Stops taking jobs. Closing a worker waits for its running jobs, which finish in the runner's
   * drain or are stopped after it, so the close is awaited only at the end.
   */
  onModuleDestroy(): void {
    // A worker that never reached Redis runs no job, and its plain close would wait for the
    // connection forever: it is closed at once.
    this.closed ??= Promise.all(
      this.workers.map((worker) => worker.close(!this.connected.has(worker))),
    );
  }

  async onApplicationShutdown(): Promise<void> {
    await this.closed;
  }

  private async process(
    registry: TaskToolRegistry,
    runner: TaskToolRunner,
    worker: Worker<TaskJobData>,
    job: Job<TaskJobData>,
    token: string | undefined,
  ): Promise<void> {
    const tool = registry.get(job.data.tool);
    if (tool === undefined || tool.options.queue === undefined) {
      // A worker without the tool (another version of the app): it fails the task, not runs it.
      throw new UnrecoverableError(`No queue-run task tool "${job.data.tool}" in this worker`);
    }
    // A process that is shutting down runs nothing more (its idle slots may still fetch a job).
    if (runner.stopping) return await this.putBack(job, token);
    const attempts = job.opts.attempts ?? 1;
    const { parks = 0, parkedAt } = job.data;
    const run: TaskJob = {
      // Each start counts in attemptsStarted, a wake's too: a park is no run of its own, and a
      // crash of a run that woke still counts as one (its next start is not parkedAt + 1).
      run: job.attemptsStarted - parks,
      woken: parkedAt !== undefined && job.attemptsStarted === parkedAt + 1,
      lastRun: job.attemptsMade + 1 >= attempts,
      answers: (job.data.answers ?? {}) as Readonly<Record<string, InputResponse>>,
      keepAnswers: (answers) => job.updateData({ ...job.data, answers }),
      // Only a job whose id is its task's can be woken by its answer (`wake` finds it by that id):
      // a job added by an earlier version of the app, under an id of BullMQ's, does not park.
      ...(job.id === job.data.taskId && { parkAfterMs: JOB_PARK_AFTER_MS }),
    };
    const outcome = await runner.runJob(tool, job.data, run);
    if (outcome === 'retry') throw new Error(`Task tool ${tool.name} failed; the queue retries it`);
    if (outcome === 'stopped') await this.putBack(job, token);
    if (typeof outcome === 'object') await this.park(runner, tool, worker, job, token, outcome);
  }

  /**
   * Parks a job (see JobPark): back to the queue's delayed set until `park.until`, without
   * spending an attempt, its data noting the park (`parks`, `parkedAt`) in the same script, so
   * that no start of the job can see the move without the note. Its turn on a fair queue stays
   * with it: it has not ended. Then the runner wakes it at once should its answers (or a cancel)
   * have come while it was still active, when `wake` could not move it.
   */
  private async park(
    runner: TaskToolRunner,
    tool: TaskToolDefinition,
    worker: Worker<TaskJobData>,
    job: Job<TaskJobData>,
    token: string | undefined,
    park: JobPark,
  ): Promise<never> {
    const data: TaskJobData = {
      ...job.data,
      parks: (job.data.parks ?? 0) + 1,
      parkedAt: job.attemptsStarted,
    };
    const now = Date.now();
    // What job.moveToDelayed does (skipAttempt), with the data written by the same script.
    await worker.getBackend().moveToDelayed(job.id!, now, Math.max(0, park.until - now), token, {
      skipAttempt: true,
      fieldsToUpdate: { data: JSON.stringify(data) },
    });
    job.data = data;
    await runner.parked(tool, data.taskId, park);
    throw new DelayedError();
  }

  /**
   * Gives a job back without spending an attempt or a stall: delayed by PUT_BACK_DELAY_MS, by
   * which time this process has stopped fetching, so another worker takes it.
   */
  private async putBack(job: Job<TaskJobData>, token: string | undefined): Promise<never> {
    await job.moveToDelayed(Date.now() + PUT_BACK_DELAY_MS, token);
    throw new DelayedError();
  }

  /**
   * A job ended (completed, or failed for good): its owner's turn on a fair queue is given back.
   * Should Redis not take it now, the owner's next add finds the job ended and drops it then.
   */
  private async ended(job: Job<TaskJobData>): Promise<void> {
    try {
      await this.queues.ended(job);
    } catch (error) {
      this.logger.warn(
        `Queue ${job.queueName}: could not give back a job's turn: ${String(error)}`,
      );
    }
  }

  /**
   * A job that failed for good (its attempts spent, stalled more often than `maxStalledCount`, or
   * unrecoverable) fails its task with a generic error, unless the run settled it already.
   */
  private async failed(
    tasks: TasksService,
    job: Job<TaskJobData> | undefined,
    error: Error,
  ): Promise<void> {
    if (job === undefined) return;
    const final =
      error instanceof UnrecoverableError ||
      error.name === 'UnrecoverableError' ||
      job.attemptsMade >= (job.opts.attempts ?? 1);
    if (!final) return;
    void this.ended(job);
    try {
      await tasks.fail(job.data.taskId, [ProtocolErrorCode.InternalError, INTERNAL_ERROR_MESSAGE]);
    } catch (failure) {
      if (failure instanceof TaskTerminalError) return;
      this.logger.error(`Queue ${job.queueName}: could not fail a task: ${String(failure)}`);
    }
  }
}

/**
 * The job options that would make a call's job share another's, in which case BullMQ drops its
 * add without an error and the call's task stays `working` until its TTL, without a word: its own
 * id (a job's id is its task's, see BullTaskQueue.enqueue), and a deduplication (an add is dropped
 * while a job of the same deduplication id is there).
 */
const MERGING_JOB_OPTIONS = ['jobId', 'deduplication'] as const;

/** A tool whose `jobOptions` set one of MERGING_JOB_OPTIONS fails the boot, naming it. */
function checkJobOptions(tool: string, queue: Readonly<TaskToolQueue>): void {
  const own = queue.jobOptions as JobsOptions | undefined;
  for (const option of MERGING_JOB_OPTIONS) {
    if (own?.[option] === undefined) continue;
    const why =
      option === 'jobId'
        ? "a task's job takes the task's id, one job per call"
        : "BullMQ would drop a call's job as a duplicate of another's, and its task would never run";
    throw new TasksConfigError(
      `Task tool "${tool}" sets ${option} ${show(own[option])} in its jobOptions (queue ` +
        `"${queue.name}"): ${why}; remove ${option}`,
    );
  }
}

/**
 * On a fair queue a job's priority is `level × FAIR_RANKS + rank`, within BullMQ's 2^21 − 1: a
 * tool (or a queue) whose `priority` option leaves no room for the ranks fails the boot.
 */
function checkFairLevel(tool: string, queue: Readonly<TaskToolQueue>, queues: BullTaskQueue): void {
  const level = queues.priorityLevel(queue);
  if (Number.isInteger(level) && level >= 0 && level <= FAIR_MAX_LEVEL) return;
  throw new TasksConfigError(
    `Task tool "${tool}" runs on the fair queue "${queue.name}" with priority ${String(level)}: ` +
      `on a fair queue a priority is an integer from 0 to ${FAIR_MAX_LEVEL} (each level holds ` +
      `${FAIR_RANKS} owner ranks); lower it, or set fair: { '${queue.name}': false } in ` +
      'TasksQueueModule.forRoot',
  );
}
