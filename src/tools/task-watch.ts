import { TaskNotFoundError } from '../errors.js';
import { expiresAt, type TaskRecord } from '../task.js';
import type { WaiterFeed } from '../notify/waiter-feed.js';
import type { TasksService } from '../tasks.service.js';

export interface WaitOptions {
  /**
   * Re-read the task this often, for changes the feed may not carry (TasksService.rereadMs);
   * `null`: never (every change reaches the feed), save once when the task expires.
   */
  pollMs: number | null;
  signal?: AbortSignal;
}

/**
 * Watches a task until `matches` holds: `matched` gets the first state that satisfies it, heard
 * from `waiters` at once (the feed TasksService publishes each write to) or read by a periodic
 * re-read (changes written by another process sharing the store, when no notifier brings them).
 * Without periodic re-reads the task is read once more when it expires, so a watch on an expired
 * task ends too. `gone` gets TaskNotFoundError when the task is gone; store faults are retried
 * at the next re-read. After `stop()`, `matched` or `gone`, nothing more is called.
 *
 * A running call keeps one of these for its whole life, so it is one object: the feed and the
 * expiry timer hold its two bound methods, and no promise, closure or abort controller is kept.
 */
export abstract class TaskWatch {
  private stopped = false;
  private timer: NodeJS.Timeout | undefined;
  /** Set while the watch waits for its task's expiry (no periodic re-read). */
  private expiry: (() => void) | undefined;
  private readonly heard: (record: TaskRecord) => void = this.check.bind(this);
  /** The newest state of the task this watch has seen (heard or read). */
  latest: TaskRecord | undefined;

  constructor(
    protected readonly tasks: TasksService,
    protected readonly waiters: WaiterFeed,
    readonly taskId: string,
    private readonly pollMs: number | null,
  ) {}

  /** Whether this state of the task ends the watch. */
  protected abstract matches(record: TaskRecord): boolean;
  /** The first state that matched. */
  protected abstract matched(record: TaskRecord): void;
  /** The task is gone. */
  protected abstract gone(error: TaskNotFoundError): void;

  /**
   * Whether the subclass watches the task's expiry itself (a running call stops at it without a
   * read): the watch then registers no expiry of its own beside it.
   */
  protected get watchesExpiry(): boolean {
    return false;
  }

  /** Each read of the task ends here, with the record or the error (after `check`). */
  protected read(_outcome: TaskRecord | unknown): void {}

  /**
   * Starts watching: listens to the feed, re-reads as `pollMs` says, and reads the task once:
   * when a notifier brings other processes' changes to the feed, once it does (so no change falls
   * between the read and the first one heard).
   */
  protected watch(): void {
    const hearing = this.waiters.listen(this.taskId, this.heard);
    if (this.pollMs !== null) {
      this.timer = setInterval(() => this.poll(), this.pollMs);
      this.timer.unref();
    }
    if (hearing === undefined) this.poll();
    else void hearing.then(() => this.stopped || this.poll());
  }

  /**
   * Reads the task once, without listening: a queue job's first look, before its method starts
   * (JobCall, which listens only if the method runs on).
   */
  protected readOnce(): void {
    this.poll();
  }

  /** Whether `stop()` was called (or the watch ended). */
  protected get isStopped(): boolean {
    return this.stopped;
  }

  /** Stops the watch; idempotent. */
  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    this.waiters.unlisten(this.taskId, this.heard);
    clearInterval(this.timer);
    if (this.expiry !== undefined) this.waiters.cancelExpiry(this.taskId, this.expiry);
  }

  /** Keeps `record` as the newest state seen, unless a newer one was. */
  saw(record: TaskRecord): void {
    if (this.latest === undefined || record.version > this.latest.version) this.latest = record;
  }

  private check(record: TaskRecord): void {
    if (this.stopped) return;
    this.saw(record);
    if (!this.matches(record)) return;
    this.stop();
    this.matched(record);
  }

  private expired(): void {
    this.expiry = undefined;
    this.poll();
  }

  private poll(): void {
    this.tasks.status(this.taskId).then(
      (record) => {
        this.check(record);
        this.read(record);
        if (this.stopped || this.pollMs !== null || this.expiry !== undefined) return;
        if (this.watchesExpiry) return;
        const at = expiresAt(record);
        if (at === null) return;
        this.expiry = this.expired.bind(this);
        this.waiters.atExpiry(this.taskId, at, this.expiry);
      },
      (error: unknown) => {
        this.read(error);
        // Only a task that is gone ends the watch; a store fault is waited out (the next re-read
        // tries again), so an outage does not cancel the work that waits.
        if (this.stopped || !(error instanceof TaskNotFoundError)) return;
        this.stop();
        this.gone(error);
      },
    );
  }
}

/** A TaskWatch whose outcome is a promise, which the signal, when it aborts, rejects. */
class TaskWaiter extends TaskWatch {
  private readonly aborted: () => void = this.abort.bind(this);

  constructor(
    tasks: TasksService,
    waiters: WaiterFeed,
    taskId: string,
    private readonly until: (record: TaskRecord) => boolean,
    options: WaitOptions,
    private readonly resolve: (record: TaskRecord) => void,
    private readonly reject: (reason: unknown) => void,
    private readonly signal = options.signal,
  ) {
    super(tasks, waiters, taskId, options.pollMs);
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    this.watch();
    signal?.addEventListener('abort', this.aborted, { once: true });
  }

  private abort(): void {
    this.stop();
    this.reject(this.signal?.reason);
  }

  protected matches(record: TaskRecord): boolean {
    return this.until(record);
  }

  protected matched(record: TaskRecord): void {
    this.signal?.removeEventListener('abort', this.aborted);
    this.resolve(record);
  }

  protected gone(error: TaskNotFoundError): void {
    this.signal?.removeEventListener('abort', this.aborted);
    this.reject(error);
  }
}

/**
 * Resolves with the first state of the task that satisfies `until` (see TaskWatch). Rejects when
 * the task is gone, or with the signal's reason when it aborts.
 */
export function waitForTask(
  tasks: TasksService,
  waiters: WaiterFeed,
  taskId: string,
  until: (record: TaskRecord) => boolean,
  options: WaitOptions,
): Promise<TaskRecord> {
  return new Promise<TaskRecord>((resolve, reject) => {
    new TaskWaiter(tasks, waiters, taskId, until, options, resolve, reject);
  });
}
