import {
  Injectable,
  Inject,
  Logger,
  type OnApplicationBootstrap,
  type OnApplicationShutdown,
  type OnModuleDestroy,
} from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import type PgBoss from 'pg-boss';
import { ProtocolErrorCode } from '@modelcontextprotocol/server';
import { INTERNAL_ERROR_MESSAGE, TaskNotFoundError, TaskTerminalError } from '../errors.js';
import type { InputResponse } from '../task.js';
import { TasksService } from '../tasks.service.js';
import { toolQueue } from '../tools/task-queue.js';
import { TaskToolRegistry } from '../tools/task-tool.registry.js';
import {
  JOB_PARK_AFTER_MS,
  type JobOutcome,
  type JobPark,
  type TaskJob,
} from '../tools/task-tool.calls.js';
import type { TaskToolDefinition } from '../tools/task-tool.registry.js';
import { TaskToolRunner } from '../tools/task-tool.runner.js';
import { PgBossTaskQueue, type PgBossJobData, retentionInterval } from './pg-boss-task-queue.js';
import { TASKS_PG_BOSS_OPTIONS, type TasksQueueModuleOptions } from './tasks-queue.options.js';

/** How long a job given back at shutdown waits before another worker may take it. */
const PUT_BACK_DELAY_MS = 1_000;

/**
 * The longest park that a local timer wakes (see `park`): the slots of the process that parked a
 * job look for it as its park ends. A longer one is found by the slots' polls, so that a process
 * holds no timer per job for hours or days.
 */
const PARK_TIMER_MAX_MS = 3_600_000;

/**
 * How long after a park's end its timer wakes a slot: the job's start is set by the database's
 * clock, from the park's length, as the timer is set; the statement reaches the database a moment
 * later, and pg-boss fetches a job only once its start has passed.
 */
const PARK_TIMER_SLACK_MS = 25;

/** pg-boss's retention of a job without one of its own, its queue's or its constructor's. */
const DEFAULT_RETENTION = '14 days';

/**
 * The UPDATE that parks a job (see `TaskQueueWorkers.park`), on pg-boss's tables in `schema`.
 * Parameters: the queue, the job's id, the milliseconds left to the park's end, the job's own
 * retention and the constructor's (intervals, or null). The new data's `parkedAt` is the retry
 * count before this statement (PostgreSQL reads every SET's right side from the row as it was).
 */
function parkSql(schema: string): string {
  const start = `now() + $3 * interval '1 millisecond'`;
  const retention =
    `COALESCE($4::interval, (SELECT retention_minutes * interval '1 minute' ` +
    `FROM "${schema}".queue WHERE name = $1), $5::interval, interval '${DEFAULT_RETENTION}')`;
  return (
    `UPDATE "${schema}".job SET state = 'retry', retry_count = retry_count - 1, ` +
    `start_after = ${start}, keep_until = GREATEST(keep_until, ${start} + ${retention}), ` +
    `data = data || jsonb_build_object('parkedAt', retry_count) ` +
    `WHERE name = $1 AND id = $2 AND state = 'active'`
  );
}

/** pg-boss's default polling interval (2 s). */
const POLLING_MS = 2_000;

/**
 * How far back each sweep looks for jobs pg-boss failed (see `sweep`), in sweeps: a sweep that
 * could not run (the database away) is made up by the next ones.
 */
const SWEEP_WINDOWS = 3;

/** A job as a slot fetches it (with its retry count and limit). */
type TaskPgJob = PgBoss.JobWithMetadata<PgBossJobData>;

/**
 * The workers of this process on pg-boss: for every queue a `@TaskTool` names, `concurrency`
 * slots (see TaskWorkerOptions), started once the app is ready, each fetching one job at a time
 * and running it through TaskToolRunner.runJob. While a job runs, its slot keeps it alive in
 * pg-boss (see `heartbeat`): pg-boss 10 fails an active job once its `expireInSeconds` have passed
 * since it started, and runs it again (within its `retryLimit`), which is how the job of a worker
 * that died runs again elsewhere. At shutdown the slots stop fetching as the runner's drain
 * starts; the jobs still running when the runner stops them go back to the queue (a second later)
 * for another worker.
 */
