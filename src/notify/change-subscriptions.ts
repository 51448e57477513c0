import type { Logger } from '@nestjs/common';
import { messageOf } from '../errors.js';

/** How an engine subscribes (part of RemoteChanges' ChangeChannels). */
export interface SubscriptionChannels {
  /** Starts hearing the changes of `watch` and stops hearing those of `unwatch`, in one go. */
  apply(watch: readonly string[], unwatch: readonly string[]): Promise<void>;
  /** Starts (`true`) or stops hearing the changes of every task. */
  applyAll(on: boolean): Promise<void>;
}

/** How long a failed subscription change waits before it is tried again. */
export const RETRY_MS = 1_000;

/** A promise handed out, and how to settle it. */
interface Waiting {
  readonly promise: Promise<void>;
  settle(): void;
}

/** A task (or every task) this process wants to hear of. */
interface Watch {
  /** How many feeds listen to it (each tells its first listener and its last). */
  refs: number;
  /** Whether the engine is subscribed. */
  active: boolean;
  /** A subscription change in flight. */
  pending: boolean;
  /** The promise `watch` handed out while the subscription is not in place. */
  waiting: Waiting | undefined;
}

const newWatch = (): Watch => ({ refs: 0, active: false, pending: false, waiting: undefined });

/** What ChangeSubscriptions tells its owner (RemoteChanges). */
export interface SubscriptionEvents {
  /** A task's watch is gone (no one listens, and the engine is unsubscribed). */
  forgotten(taskId: string): void;
  /** The engine now hears (`true`) or no longer hears every task's changes. */
  everyApplied(on: boolean): void;
  /** After `resubscribe`, every subscription is back in place. */
  resubscribed(): void;
}

/**
 * The subscriptions of RemoteChanges: which tasks (or every task) this process wants to hear of,
 * and the engine calls that make it so. Changes go in batches (all the first listeners and last
 * leavers of one turn of the event loop in one engine call, one batch in flight at a time); a
 * watch's promise settles once its subscription is in place, or after `timeoutMs`.
 */
export class ChangeSubscriptions {
  private readonly watches = new Map<string, Watch>();
  private readonly every = newWatch();
  private readonly dirty = new Set<string>();
  private everyDirty = false;
  /** Set by `resubscribe`: the owner is told once the subscriptions are back. */
  private catchUpAfterFlush = false;
  private scheduled = false;
  private flushing = false;
  private closed = false;

  constructor(
    private readonly channels: SubscriptionChannels,
    private readonly events: SubscriptionEvents,
    private readonly timeoutMs: number,
    private readonly logger: Logger,
  ) {}

  /** Whether someone here listens to the task (or to every task). */
  wants(taskId: string): boolean {
    return this.every.refs > 0 || (this.watches.get(taskId)?.refs ?? 0) > 0;
  }

  /** Whether the task has a watch (listened to, or about to be unsubscribed). */
  has(taskId: string): boolean {
    return this.watches.has(taskId);
  }

  /** The tasks (of `only`, when given) someone here listens to, every task's listeners aside. */
  listened(only?: readonly string[]): string[] {
    return (only ?? [...this.watches.keys()]).filter(
      (taskId) => (this.watches.get(taskId)?.refs ?? 0) > 0,
    );
  }

  watch(taskId: string): Promise<void> {
    let watch = this.watches.get(taskId);
    if (watch === undefined) this.watches.set(taskId, (watch = newWatch()));
    watch.refs++;
    if (watch.active && !watch.pending) return RESOLVED;
    this.touch(taskId);
    return this.waitOn(watch);
  }

  unwatch(taskId: string): void {
    const watch = this.watches.get(taskId);
    if (watch === undefined || watch.refs === 0) return;
    if (--watch.refs === 0) this.touch(taskId);
  }

  ready(taskId: string): Promise<void> | undefined {
    return this.watches.get(taskId)?.waiting?.promise;
  }

  watchAll(): Promise<void> {
    this.every.refs++;
    if (this.every.active && !this.every.pending) return RESOLVED;
    this.everyDirty = true;
    this.schedule();
    return this.waitOn(this.every);
  }

  unwatchAll(): void {
    if (this.every.refs === 0) return;
    if (--this.every.refs === 0) {
      this.everyDirty = true;
      this.schedule();
    }
  }

  /** How many tasks this process is subscribed to, or about to be. */
  get size(): number {
    return this.watches.size;
  }

