import { randomBytes } from 'node:crypto';
import type { Logger } from '@nestjs/common';
import { deliveryMark, isNews, isTerminal, type TaskRecord } from '../task.js';
import type { FeedWatcher, TaskFeed } from './task-feed.js';

/** What an engine (Redis pub/sub, PostgreSQL LISTEN/NOTIFY) does for RemoteChanges. */
export interface ChangeChannels {
  /** Starts hearing the changes of `watch` and stops hearing those of `unwatch`, in one go. */
  apply(watch: readonly string[], unwatch: readonly string[]): Promise<void>;
  /** Starts (`true`) or stops hearing the changes of every task. */
  applyAll(on: boolean): Promise<void>;
  /** The task as stored now (`null` when it is gone), for a change sent as a reference. */
  read(taskId: string): Promise<TaskRecord | null>;
}

/**
 * The most bytes of a change message that carries the record itself. PostgreSQL takes NOTIFY
 * payloads of up to 8,000 bytes; the same bound serves Redis: a larger record is sent as its id
 * and version, and each process that hears it reads the record once, however many of its
 * listeners wait on the task.
 */
export const INLINE_CHANGE_BYTES = 7_900;

/** How long a failed subscription change waits before it is tried again. */
const RETRY_MS = 1_000;

/**
 * An instance that hears every task's changes (a task console's stream is open) says so on the
 * engine's control channel this often; the others send every task's changes while they have
 * heard it within HEARERS_TTL_MS.
 */
const HEARTBEAT_MS = 5_000;
const HEARERS_TTL_MS = 3 * HEARTBEAT_MS + 1_000;

/** The body of a heartbeat message. */
const HEARTBEAT = '!every';

/** When the watched tasks are read again after a reconnect's first catch-up. */
const CATCH_UP_AGAIN_MS = [2_000, 10_000];

/** How many watched tasks are read at once after a reconnect. */
const CATCH_UP_READS = 16;

/** The length of a sender's tag at the head of each message. */
const ORIGIN_LENGTH = 12;

/** What one process has heard from the others (for benchmarks and metrics). */
export interface ReceivedChanges {
  /** Change messages received. */
  messages: number;
  /** Their bytes (UTF-8). */
  bytes: number;
  /** Records read because a change came as a reference. */
  reads: number;
}

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

/**
 * The part of a notifier for several processes that is the same on every engine. It is the
 * FeedWatcher of this process's feeds, so the process subscribes to the changes of the tasks
 * someone here listens to (a listen stream, a waiter) and no others: an instance that watches
 * nothing receives nothing. Subscriptions change in batches (all the first listeners and last
 * leavers of one turn of the event loop in one engine call, one batch in flight at a time), and a
 * feed's `listen` resolves once its task's subscription is in place, so a listener that reads the
 * task after that misses no change.
 *
 * A change travels as one message: the sender's tag, then the record as JSON when it fits in
 * INLINE_CHANGE_BYTES, else `<version> <taskId>`, which the receiver reads from the store (one
 * read per task at a time, again only if a newer version was announced meanwhile). A process
 * skips its own messages (it delivered those at once), and delivers each version of a task once.
 */
export class RemoteChanges implements FeedWatcher {
  /** This process's tag on what it sends. */
  readonly origin = randomBytes(9).toString('base64url');
  readonly received: ReceivedChanges = { messages: 0, bytes: 0, reads: 0 };
  private readonly watches = new Map<string, Watch>();
  private readonly every = newWatch();
  private readonly dirty = new Set<string>();
  private everyDirty = false;
  /** Set by `resubscribe`: the watched tasks are read once the subscriptions are back. */
  private catchUpAfterFlush = false;
  private scheduled = false;
  private flushing = false;
  private closed = false;
  /** The mark (see deliveryMark) of the last state delivered of each task heard (watched tasks, and others while `every`). */
  private readonly delivered = new Map<string, number>();
  /** The tasks being read after a reference, with the newest version announced meanwhile. */
  private readonly reading = new Map<string, number>();

  /** Until when some other instance hears every task's changes (see `announcing`). */
  private hearersUntil = 0;
  private heartbeat: NodeJS.Timeout | undefined;

