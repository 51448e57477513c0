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
 * Watches a task until `until` holds: `onMatch` gets the first state that satisfies it, heard
 * from `waiters` at once (the feed TasksService publishes each write to) or read by a periodic
 * re-read (changes written by another process sharing the store, when no notifier brings them).
 * Without periodic re-reads the task is read once more when it expires, so a watch on an expired
 * task ends too. `onGone` gets TaskNotFoundError when the task is gone; store faults are retried
 * at the next re-read. Returns an idempotent stop; after it, or after either callback, nothing
 * more is called. No promise, no abort controller: a running call keeps one of these for its
 * whole life.
 */
export function watchTask(
  tasks: TasksService,
  waiters: WaiterFeed,
  taskId: string,
  until: (record: TaskRecord) => boolean,
  pollMs: number | null,
  onMatch: (record: TaskRecord) => void,
  onGone: (error: TaskNotFoundError) => void,
): () => void {
  let stopped = false;
  let stopExpiry: (() => void) | undefined;
  const stop = (): void => {
    if (stopped) return;
    stopped = true;
    unsubscribe();
    clearInterval(timer);
    stopExpiry?.();
  };
  const check = (record: TaskRecord): void => {
    if (stopped || !until(record)) return;
    stop();
    onMatch(record);
  };
  const poll = (): void => {
    tasks.status(taskId).then(
      (record) => {
        check(record);
        if (stopped || pollMs !== null || stopExpiry !== undefined) return;
        const at = expiresAt(record);
        if (at === null) return;
        stopExpiry = waiters.atExpiry(taskId, at, () => {
          stopExpiry = undefined;
          poll();
        });
      },
      (error: unknown) => {
        // Only a task that is gone ends the watch; a store fault is waited out (the next re-read
        // tries again), so an outage does not cancel the work that waits.
        if (stopped || !(error instanceof TaskNotFoundError)) return;
        stop();
        onGone(error);
      },
    );
  };
  const unsubscribe = waiters.subscribe(taskId, check);
  const timer = pollMs === null ? undefined : setInterval(poll, pollMs);
  timer?.unref();
  poll();
  return stop;
}

/**
 * Resolves with the first state of the task that satisfies `until` (see watchTask). Rejects when
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
    const signal = options.signal;
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = (): void => {
      stop();
      reject(signal?.reason);
    };
    const stop = watchTask(
      tasks,
      waiters,
      taskId,
      until,
      options.pollMs,
      (record) => {
        signal?.removeEventListener('abort', onAbort);
        resolve(record);
      },
      (error) => {
        signal?.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
