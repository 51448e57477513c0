import { Injectable } from '@nestjs/common';
import { ExpiryHeap } from '../store/expiry-heap.js';
import { TaskFeed } from './task-feed.js';

/** The longest delay `setTimeout` takes (2^31 − 1 ms); a longer one fires after 1 ms. */
const LONGEST_TIMER_MS = 2_147_483_647;

/**
 * The feed of this process's waiters: TasksService publishes every record it writes here, and
 * the code that waits on a task in this process hears it at once (waitForTask: a tool awaiting
 * input, a running call's cancellation watch, an inline call awaiting its end). A notifier for
 * several processes also publishes here what other processes wrote.
 *
 * An expiry is no write, so nothing publishes it: waiters that read the store only on a change
 * ask to be called when their task expires (`atExpiry`), all of them on one timer.
 */
@Injectable()
export class WaiterFeed extends TaskFeed {
  private readonly deadlines = new ExpiryHeap();
  /** The expiry listeners of each task: the function itself while there is one, else a set. */
  private readonly atExpiryOf = new Map<string, (() => void) | Set<() => void>>();
  /** Heap entries whose task has no expiry listener left: compacted when they pile up. */
  private stale = 0;
  private timer: NodeJS.Timeout | undefined;
  private timerAt = Infinity;

  /** Calls `callback` once task `taskId` is past `at`, unless `cancelExpiry` comes first. */
  atExpiry(taskId: string, at: number, callback: () => void): void {
    const callbacks = this.atExpiryOf.get(taskId);
    if (callbacks === undefined) {
      this.atExpiryOf.set(taskId, callback);
      this.deadlines.push(at, taskId);
    } else if (typeof callbacks === 'function') {
      this.atExpiryOf.set(taskId, new Set([callbacks, callback]));
    } else {
      callbacks.add(callback);
    }
    this.schedule();
  }

  /** `callback` is not called for the task's expiry after all; harmless when it is not waiting. */
  cancelExpiry(taskId: string, callback: () => void): void {
    const current = this.atExpiryOf.get(taskId);
    if (current === undefined) return;
    if (current !== callback) {
      if (typeof current === 'function' || !current.delete(callback) || current.size > 0) return;
    }
    this.atExpiryOf.delete(taskId);
    if (this.atExpiryOf.size === 0) return this.reset();
    if (++this.stale >= 1024 && this.stale * 2 >= this.deadlines.size) {
      this.deadlines.compact((_, id) => this.atExpiryOf.has(id));
      this.stale = 0;
    }
  }

  /** How many tasks have expiry listeners (for leak checks). */
  get expiryWatches(): number {
    return this.atExpiryOf.size;
  }

  /** No listener left: no entry and no timer either. */
  private reset(): void {
    this.deadlines.clear();
    this.stale = 0;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.timerAt = Infinity;
  }

  private schedule(): void {
    const next = this.deadlines.peekDeadline();
    if (next >= this.timerAt) return;
    clearTimeout(this.timer);
    this.timerAt = next;
    // A timer longer than Node's longest (about 24.8 days: a TTL with `maxTtlMs: null`) would fire
    // at once; it fires at the longest instead, and is set again for the rest.
    const delay = Math.min(Math.max(0, next - Date.now()) + 1, LONGEST_TIMER_MS);
    this.timer = setTimeout(() => this.fire(), delay);
    this.timer.unref();
  }

  private fire(): void {
    this.timer = undefined;
    this.timerAt = Infinity;
    const now = Date.now();
    while (this.deadlines.size > 0 && this.deadlines.peekDeadline() < now) {
      const taskId = this.deadlines.pop();
      const callbacks = this.atExpiryOf.get(taskId);
      if (callbacks === undefined) {
        if (this.stale > 0) this.stale--;
        continue;
      }
      this.atExpiryOf.delete(taskId);
      for (const callback of typeof callbacks === 'function' ? [callbacks] : callbacks) {
        try {
          callback();
        } catch {
          // One faulty waiter must not keep the others from hearing of the expiry.
        }
      }
    }
    this.schedule();
  }
}