  /**
   * `announce` is for engines where hearing every task's changes takes a message of its own per
   * change (a Redis Cluster's sharded channels have no patterns; PostgreSQL has none): it sends a
   * heartbeat on the engine's control channel, which every instance hears (and passes to `hear`),
   * so that a sender adds that message only while someone wants it.
   */
  constructor(
    private readonly channels: ChangeChannels,
    private readonly feeds: readonly TaskFeed[],
    private readonly timeoutMs: number,
    private readonly logger: Logger,
    private readonly announce?: (message: string) => Promise<unknown>,
  ) {
    for (const feed of feeds) feed.connect(this);
  }

  /**
   * Whether a change must also go out for the instances that hear every task: while one of them
   * has said so within HEARERS_TTL_MS (a console's stream opened elsewhere is heard of at once;
   * one that closed stops costing anything a few heartbeats later).
   */
  get announcing(): boolean {
    return this.hearersUntil > Date.now();
  }

  // ----- what is sent ---------------------------------------------------------------------------

  /** The message of a change: the record itself when it fits, else where to read it. */
  encode(record: TaskRecord): string {
    // What the record keeps from clients and tools bounds its size from below: past the bound,
    // the record is not serialized at all.
    if ((record.bytes ?? 0) < INLINE_CHANGE_BYTES) {
      const message = `${this.origin}${JSON.stringify(record)}`;
      if (Buffer.byteLength(message, 'utf8') <= INLINE_CHANGE_BYTES) return message;
    }
    return this.reference(record);
  }

  /**
   * The message of a change as a reference, `<version> <taskId>`, the version prefixed with `t`
   * for a terminal state: the receiver reads the record, and a terminal state is news to it
   * whatever the versions it heard before (see deliveryMark).
   */
  reference(record: TaskRecord): string {
    const terminal = isTerminal(record.status) ? 't' : '';
    return `${this.origin}${terminal}${record.version} ${record.taskId}`;
  }

  // ----- what is heard --------------------------------------------------------------------------

  /** A message heard from the engine, on a task's channel or on every task's. */
  hear(message: string): void {
    const body = message.slice(ORIGIN_LENGTH);
    if (body === HEARTBEAT) {
      if (!message.startsWith(this.origin)) this.hearersUntil = Date.now() + HEARERS_TTL_MS;
      return;
    }
    this.received.messages++;
    this.received.bytes += Buffer.byteLength(message, 'utf8');
    if (message.startsWith(this.origin)) return;
    if (body.startsWith('{')) {
      let record: TaskRecord;
      try {
        record = JSON.parse(body) as TaskRecord;
      } catch {
        return;
      }
      if (typeof record?.taskId === 'string') this.deliver(record);
      return;
    }
    const space = body.indexOf(' ');
    const terminal = body.startsWith('t');
    const version = Number(body.slice(terminal ? 1 : 0, space));
    const taskId = body.slice(space + 1);
    if (space < 1 || !Number.isSafeInteger(version) || taskId === '') return;
    const mark = terminal ? Number.POSITIVE_INFINITY : version;
    if ((this.delivered.get(taskId) ?? 0) >= mark || !this.wants(taskId)) return;
    this.fetch(taskId, mark);
  }

  /** Puts a record heard from elsewhere on every feed, unless that version was delivered. */
  private deliver(record: TaskRecord): void {
    if (!this.wants(record.taskId)) return;
    if (!isNews(record, this.delivered.get(record.taskId))) return;
    this.delivered.set(record.taskId, deliveryMark(record));
    if (this.delivered.size > this.watches.size + 4_096) this.forgetUnwatched();
    for (const feed of this.feeds) feed.publish(record);
  }

  private wants(taskId: string): boolean {
    return this.every.refs > 0 || (this.watches.get(taskId)?.refs ?? 0) > 0;
  }

  /**
   * Reads a task announced by reference: one read at a time per task. `version` is the announced
   * state's delivery mark (Infinity for a terminal state).
   */
  private fetch(taskId: string, version: number): void {
    const wanted = this.reading.get(taskId);
    if (wanted !== undefined) {
      if (version > wanted) this.reading.set(taskId, version);
      return;
    }
    this.reading.set(taskId, version);
    this.received.reads++;
    this.channels.read(taskId).then(
      (record) => {
        const newest = this.reading.get(taskId) ?? version;
        this.reading.delete(taskId);
        if (record === null) return;
        this.deliver(record);
        // A newer change was announced while the read was under way, and the read came before it.
        // (Only then: a store that lost the announced write would otherwise be read forever.)
        if (newest > version && deliveryMark(record) < newest) this.fetch(taskId, newest);
      },
      (error: unknown) => {
        const newest = this.reading.get(taskId) ?? version;
        this.reading.delete(taskId);
        // The store is away for a moment (it has just come back, say): read again in a while,
        // while someone here still wants the task, or its listeners would miss this change.
        this.logger.warn(`Could not read a changed task: ${describe(error)}; trying again`);
        this.later(() => {
          if (this.wants(taskId) && (this.delivered.get(taskId) ?? 0) < newest) {
            this.fetch(taskId, newest);
          }
        });
      },
    );
  }

