import {
  type BeforeApplicationShutdown,
  Inject,
  Injectable,
  Logger,
  type OnApplicationBootstrap,
  Optional,
} from '@nestjs/common';
import { ProtocolErrorCode } from '@modelcontextprotocol/server';
import { messageOf, TaskNotFoundError, TaskTerminalError } from '../errors.js';
import { hasLeases, TaskStore, type TaskStoreLeases } from '../store/task-store.js';
import { isParkId, isTerminal } from '../task.js';
import { TASKS_CONFIG } from '../tasks.constants.js';
import type { TasksConfig } from '../interfaces/tasks-module-options.interface.js';
import { TasksService } from '../tasks.service.js';
import { HeldTaskResumer } from './held-task-resumer.js';
import { StoreStartup } from './store-startup.js';

/** What the tasks of an instance that died get. */
export const STOPPED_MESSAGE = 'The server stopped before the task finished';

/** How many tasks of a dead instance are failed at once: a sweep never floods the store. */
const SWEEP_BATCH = 32;

/**
 * After a store fault, how many whole TTLs this instance must reach the store before it judges
 * others: the live ones need time to renew, and their own connections may come back later than
 * this instance's (a pool handing out connections the restart broke, one failure each).
 */
const AFTER_FAULT_TTLS = 2;

/** After a failed renewal, the next one comes this soon (or at the next tick, if sooner). */
const RENEW_RETRY_MS = 1_000;

/**
 * After an answer woke a parked task, the renewal that sweeps it comes this soon: its park's
 * lease, made to run out 1 ms after the answer by the store's clock, has run out by then.
 */
const WAKE_SWEEP_MS = 5;

/**
 * This instance's lease on a store shared with other instances (one with leases: RedisTaskStore
 * and PostgresTaskStore). Every third of the lease's TTL it renews the lease, which also tells it the
 * instances whose lease ran out: those died without shutting down, and the tool calls they were
 * running will never settle their tasks. It fails each task such an instance still holds with
 * -32603 "The server stopped before the task finished", through TasksService (compare-and-set: a
 * task finished meanwhile stays as it is), then forgets the instance. Several instances may sweep
 * one dead instance at once; each write is idempotent. A durable tool's call
 * (`@TaskTool({ durable: true })`) is run again on the sweeping instance instead, from its
 * journal (see HeldTaskResumer); of several sweepers, the first to move the task runs it.
 *
 * A renewal is one store call whatever the number of running tasks: tasks are held by the writes
 * that create and finish them, never by the timer.
 *
 * An instance judges others only once it has reached the store for a whole TTL since it started,
 * and for two since its last store fault (a renewal's or any other call's): a store outage (a
 * restart, a failover that lost the latest lease writes) lets every lease run out at once, and
 * the instances that were alive through it renew theirs within a third of the TTL of the store's
 * return (a failed renewal is tried again within a second). So no instance fails the tasks of
 * one that is alive and was riding the same outage out.
 *
 * At shutdown the timer stops. With `runningTasksOnShutdown: 'leave'` the lease is released, so
 * the tasks this instance leaves are not failed by the others; with `'fail'` it is left to run
 * out, so that a task the runner could not fail (the store away at that moment) is failed by
 * another instance later.
 */