  /**
   * The engine's connection was made again and holds no subscription: every watch is subscribed
   * anew (the engines whose client does this by itself, as ioredis does, need not call it).
   */
  resubscribe(): void {
    for (const [taskId, watch] of this.watches) {
      watch.active = false;
      this.dirty.add(taskId);
    }
    this.every.active = false;
    this.everyDirty = this.every.refs > 0;
    this.catchUpAfterFlush = true;
    this.schedule();
  }

  /** Stops changing subscriptions, and releases whoever waits on one. */
  close(): void {
    this.closed = true;
    for (const watch of this.watches.values()) settle(watch);
    settle(this.every);
  }

  private touch(taskId: string): void {
    this.dirty.add(taskId);
    this.schedule();
  }

  /** The promise of a watch's subscription: settled when it is in place, or after timeoutMs. */
  private waitOn(watch: Watch): Promise<void> {
    if (watch.waiting !== undefined) return watch.waiting.promise;
    let settle!: () => void;
    const promise = new Promise<void>((resolve) => (settle = resolve));
    const timer = setTimeout(() => {
      if (watch.waiting?.promise === promise) watch.waiting = undefined;
      settle();
    }, this.timeoutMs);
    timer.unref();
    watch.waiting = {
      promise,
      settle: () => {
        clearTimeout(timer);
        settle();
      },
    };
    return promise;
  }

  private schedule(): void {
    if (this.scheduled || this.flushing || this.closed) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      void this.flush();
    });
  }

  /** Applies what changed, one batch at a time, until nothing is left to change. */
  private async flush(): Promise<void> {
    this.flushing = true;
    try {
      while (!this.closed && (this.dirty.size > 0 || this.everyDirty)) {
        const watch: string[] = [];
        const unwatch: string[] = [];
        for (const taskId of this.dirty) {
          const entry = this.watches.get(taskId);
          if (entry === undefined) continue;
          if (entry.refs > 0 && !entry.active) watch.push(taskId);
          else if (entry.refs === 0 && entry.active) unwatch.push(taskId);
          else if (entry.refs === 0) this.forget(taskId, entry);
          else settle(entry);
        }
        this.dirty.clear();
        let every: boolean | undefined;
        if (this.everyDirty) {
          this.everyDirty = false;
          if (this.every.refs > 0 !== this.every.active) every = this.every.refs > 0;
          else settle(this.every);
        }
        for (const taskId of [...watch, ...unwatch]) this.watches.get(taskId)!.pending = true;
        this.every.pending = every !== undefined;
        try {
          if (watch.length > 0 || unwatch.length > 0) await this.channels.apply(watch, unwatch);
          if (every !== undefined) await this.channels.applyAll(every);
        } catch (error) {
          this.logger.warn(`Could not change subscriptions: ${messageOf(error)}`);
          this.settleAfterFailure(watch, unwatch, every);
          await new Promise((resolve) => setTimeout(resolve, RETRY_MS).unref());
          continue;
        }
        for (const taskId of watch) this.settled(taskId, true);
        for (const taskId of unwatch) this.settled(taskId, false);
        if (every !== undefined) {
          this.every.pending = false;
          this.every.active = every;
          this.events.everyApplied(every);
          if (this.every.refs > 0 !== every) this.everyDirty = true;
          else settle(this.every);
        }
        if (this.catchUpAfterFlush && this.dirty.size === 0) {
          this.catchUpAfterFlush = false;
          this.events.resubscribed();
        }
      }
    } finally {
      this.flushing = false;
    }
  }

  /** A subscription change went through: the watch is as wanted, or is changed once more. */
  private settled(taskId: string, active: boolean): void {
    const entry = this.watches.get(taskId)!;
    entry.pending = false;
    entry.active = active;
    if (entry.refs > 0 === active) {
      if (active) settle(entry);
      else this.forget(taskId, entry);
    } else {
      this.dirty.add(taskId);
    }
  }

  /** A change failed: whoever waits goes on (waiters re-read as a safety net), and it is retried. */
  private settleAfterFailure(
    watch: readonly string[],
    unwatch: readonly string[],
    every: boolean | undefined,
  ): void {
    for (const taskId of [...watch, ...unwatch]) {
      const entry = this.watches.get(taskId)!;
      entry.pending = false;
      settle(entry);
      this.dirty.add(taskId);
    }
    if (every !== undefined) {
      this.every.pending = false;
      settle(this.every);
      this.everyDirty = true;
    }
  }

  private forget(taskId: string, entry: Watch): void {
    settle(entry);
    this.watches.delete(taskId);
    this.events.forgotten(taskId);
  }
}

const RESOLVED = Promise.resolve();

function settle(watch: Watch): void {
  const waiting = watch.waiting;
  watch.waiting = undefined;
  waiting?.settle();
}