  /** Runs `retry` after RETRY_MS, unless closed by then. */
  private later(retry: () => void): void {
    setTimeout(() => {
      if (!this.closed) retry();
    }, RETRY_MS).unref();
  }

  /** Keeps the delivered versions of watched tasks only (every-task hearing adds the others). */
  private forgetUnwatched(): void {
    for (const taskId of this.delivered.keys()) {
      if (!this.watches.has(taskId)) this.delivered.delete(taskId);
    }
  }

  // ----- what is watched (FeedWatcher) ----------------------------------------------------------

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

  /** How many tasks this process is subscribed to, or about to be (for leak checks). */
  get watchedTasks(): number {
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

  /**
   * Reads every watched task once the subscriptions are back, and delivers what changed while
   * the connection was down (a few reads at a time): a watcher misses nothing across a reconnect.
   * A version the feeds had from this process may be delivered again, which they allow.
   */
  private catchUp(only?: readonly string[]): void {
    const taskIds = (only ?? [...this.watches.keys()]).filter(
      (taskId) => (this.watches.get(taskId)?.refs ?? 0) > 0,
    );
    const failed: string[] = [];
    let failure: unknown;
    let next = 0;
    const reader = async (): Promise<void> => {
      while (next < taskIds.length && !this.closed) {
        const taskId = taskIds[next++]!;
        try {
          const record = await this.channels.read(taskId);
          if (record !== null) this.deliver(record);
        } catch (error) {
          failed.push(taskId);
          failure = error;
        }
      }
    };
    const readers = Array.from({ length: Math.min(CATCH_UP_READS, taskIds.length) }, reader);
    void Promise.all(readers).then(() => {
      if (failed.length === 0 || this.closed) return;
      // Read again in a while (the store has just come back, say): a watcher misses nothing.
      this.logger.warn(
        `Could not read ${failed.length} watched task(s) after a reconnect: ${describe(failure)}; trying again`,
      );
      this.later(() => this.catchUp(failed));
    });
  }

  /** Starts (once subscribed to every task's changes) or stops the heartbeat (see `announce`). */
  private beat(on: boolean): void {
    clearInterval(this.heartbeat);
    this.heartbeat = undefined;
    if (!on || this.announce === undefined) return;
    const send = (): void => {
      this.announce!(`${this.origin}${HEARTBEAT}`).catch((error: unknown) =>
        this.logger.warn(`Could not send a heartbeat: ${describe(error)}`),
      );
    };
    send();
    this.heartbeat = setInterval(send, HEARTBEAT_MS);
    this.heartbeat.unref();
  }

  /** Stops changing subscriptions, and releases whoever waits on one. */
  close(): void {
    this.closed = true;
    this.beat(false);
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
          this.logger.warn(`Could not change subscriptions: ${describe(error)}`);
          this.settleAfterFailure(watch, unwatch, every);
          await new Promise((resolve) => setTimeout(resolve, RETRY_MS).unref());
          continue;
        }
        for (const taskId of watch) this.settled(taskId, true);
        for (const taskId of unwatch) this.settled(taskId, false);
        if (every !== undefined) {
          this.every.pending = false;
          this.every.active = every;
          this.beat(every);
          if (this.every.refs > 0 !== every) this.everyDirty = true;
          else settle(this.every);
        }
        if (this.catchUpAfterFlush && this.dirty.size === 0) {
          this.catchUpAfterFlush = false;
          this.catchUp();
          // Again a little later: another instance may write a change in the moments after the
          // store came back, while its own notifier connection is still away, and the change it
          // then sends may never come (seen once in a few dozen 60 s Redis outages under load).
          for (const ms of CATCH_UP_AGAIN_MS) {
            setTimeout(() => this.closed || this.catchUp(), ms).unref();
          }
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
    this.delivered.delete(taskId);
  }
}

const RESOLVED = Promise.resolve();

function settle(watch: Watch): void {
  const waiting = watch.waiting;
  watch.waiting = undefined;
  waiting?.settle();
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