@Injectable()
export class TaskQueueWorkers
  implements OnApplicationBootstrap, OnModuleDestroy, OnApplicationShutdown
{
  private readonly logger = new Logger('TaskQueueWorkers');
  private stopped = false;
  /** The slots' loops, for the shutdown to wait on. */
  private readonly slots: Promise<void>[] = [];
  /**
   * The idle slots of each queue: one is woken by each job sent (by this process, or by another
   * through a job notice), all by the shutdown.
   */
  private readonly idle = new Map<string, Set<() => void>>();
  /**
   * How many wakes each queue has had: a slot whose fetch found nothing fetches again if one came
   * meanwhile (the job may have been sent after the fetch looked, while no slot was idle).
   */
  private readonly wakes = new Map<string, number>();
  /** The timers of the sweeps (see `sweep`). */
  private readonly sweeps: NodeJS.Timeout[] = [];
  /** The timers that wake a slot as a short park ends (see `park`). */
  private readonly parks = new Set<NodeJS.Timeout>();

  constructor(
    @Inject(TASKS_PG_BOSS_OPTIONS) private readonly options: TasksQueueModuleOptions,
    private readonly queues: PgBossTaskQueue,
    private readonly modules: ModuleRef,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    try {
      await this.start();
    } catch (error) {
      // A failed boot closes nothing: the PgBoss's pool would keep the process alive.
      await this.queues.notices.close().catch(() => undefined);
      await this.queues.boss.stop({ graceful: false, wait: false }).catch(() => undefined);
      throw error;
    }
  }

  private async start(): Promise<void> {
    // The registration's internals: found in the app, not exported by it.
    const registry = this.modules.get(TaskToolRegistry, { strict: false });
    const names = new Set<string>();
    for (const tool of registry.all()) {
      if (tool.options.queue === undefined) continue;
      const queue = toolQueue(tool.options.queue);
      names.add(queue.name);
      this.queues.checkJobOptions(tool.name, queue);
    }
    // Every queue is made (or given its options) in a process that takes calls as in a worker.
    await Promise.all([...names].map((name) => this.queues.ensureQueue(name)));
    if (this.options.worker === false) return;
    const runner = this.modules.get(TaskToolRunner, { strict: false });
    const tasks = this.modules.get(TasksService, { strict: false });
    this.queues.onSent = (queue) => this.wake(queue);
    // Jobs sent by other processes (an API-only instance) are taken at once, not at the next poll.
    await this.queues.notices.listen({
      sent: (queue) => {
        if (names.has(queue)) this.wake(queue);
      },
      missed: () => {
        for (const name of names) this.wake(name);
      },
    });
    for (const name of names) {
      const { concurrency = 1, pollingIntervalSeconds } = this.options.workers?.[name] ?? {};
      const pollMs =
        pollingIntervalSeconds === undefined ? POLLING_MS : pollingIntervalSeconds * 1000;
      for (let i = 0; i < concurrency; i++) {
        this.slots.push(this.slot(name, pollMs, registry, runner, tasks));
      }
      const everyMs = 2 * Math.max(pollMs, 1_000);
      const timer = setInterval(() => void this.sweep(name, tasks, everyMs), everyMs);
      timer.unref();
      this.sweeps.push(timer);
    }
    // The drain starts in the runner's first shutdown hook, which may come before this module's.
    void runner.whenStopping.then(() => this.onModuleDestroy());
    this.queues.holdUntil(runner.whenStopping.then(() => Promise.all(this.slots)));
  }

  /** Stops fetching: each slot ends once its job (if any) ends. */
  onModuleDestroy(): void {
    this.stopped = true;
    for (const timer of this.sweeps) clearInterval(timer);
    for (const timer of this.parks) clearTimeout(timer);
    this.parks.clear();
    for (const queue of this.idle.keys()) this.wakeAll(queue);
  }

  async onApplicationShutdown(): Promise<void> {
    this.onModuleDestroy();
    await Promise.all(this.slots);
  }

  /**
   * Fails the tasks of the jobs pg-boss failed for good on its own: a job whose worker died (it
   * expired) on its last run, which no worker of ours sees end. Every worker process sweeps (a
   * task failed already is left as it is), looking a few sweeps back, by the database's clock.
   */
  private async sweep(queue: string, tasks: TasksService, everyMs: number): Promise<void> {
    let rows: { taskId: string | null }[];
    try {
      ({ rows } = (await this.queues.boss
        .getDb()
        .executeSql(
          `SELECT data->>'taskId' AS "taskId" FROM ${this.table()} WHERE name = $1 ` +
            `AND state = 'failed' AND completed_on > now() - $2 * interval '1 millisecond'`,
          [queue, everyMs * SWEEP_WINDOWS],
        )) as { rows: { taskId: string | null }[] });
    } catch (error) {
      this.queues.error(error);
      return;
    }
    for (const { taskId } of rows) {
      if (taskId !== null) await this.failTask(tasks, queue, taskId);
    }
  }

  /**
   * A job may wait on the queue: one idle slot looks (a slot that finds a job wakes the next, so a
   * burst is taken by as many slots as it needs, without every idle slot fetching for each job).
   */
  private wake(queue: string): void {
    this.wakes.set(queue, (this.wakes.get(queue) ?? 0) + 1);
    const [first] = this.idle.get(queue) ?? [];
    first?.();
  }

  /** Wakes every idle slot of a queue (the shutdown). */
  private wakeAll(queue: string): void {
    const waiting = this.idle.get(queue);
    if (waiting === undefined) return;
    this.idle.delete(queue);
    for (const resolve of waiting) resolve();
  }

  /** Waits `ms`, or less if a job is sent or the shutdown starts. */
  private rest(queue: string, ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      let waiting = this.idle.get(queue);
      if (waiting === undefined) this.idle.set(queue, (waiting = new Set()));
      const done = (): void => {
        clearTimeout(timer);
        waiting.delete(done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      waiting.add(done);
    });
  }

  /** One slot of a queue: fetches a job, runs it, and again, until the shutdown. */
  private async slot(
    queue: string,
    pollMs: number,
    registry: TaskToolRegistry,
    runner: TaskToolRunner,
    tasks: TasksService,
  ): Promise<void> {
    const { boss } = this.queues;
    while (!this.stopped && !runner.stopping) {
      const seen = this.wakes.get(queue) ?? 0;
      let job: TaskPgJob | undefined;
      let failed = false;
      try {
        [job] = await boss.fetch<PgBossJobData>(queue, { batchSize: 1, includeMetadata: true });
      } catch (error) {
        failed = true;
        this.queues.error(error);
      }
      if (job === undefined) {
        if (failed || (this.wakes.get(queue) ?? 0) === seen) await this.rest(queue, pollMs);
        continue;
      }
      // More may wait (a burst, a backlog): another idle slot looks.
      this.wake(queue);
      try {
        await this.process(queue, job, registry, runner, tasks);
      } catch (error) {
        this.logger.error(`Queue ${queue}: a job's run failed: ${String(error)}`);
      }
    }
  }

  private async process(
    queue: string,
    job: TaskPgJob,
    registry: TaskToolRegistry,
    runner: TaskToolRunner,
    tasks: TasksService,
  ): Promise<void> {
    const { boss } = this.queues;
    const tool = registry.get(job.data.tool);
    if (tool === undefined || tool.options.queue === undefined) {
      // A worker without the tool (another version of the app): it fails the task, not runs it.
      await this.failTask(tasks, queue, job.data.taskId);
      await boss.fail(queue, job.id, {
        message: `No queue-run task tool "${job.data.tool}" in this worker`,
      });
      return;
    }
    const beat = this.heartbeat(queue, job);
    let outcome: JobOutcome;
    try {
      // Taken as the shutdown began: it goes back for another worker.
      if (runner.stopping) {
        outcome = 'stopped';
      } else {
        const run: TaskJob = {
          // pg-boss counts a run's start after the first in `retryCount`.
          run: job.retryCount + 1,
          lastRun: job.retryCount >= job.retryLimit,
          answers: (job.data.answers ?? {}) as Readonly<Record<string, InputResponse>>,
          keepAnswers: (answers) => this.keepAnswers(queue, job, answers),
          parkAfterMs: JOB_PARK_AFTER_MS,
          // The count a park left (see PgBossJobData.parkedAt): this start follows it.
          woken: job.data.parkedAt === job.retryCount,
        };
        outcome = await runner.runJob(tool, job.data, run);
      }
    } finally {
      clearInterval(beat);
    }
    if (outcome === 'settled') await boss.complete(queue, job.id);
    else if (outcome === 'retry') {
      await boss.fail(queue, job.id, {
        message: `Task tool ${tool.name} failed; pg-boss retries it`,
      });
    } else if (outcome === 'stopped') await this.putBack(queue, job);
    else await this.park(queue, job, tool, runner, outcome);
  }

  /**
   * Parks a job whose method left its slot (a long sleep, a wait for input): one UPDATE moves it
   * back to the queue, to start at the park's end. Like `putBack` it spends no retry (the count
   * goes one back, as the next fetch counts the start again), and it marks the job (`parkedAt`)
   * so that the next start is `woken`, with the same run number. The job's `keep_until` is moved
   * to at least the park's end plus the job's retention, the one pg-boss gave it (the tool's
   * `retention*` job option, else its queue's `retentionMinutes`, else the constructor's, else 14
   * days): pg-boss's maintenance deletes a waiting job past its `keep_until`, and a 30-day sleep
   * must outlive it. Then the runner wakes the job at once should its answers (or a cancel) have
   * come meanwhile; and for a park under PARK_TIMER_MAX_MS a timer of this process wakes an idle
   * slot of the queue as it ends, rather than at the next poll.
   */
  private async park(
    queue: string,
    job: TaskPgJob,
    tool: TaskToolDefinition,
    runner: TaskToolRunner,
    park: JobPark,
  ): Promise<void> {
    // The start, by the database's clock, in as long as is left by this process's.
    const leftMs = Math.max(0, park.until - Date.now());
    const { rowCount } = (await this.queues.boss
      .getDb()
      .executeSql(parkSql(this.queues.schema), [
        queue,
        job.id,
        leftMs,
        retentionInterval(toolQueue(tool.options.queue!).jobOptions),
        retentionInterval(this.options.connection),
      ])) as { rowCount?: number | null };
    // No longer active (pg-boss expired it meanwhile): pg-boss runs it again as a restart.
    if ((rowCount ?? 0) === 0) return;
    // A park for input ends with its answer, mostly: no timer is kept for its hour.
    if (park.waitingFor === undefined && leftMs < PARK_TIMER_MAX_MS) {
      const timer = setTimeout(() => {
        this.parks.delete(timer);
        this.wake(queue);
      }, leftMs + PARK_TIMER_SLACK_MS);
      timer.unref();
      this.parks.add(timer);
    }
    await runner.parked(tool, job.data.taskId, park);
  }

  /**
   * Keeps a running job alive: pg-boss 10 has no heartbeat, and fails an active job whose
   * `started_on + expire_in` has passed (at its maintenance). Moving `started_on` forward, a third
   * of `expireInSeconds` at a time, leaves that check to the jobs of workers that died.
   */
  private heartbeat(queue: string, job: TaskPgJob): NodeJS.Timeout {
    // EXTRACT(epoch …) comes back from node-postgres as a numeric string.
    const everyMs = Math.max(500, (Number(job.expireInSeconds) * 1000) / 3);
    const sql =
      `UPDATE ${this.table()} SET started_on = now() ` +
      `WHERE name = $1 AND id = $2 AND state = 'active'`;
    const timer = setInterval(() => {
      this.queues.boss
        .getDb()
        .executeSql(sql, [queue, job.id])
        .catch((error: unknown) => this.queues.error(error));
    }, everyMs);
    timer.unref();
    return timer;
  }

  /** Keeps the answers a run took in the job's data, for a later run. */
  private async keepAnswers(
    queue: string,
    job: TaskPgJob,
    answers: Readonly<Record<string, InputResponse>>,
  ): Promise<void> {
    job.data = { ...job.data, answers };
    await this.queues.boss
      .getDb()
      .executeSql(`UPDATE ${this.table()} SET data = $3::jsonb WHERE name = $1 AND id = $2`, [
        queue,
        job.id,
        JSON.stringify(job.data),
      ]);
  }

  /**
   * Gives a job back without spending a retry: waiting again, PUT_BACK_DELAY_MS from now (by
   * which time this process has stopped fetching, so another worker takes it). Its retry count
   * goes one back, as the next fetch counts the start again.
   */
  private async putBack(queue: string, job: TaskPgJob): Promise<void> {
    await this.queues.boss
      .getDb()
      .executeSql(
        `UPDATE ${this.table()} SET state = 'retry', retry_count = retry_count - 1, ` +
          `start_after = now() + $3 * interval '1 millisecond' ` +
          `WHERE name = $1 AND id = $2 AND state = 'active'`,
        [queue, job.id, PUT_BACK_DELAY_MS],
      );
  }

  /** pg-boss's job table, in its schema. */
  private table(): string {
    return `"${this.queues.schema}".job`;
  }

  /** Fails a task with a generic error, unless it ended already (or is gone). */
  private async failTask(tasks: TasksService, queue: string, taskId: string): Promise<void> {
    try {
      await tasks.fail(taskId, [ProtocolErrorCode.InternalError, INTERNAL_ERROR_MESSAGE]);
    } catch (failure) {
      if (failure instanceof TaskTerminalError || failure instanceof TaskNotFoundError) return;
      this.logger.error(`Queue ${queue}: could not fail a task: ${String(failure)}`);
    }
  }
}
