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
 * Resolves with the first state of the task that satisfies `until`: from `waiters` at once (the
 * feed TasksService publishes each write to), or from a periodic re-read (changes written by
 * another process sharing the store, when no notifier brings them). Without periodic re-reads
 * the task is read once more when it expires, so a wait on an expired task ends too.
 * Rejects when the task is gone, or with the signal's reason when it aborts; store faults are
 * retried at the next poll.
 */
export function waitForTask(
  tasks: TasksService,
  waiters: WaiterFeed,
  taskId: string,
  until: (record: TaskRecord) => boolean,
  options: WaitOptions,
): Promise<TaskRecord> {
  return new Promise<TaskRecord>((resolve, reject) => {
    let settled = false;
    let stopExpiry: (() => void) | undefined;
    const finish = (settle: () => void): void => {
      if (settled) return;
      settled = true;
      unsubscribe();
      clearInterval(timer);
      stopExpiry?.();
      options.signal?.removeEventListener('abort', onAbort);
      settle();
    };
    const check = (record: TaskRecord): void => {
      if (until(record)) finish(() => resolve(record));
    };
    const watchExpiry = (record: TaskRecord): void => {
      if (settled || options.pollMs !== null || stopExpiry !== undefined) return;
      const at = expiresAt(record);
      if (at === null) return;
      stopExpiry = waiters.atExpiry(taskId, at, () => {
        stopExpiry = undefined;
        poll();
      });
    };
    const poll = (): void => {
      tasks.status(taskId).then(
        (record) => {
          check(record);
          watchExpiry(record);
        },
        (error: unknown) => {
          // Only a task that is gone ends the wait; a store fault is waited out (the next poll
          // tries again), so an outage does not cancel the work that waits.
          if (error instanceof TaskNotFoundError) finish(() => reject(error));
        },
      );
    };
    const onAbort = (): void => finish(() => reject(options.signal?.reason));

    const unsubscribe = waiters.subscribe(taskId, check);
    const timer = options.pollMs === null ? undefined : setInterval(poll, options.pollMs);
    timer?.unref();
    if (options.signal?.aborted) return onAbort();
    options.signal?.addEventListener('abort', onAbort, { once: true });
    poll();
  });
}
