import type { Logger } from '@nestjs/common';
import { messageOf } from '../errors.js';
import { deliveryMark, isNews, type TaskRecord } from '../task.js';
import {
  changeMessage,
  heartbeatMessage,
  isHeartbeat,
  newOrigin,
  readChange,
  referenceMessage,
} from './change-message.js';
import {
  ChangeSubscriptions,
  RETRY_MS,
  type SubscriptionChannels,
} from './change-subscriptions.js';
import type { FeedWatcher, TaskFeed } from './task-feed.js';

/** What an engine (Redis pub/sub, PostgreSQL LISTEN/NOTIFY) does for RemoteChanges. */
export interface ChangeChannels extends SubscriptionChannels {
  /** The task as stored now (`null` when it is gone), for a change sent as a reference. */
  read(taskId: string): Promise<TaskRecord | null>;
}

/**
 * An instance that hears every task's changes (a task console's stream is open) says so on the
 * engine's control channel this often; the others send every task's changes while they have
 * heard it within HEARERS_TTL_MS.
 */
const HEARTBEAT_MS = 5_000;
const HEARERS_TTL_MS = 3 * HEARTBEAT_MS + 1_000;

/** When the watched tasks are read again after a reconnect's first catch-up. */
const CATCH_UP_AGAIN_MS = [2_000, 10_000];

/** How many watched tasks are read at once after a reconnect. */
const CATCH_UP_READS = 16;

/** What one process has heard from the others (for benchmarks and metrics). */
export interface ReceivedChanges {
  /** Change messages received. */
  messages: number;
  /** Their bytes (UTF-8). */
  bytes: number;
  /** Records read because a change came as a reference. */
  reads: number;
}

/**
 * The part of a notifier for several processes that is the same on every engine. It is the
 * FeedWatcher of this process's feeds, so the process subscribes to the changes of the tasks
 * someone here listens to (a listen stream, a waiter) and no others: an instance that watches
 * nothing receives nothing. Subscriptions change in batches (all the first listeners and last
 * leavers of one turn of the event loop in one engine call, one batch in flight at a time), and a
 * feed's `listen` resolves once its task's subscription is in place, so a listener that reads the
 * task after that misses no change.
 *
 * A change travels as one message (see change-message.ts): the sender's tag, then the record as
 * JSON when it fits in INLINE_CHANGE_BYTES, else `<version> <taskId>`, which the receiver reads
 * from the store (one read per task at a time, again only if a newer version was announced
 * meanwhile). A process skips its own messages (it delivered those at once), and delivers each
 * version of a task once.
 */
export class RemoteChanges implements FeedWatcher {
  /** This process's tag on what it sends. */
  readonly origin = newOrigin();
  readonly received: ReceivedChanges = { messages: 0, bytes: 0, reads: 0 };
  private readonly subscriptions: ChangeSubscriptions;
  private closed = false;
  /**
   * The mark (see deliveryMark) of the last state delivered of each task heard (watched tasks,
   * and others while every task is).
   */
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
    timeoutMs: number,
    private readonly logger: Logger,
    private readonly announce?: (message: string) => Promise<unknown>,
  ) {
    this.subscriptions = new ChangeSubscriptions(
      channels,
      {
        forgotten: (taskId) => this.delivered.delete(taskId),
        everyApplied: (on) => this.beat(on),
        resubscribed: () => this.resubscribed(),
      },
      timeoutMs,
      logger,
    );
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
    return changeMessage(this.origin, record);
  }

  /** The message of a change as a reference, which the receiver reads (see change-message.ts). */
  reference(record: TaskRecord): string {
    return referenceMessage(this.origin, record);
  }

  // ----- what is heard --------------------------------------------------------------------------

  /** A message heard from the engine, on a task's channel or on every task's. */
  hear(message: string): void {
    if (isHeartbeat(message)) {
      if (!message.startsWith(this.origin)) this.hearersUntil = Date.now() + HEARERS_TTL_MS;
      return;
    }
    this.received.messages++;
    this.received.bytes += Buffer.byteLength(message, 'utf8');
    if (message.startsWith(this.origin)) return;
    const change = readChange(message);
    if (change === undefined) return;
    if ('record' in change) {
      this.deliver(change.record);
      return;
    }
    const { taskId, mark } = change;
    if ((this.delivered.get(taskId) ?? 0) >= mark || !this.wants(taskId)) return;
    this.fetch(taskId, mark);
  }

  /** Puts a record heard from elsewhere on every feed, unless that version was delivered. */
  private deliver(record: TaskRecord): void {
    if (!this.wants(record.taskId)) return;
    if (!isNews(record, this.delivered.get(record.taskId))) return;
    this.delivered.set(record.taskId, deliveryMark(record));
    if (this.delivered.size > this.subscriptions.size + 4_096) this.forgetUnwatched();
    for (const feed of this.feeds) feed.publish(record);
  }

  private wants(taskId: string): boolean {
    return this.subscriptions.wants(taskId);
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
        this.logger.warn(`Could not read a changed task: ${messageOf(error)}; trying again`);
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
      if (!this.subscriptions.has(taskId)) this.delivered.delete(taskId);
    }
  }

  // ----- what is watched (FeedWatcher) ----------------------------------------------------------

  watch(taskId: string): Promise<void> {
    return this.subscriptions.watch(taskId);
  }

  unwatch(taskId: string): void {
    this.subscriptions.unwatch(taskId);
  }

  ready(taskId: string): Promise<void> | undefined {
    return this.subscriptions.ready(taskId);
  }

  watchAll(): Promise<void> {
    return this.subscriptions.watchAll();
  }

  unwatchAll(): void {
    this.subscriptions.unwatchAll();
  }

  /** How many tasks this process is subscribed to, or about to be (for leak checks). */
  get watchedTasks(): number {
    return this.subscriptions.size;
  }

  /**
   * The engine's connection was made again and holds no subscription: every watch is subscribed
   * anew (the engines whose client does this by itself, as ioredis does, need not call it).
   */
  resubscribe(): void {
    this.subscriptions.resubscribe();
  }

  /** The subscriptions are back after `resubscribe`: what changed meanwhile is read. */
  private resubscribed(): void {
    this.catchUp();
    // Again a little later: another instance may write a change in the moments after the
    // store came back, while its own notifier connection is still away, and the change it
    // then sends may never come (seen once in a few dozen 60 s Redis outages under load).
    for (const ms of CATCH_UP_AGAIN_MS) {
      setTimeout(() => this.closed || this.catchUp(), ms).unref();
    }
  }

  /**
   * Reads every watched task once the subscriptions are back, and delivers what changed while
   * the connection was down (a few reads at a time): a watcher misses nothing across a reconnect.
   * A version the feeds had from this process may be delivered again, which they allow.
   */
  private catchUp(only?: readonly string[]): void {
    const taskIds = this.subscriptions.listened(only);
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
        `Could not read ${failed.length} watched task(s) after a reconnect: ${messageOf(failure)}; trying again`,
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
      this.announce!(heartbeatMessage(this.origin)).catch((error: unknown) =>
        this.logger.warn(`Could not send a heartbeat: ${messageOf(error)}`),
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
    this.subscriptions.close();
  }
}
