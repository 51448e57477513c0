import type { Logger } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { TaskNotFoundError } from '../errors.js';
import type { WaiterFeed } from '../notify/waiter-feed.js';
import type { OwnerSlot } from '../owner-slots.js';
import { isCancellationRequested, isParkId, isTerminal, type TaskRecord } from '../task.js';
import type { TasksService } from '../tasks.service.js';
import type { TelemetryRun } from '../telemetry/tasks.telemetry.js';
import { CallOutage } from './store-outage.js';
import { TaskWatch } from './task-watch.js';

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

/**
 * Why a call's signal fires when another instance took its task over (this instance's lease had
 * run out, and a durable call was resumed there): its outcome is dropped, the other run's stands.
 */
class TaskMoved extends Error {
  constructor() {
    super('Another instance took the task over (this instance was thought to have stopped)');
    this.name = 'TaskMoved';
  }
}

/** Why a call's signal fires when its task is cancelled (an AbortError, as `fetch` throws). */
class TaskCancelled extends Error {
  constructor() {
    super('The task was cancelled');
    this.name = 'AbortError';
  }
}

/**
 * One running call: its signal, the promise of its end, and the watch that aborts the signal when
 * the task is cancelled (here or in another process) or gone. The abort controller behind the
 * signal is made when someone first reads the signal (about 800 bytes in Node 20, with a
 * listener): a method that never looks at it costs none.
 */
export class RunningCall extends TaskWatch {
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
  /** Its slot among its owner's running calls in this process (in-process calls), till `release`. */
  slot: OwnerSlot | undefined;

  constructor(
    tasks: TasksService,
    waiters: WaiterFeed,
    taskId: string,
    pollMs: number | null,
    outageMs: number,
  ) {
    super(tasks, waiters, taskId, pollMs);
    this.outage = new CallOutage(outageMs, (error) => this.abort(error));
    this.begin();
  }

  /** Starts the watch as the call starts (JobCall reads first and listens later). */
  protected begin(): void {
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

  protected override get watchesExpiry(): boolean {
    return this.ends !== undefined;
  }

  /** Gives back the call's slot among its owner's running calls, once its method has ended. */
  release(): void {
    this.slot?.release();
    this.slot = undefined;
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

  /** Whether the call stopped because another instance took its task over. */
  get movedTask(): boolean {
    return this.abortedWith?.reason instanceof TaskMoved;
  }

  protected matches(task: TaskRecord): boolean {
    return isCancellationRequested(task) || isTerminal(task.status) || this.moved(task);
  }

  protected matched(task: TaskRecord): void {
    if (isCancellationRequested(task)) this.abort(new TaskCancelled());
    else if (this.moved(task)) this.abort(new TaskMoved());
  }

  /**
   * Whether another instance holds the task now (a durable call resumed there). A task this call
   * parked (see TasksService.park) is not another instance's: the call is leaving anyway.
   */
  private moved(task: TaskRecord): boolean {
    const holder = task.heldBy;
    return holder !== undefined && holder !== this.tasks.instanceId && !isParkId(holder);
  }

  protected gone(): void {
    this.stop();
    this.abort(new TaskGone());
  }
}

/**
 * The running call of a queue job. Its first read of the task, made before it listens, is the
 * job's look at the task before the method runs (a task cancelled or ended meanwhile is not run).
 * It listens to the task only once the method has run for a turn of the event loop
 * (`listenSoon`): most jobs' methods return within it, and a subscription per job (a SUBSCRIBE, an
 * UNSUBSCRIBE and the job's own completion heard back, on the notifier's connection) would cost
 * them more than their own work. A method that runs on listens as a running call does, and reads
 * the task again once it listens, so a cancel written after the first read still fires its
 * signal. A cancel written while a short method ran loses nothing either: the method's outcome is
 * a compare-and-set on the version first read, which the cancel's write has moved on.
 */
export class JobCall extends RunningCall {
  private settleFirst: ((outcome: TaskRecord | Error) => void) | undefined;
  /** The task as first read, or the error of that read. */
  readonly first = new Promise<TaskRecord | Error>((resolve) => (this.settleFirst = resolve));

  protected override begin(): void {
    this.readOnce();
  }

  /**
   * Listens to the task after this turn of the event loop, if the call still runs then and
   * `running()` (the method has not returned) says so.
   */
  listenSoon(running: () => boolean): void {
    setImmediate(() => {
      if (!this.isStopped && running()) this.watch();
    });
  }

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

/**
 * Waits for the running calls to end, up to `drainMs` (the drain of a graceful shutdown), logging
 * how it went. A call that starts meanwhile joins the ones waited for.
 */
export async function drainCalls(
  running: ReadonlyMap<string, RunningCall>,
  drainMs: number,
  logger: Logger,
): Promise<void> {
  const started = Date.now();
  logger.log(
    `Shutting down: ${running.size} running tool call(s) get up to ${drainMs} ms to finish`,
  );
  const over = new AbortController();
  let timeUp = false;
  const timer = sleep(drainMs, undefined, { signal: over.signal }).then(
    () => (timeUp = true),
    () => undefined,
  );
  // A call that was starting as the drain began joins the running ones: wait for it too.
  while (running.size > 0 && !timeUp) {
    await Promise.race([Promise.all([...running.values()].map((call) => call.done)), timer]);
  }
  over.abort();
  const left = running.size;
  const took = Date.now() - started;
  if (left === 0) logger.log(`Drained: every running tool call finished in ${took} ms`);
  else logger.warn(`${left} tool call(s) still running after ${took} ms: handing over`);
}