@Injectable()
export class TasksLease implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('TasksLease');
  private timer: ReturnType<typeof setInterval> | undefined;
  private renewing: Promise<void> | undefined;
  private sweeping: Promise<void> | undefined;
  /** The renewal planned sooner than the next tick, after a failed one. */
  private retry: ReturnType<typeof setTimeout> | undefined;
  /** When this instance started renewing, and when a renewal last failed (epoch ms). */
  private startedAt = 0;
  private renewFailedAt = 0;

  constructor(
    private readonly tasks: TasksService,
    @Inject(TaskStore) private readonly store: TaskStore,
    @Inject(TASKS_CONFIG) private readonly config: TasksConfig,
    /** Startup's wait for the store: the lease starts after the store's first answer. */
    @Optional() private readonly startup?: StoreStartup,
    /** Runs a durable call again here instead of failing its task (see HeldTaskResumer). */
    @Optional() private readonly resumer?: HeldTaskResumer,
  ) {}

  /** The lease's TTL, or null when no lease runs (option off, or a store without leases). */
  get ttlMs(): number | null {
    return this.tasks.leased && this.config.lease ? this.config.lease.ttlMs : null;
  }

  /**
   * Renews the lease once before the app serves (a task created next is held by an instance the
   * others know of), then every third of the TTL on an unref'd timer; after the store's first
   * answer (see StoreStartup).
   */
  async onApplicationBootstrap(): Promise<void> {
    const ttlMs = this.ttlMs;
    if (ttlMs === null || this.timer !== undefined) return;
    // Startup reports a store that does not answer (and fails the boot past its bound): a renewal
    // would only say the same without where.
    if (
      this.startup &&
      !(await this.startup.reached().then(
        () => true,
        () => false,
      ))
    )
      return;
    if (this.timer !== undefined) return;
    this.startedAt = Date.now();
    // An answer woke a parked task (its park's lease ran out): sweep at once, not at the next tick.
    this.tasks.whenWoken = () => this.renewSoon(ttlMs, WAKE_SWEEP_MS);
    this.timer = setInterval(() => void this.renew(), Math.ceil(ttlMs / 3));
    this.timer.unref();
    await this.renew();
  }

  async beforeApplicationShutdown(): Promise<void> {
    if (this.timer === undefined) return;
    this.stop();
    await Promise.all([this.renewing, this.sweeping]);
    if (this.config.runningTasksOnShutdown !== 'leave') return;
    try {
      await this.leases.releaseLease(this.tasks.instanceId);
    } catch (error) {
      this.logger.error(`Could not release the lease: ${messageOf(error)}`);
    }
  }

  /**
   * Stops renewing, without releasing the lease: the others fail this instance's held tasks once
   * it runs out, as if the process had died. Shutdown calls it; tests call it to play a crash.
   */
  stop(): void {
    clearInterval(this.timer);
    clearTimeout(this.retry);
    this.timer = undefined;
    this.retry = undefined;
  }

  /**
   * Whether this instance may judge others' leases now: it has reached the store for a whole TTL
   * on end (see the class's comment).
   */
  private mayJudge(ttlMs: number, now: number): boolean {
    const lastFault = Math.max(this.renewFailedAt, this.tasks.lastStoreFaultAt);
    return now - this.startedAt >= ttlMs && now - lastFault >= AFTER_FAULT_TTLS * ttlMs;
  }

  /**
   * One renewal; a tick while one is in flight is skipped. A sweep of dead instances runs beside
   * the renewals, never in their way: a long sweep must not let this instance's own lease run out.
   */
  renew(): Promise<void> {
    this.renewing ??= this.renewOnce().finally(() => {
      this.renewing = undefined;
    });
    return this.renewing;
  }

  /**
   * Plans a renewal within RENEW_RETRY_MS after a failed one (the store may be back by then), or
   * within `ms`.
   */
  private renewSoon(ttlMs: number, ms = RENEW_RETRY_MS): void {
    if (this.timer === undefined || this.retry !== undefined) return;
    this.retry = setTimeout(
      () => {
        this.retry = undefined;
        void this.renew();
      },
      Math.min(ms, Math.ceil(ttlMs / 3)),
    );
    this.retry.unref();
  }

  /** Resolves when the sweep in flight (if any) has finished. */
  settled(): Promise<void> {
    return this.sweeping ?? Promise.resolve();
  }

  private get leases(): TaskStoreLeases {
    if (!hasLeases(this.store)) throw new Error('The task store has no leases');
    return this.store;
  }

  private async renewOnce(): Promise<void> {
    const ttlMs = this.ttlMs;
    if (ttlMs === null) return;
    let expired: string[];
    try {
      expired = await this.leases.renewLease(this.tasks.instanceId, ttlMs);
    } catch (error) {
      if (this.renewFailedAt === 0 || Date.now() - this.renewFailedAt > ttlMs) {
        this.logger.error(`Could not renew the lease: ${messageOf(error)}`);
      }
      this.renewFailedAt = Date.now();
      this.renewSoon(ttlMs);
      return;
    }
    if (expired.length > 0 && this.sweeping === undefined && this.mayJudge(ttlMs, Date.now())) {
      this.sweeping = this.sweep(expired).finally(() => {
        this.sweeping = undefined;
      });
    }
  }

  private async sweep(instances: string[]): Promise<void> {
    for (const instance of instances) {
      if (instance === this.tasks.instanceId) continue;
      try {
        await this.sweepInstance(instance);
      } catch (error) {
        this.logger.error(`Could not sweep a stopped instance: ${messageOf(error)}`);
      }
    }
  }

  /**
   * Fails what a dead instance still holds, then forgets it. Only the tasks that are settled here
   * (failed, or found finished or gone) are dropped from it: one this sweep could not fail stays
   * held, and the next sweep tries it again.
   */
  private async sweepInstance(instance: string): Promise<void> {
    const held = await this.leases.heldTasks(instance);
    const settled: string[] = [];
    for (let i = 0; i < held.length; i += SWEEP_BATCH) {
      const batch = held.slice(i, i + SWEEP_BATCH);
      const outcomes = await Promise.all(batch.map((taskId) => this.failHeld(taskId, instance)));
      batch.forEach((taskId, j) => {
        if (outcomes[j]) settled.push(taskId);
      });
    }
    await this.leases.releaseTasks(instance, settled);
    // A parked task's lease runs out when its sleep ends: it wakes, nothing stopped.
    if (held.length > 0 && !isParkId(instance)) {
      this.logger.warn(
        `An instance stopped with ${held.length} task(s) held; ${settled.length} settled now`,
      );
    }
  }

  /** Fails one task of a dead instance; true when it is settled (failed here or already over). */
  private async failHeld(taskId: string, instance: string): Promise<boolean> {
    try {
      const record = await this.store.get(taskId);
      if (record === null || isTerminal(record.status) || record.heldBy !== instance) return true;
      // A durable call runs again here, from its journal, instead of failing.
      if (record.call !== undefined && (await this.resumer?.resume(record))) return true;
      await this.tasks.fail(taskId, [ProtocolErrorCode.InternalError, STOPPED_MESSAGE], {
        known: record,
      });
      return true;
    } catch (error) {
      if (error instanceof TaskTerminalError || error instanceof TaskNotFoundError) return true;
      this.logger.error(`Could not fail a task of a stopped instance: ${messageOf(error)}`);
      return false;
    }
  }
}
