import { setTimeout as sleep } from 'node:timers/promises';
import { TaskStoreUnreachableError } from '../errors.js';
import { isStoreUnavailable } from '../tasks.writer.js';

/** The first wait before a write is tried again while the store is away, and the longest. */
export const OUTAGE_RETRY_FIRST_MS = 250;
export const OUTAGE_RETRY_MAX_MS = 5_000;

/** The next wait of a backoff: doubled, up to the longest (`jittered` spreads each wait). */
export function backoff(delay: number): number {
  return Math.min(delay * 2, OUTAGE_RETRY_MAX_MS);
}

/** `delay` less up to a quarter, at random: calls that failed together do not retry together. */
export function jittered(delay: number): number {
  return Math.round(delay * (0.75 + Math.random() * 0.25));
}

/**
 * One running call's view of a store outage: when the store first failed one of its writes, and
 * whether the call has given up on it. The call rides an outage out for `windowMs`; the first
 * failure past it gives up, once: `giveUp` gets the error the call stops with (its signal fires
 * with it, and its task fails with it when the store is back).
 */
export class CallOutage {
  private since: number | undefined;
  private gaveUp: TaskStoreUnreachableError | undefined;

  constructor(
    private readonly windowMs: number,
    private readonly giveUp: (error: TaskStoreUnreachableError) => void,
  ) {}

  /** The error the call gave up with, if it did. */
  get givenUp(): TaskStoreUnreachableError | undefined {
    return this.gaveUp;
  }

  /** The store failed a write of the call. False once the call has given up. */
  failed(now = Date.now()): boolean {
    if (this.gaveUp !== undefined) return false;
    this.since ??= now;
    if (now - this.since < this.windowMs) return true;
    this.gaveUp = new TaskStoreUnreachableError(now - this.since);
    this.giveUp(this.gaveUp);
    return false;
  }

  /** The store took a write of the call: the outage, if any, is over. */
  answered(): void {
    this.since = undefined;
  }

  /**
   * Runs `write` and, while the store is away, runs it again with backoff until it is taken or
   * the call gives up (then throws the TaskStoreUnreachableError). Any other error is thrown.
   */
  async retry<T>(write: () => Promise<T>): Promise<T> {
    for (let delay = OUTAGE_RETRY_FIRST_MS; ; delay = backoff(delay)) {
      try {
        const written = await write();
        this.answered();
        return written;
      } catch (error) {
        if (!isStoreUnavailable(error)) throw error;
        if (!this.failed()) throw this.gaveUp!;
      }
      await sleep(jittered(delay), undefined, { ref: false });
    }
  }
}
