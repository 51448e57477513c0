import { Logger, type OnApplicationShutdown } from '@nestjs/common';
import type { Cluster, Redis } from 'ioredis';
import type { ListenFeed } from '../notify/listen-feed.js';
import { type ReceivedChanges, RemoteChanges } from '../notify/remote-changes.js';
import type { TaskNotifier } from '../notify/task-notifier.js';
import type { WaiterFeed } from '../notify/waiter-feed.js';
import type { PartProvider } from '../interfaces/tasks-module-options.interface.js';
import type { TaskStore } from '../store/task-store.js';
import type { TaskRecord } from '../task.js';
import { notifierProvider } from '../notifier.provider.js';
import { connect, redisFault, release, watchErrors, withTimeout } from './redis-connection.js';
import type { RedisClient, RedisConnectionOptions } from './redis-connection.js';
import { RedisTaskStore } from './redis.task-store.js';

/**
 * The notifier for several instances: each change is published on its task's channel,
 * `{prefix}changes:<taskId>`, and each instance subscribes to the channels of the tasks someone on
 * it waits on or listens to (RemoteChanges keeps the list): an instance that watches nothing
 * receives nothing. A change is put on this instance's own listen streams at once; what it hears
 * from the others goes on its feeds: the ListenFeed, where its ListenHandler delivers to the
 * streams watching the task (checking ownership there), and the WaiterFeed of the code waiting
 * on the task in this process. A record larger than a message carries (INLINE_CHANGE_BYTES) is
 * sent as its id and version, and read from the store by who hears it. While someone wants every
 * task's changes (the task console's live stream), the instance also subscribes to the pattern
 * `{prefix}changes:*`.
 *
 * On a Redis Cluster the task channels are sharded (SPUBLISH, SSUBSCRIBE): a change goes to the
 * node holding the task, and from there to the instances subscribed on that node only, in the
 * order it was written (a plain PUBLISH is relayed to every node, by paths that may reorder
 * messages). Sharded channels have no patterns: while some instance wants every task's changes
 * (it says so every 5 s on `{prefix}hearers`, which every instance subscribes to), each change is
 * also announced, as a reference, on `{prefix}changes`, which every node relays and only those
 * instances subscribe to.
 */
export class RedisTaskNotifier implements TaskNotifier, OnApplicationShutdown {
  private readonly logger = new Logger('RedisTaskNotifier');
  private readonly publisher: RedisClient;
  private readonly subscriber: RedisClient;
  private readonly owned: boolean;
  private readonly prefix: string;
  /** Whether this is a Redis Cluster, where task channels are sharded. */
  private readonly sharded: boolean;
  private readonly everyChannel: string;
  /** Where the instances that want every task's changes say so (on a Cluster). */
  private readonly controlChannel: string;
  private readonly pattern: string;
  private readonly timeoutMs: number;
  private readonly changes: RemoteChanges;
  /** Resolves once both connections are up. */
  readonly ready: Promise<void>;
  /** What other instances write reaches this process's waiters (when it was given the feed). */
  readonly deliversRemoteChanges: boolean;

  /**
   * `store` reads the records sent by reference (the module's store, given by `redisNotifier`);
   * without it, a RedisTaskStore on this notifier's own connection reads them.
   */
  constructor(
    options: RedisConnectionOptions,
    private readonly listenFeed: ListenFeed,
    waiters?: WaiterFeed,
    store?: Pick<TaskStore, 'get'>,
  ) {
    ({
      client: this.publisher,
      owned: this.owned,
      prefix: this.prefix,
      timeoutMs: this.timeoutMs,
    } = connect(options, 'RedisTaskNotifier'));
    this.deliversRemoteChanges = waiters !== undefined;
    this.sharded = this.publisher.isCluster;
    // On a Redis Cluster, the subscriber holds one connection per master for sharded pub/sub.
    this.subscriber = this.sharded
      ? (this.publisher as Cluster).duplicate(undefined, { shardedSubscribers: true })
      : (this.publisher as Redis).duplicate();
    watchErrors(this.subscriber);
    this.everyChannel = `${this.prefix}changes`;
    this.controlChannel = `${this.prefix}hearers`;
    this.pattern = `${this.prefix.replace(/[*?[\]\\]/g, '\\$&')}changes:*`;
    let reader = store;
    this.subscriber.on('message', (_channel: string, message: string) => {
      this.changes.hear(message);
    });
    this.subscriber.on('smessage', (_channel: string, message: string) => {
      this.changes.hear(message);
    });
    this.subscriber.on('pmessage', (_pattern: string, _channel: string, message: string) => {
      this.changes.hear(message);
    });
    this.changes = new RemoteChanges(
      {
        apply: (watch, unwatch) =>
          this.subscribing(withTimeout(this.apply(watch, unwatch), this.timeoutMs)),
        applyAll: (on) => this.subscribing(withTimeout(this.applyAll(on), this.timeoutMs)),
        read: (taskId) =>
          (reader ??= new RedisTaskStore({ client: this.publisher, prefix: this.prefix })).get(
            taskId,
          ),
      },
      waiters === undefined ? [listenFeed] : [listenFeed, waiters],
      this.timeoutMs,
      this.logger,
      this.sharded ? (message) => this.publisher.publish(this.controlChannel, message) : undefined,
    );
    // On a Cluster every instance hears the heartbeats of those that want every task's changes.
    if (this.sharded) {
      this.subscriber.subscribe(this.controlChannel).catch((error: unknown) => {
        const fault = redisFault(this.subscriber, 'RedisTaskNotifier', error);
        this.logger.error(`Could not subscribe to ${this.controlChannel}: ${fault.message}`);
      });
    }
    this.ready = Promise.all([readyOf(this.publisher), readyOf(this.subscriber)]).then(
      () => undefined,
    );
    // After a reconnect, ioredis subscribes again by itself; the notifier does too, so it knows
    // when the subscriptions are back, and then reads what changed while they were not.
    let connections = 0;
    this.subscriber.on('ready', () => {
      if (connections++ > 0) this.changes.resubscribe();
    });
  }

  /**
   * Whether the subscriber is connected (ioredis subscribes again after a reconnect). While it is
   * not, this instance hears no change written elsewhere.
   */
  get subscribed(): boolean {
    return this.subscriber.status === 'ready';
  }

  /** What this instance has heard from the others. */
  get received(): Readonly<ReceivedChanges> {
    return this.changes.received;
  }

  /**
   * Whether a change reaches the instances that want every task's changes: always on one Redis
   * (they subscribe to the pattern), on a Cluster while one of them has said so recently.
   */
  get announcing(): boolean {
    return !this.sharded || this.changes.announcing;
  }

  /** How many tasks this instance is subscribed to (or about to be). */
  get watchedTasks(): number {
    return this.changes.watchedTasks;
  }

  /**
   * The channel of a task's changes. Its hash tag is the task id, as in the task's keys: on a
   * Redis Cluster the channel is sharded to the node that holds the task.
   */
  readonly channelOf = (taskId: string): string => `${this.prefix}changes:{${taskId}}`;

  /**
   * Subscribes to the channels of `watch` and unsubscribes from those of `unwatch`. On a Redis
   * Cluster, sharded: each channel on the node of its slot (one command per channel, as a sharded
   * subscription names channels of one slot only; ioredis sends them at once).
   */
  private async apply(watch: readonly string[], unwatch: readonly string[]): Promise<void> {
    const subscriber = this.subscriber;
    const calls: Promise<unknown>[] = [];
    if (this.sharded) {
      for (const taskId of watch) calls.push(subscriber.ssubscribe(this.channelOf(taskId)));
      for (const taskId of unwatch) calls.push(subscriber.sunsubscribe(this.channelOf(taskId)));
    } else {
      if (watch.length > 0) calls.push(subscriber.subscribe(...watch.map(this.channelOf)));
      if (unwatch.length > 0) calls.push(subscriber.unsubscribe(...unwatch.map(this.channelOf)));
    }
    await Promise.all(calls);
  }

  /**
   * Every task's changes: the pattern of the task channels on one Redis; on a Redis Cluster,
   * whose sharded channels have no patterns, the channel every change is also announced on.
   */
  private async applyAll(on: boolean): Promise<void> {
    const subscriber = this.subscriber;
    if (this.sharded) {
      await (on
        ? subscriber.subscribe(this.everyChannel)
        : subscriber.unsubscribe(this.everyChannel));
    } else {
      await (on ? subscriber.psubscribe(this.pattern) : subscriber.punsubscribe(this.pattern));
    }
  }

  /**
   * Puts a change on this instance's listen streams and publishes it to the others. A new task
   * (version 1) is not published: no one can wait for an id before its creation returns it, and
   * whoever learns the id reads the task.
   */
  notify(record: TaskRecord): Promise<void> | undefined {
    if (record.version === 1) return undefined;
    this.listenFeed.publish(record);
    const channel = this.channelOf(record.taskId);
    const message = this.changes.encode(record);
    if (!this.sharded) return this.publishing(this.publisher.publish(channel, message));
    // On a Cluster: to the task's node; and, while some instance wants every task's changes,
    // announced as a reference on the channel every node relays.
    if (!this.changes.announcing) {
      return this.publishing(this.publisher.spublish(channel, message));
    }
    return this.publishing(
      Promise.all([
        this.publisher.spublish(channel, message),
        this.publisher.publish(this.everyChannel, this.changes.reference(record)),
      ]),
    );
  }

  /** A publish, whose failure names where Redis was sought. */
  private publishing(sent: Promise<unknown>): Promise<void> {
    return sent.then(
      () => undefined,
      (error: unknown) => {
        throw redisFault(this.publisher, 'RedisTaskNotifier', error);
      },
    );
  }

  /** A change of subscriptions, whose failure names where Redis was sought. */
  private subscribing(change: Promise<void>): Promise<void> {
    return change.catch((error: unknown) => {
      throw redisFault(this.subscriber, 'RedisTaskNotifier', error);
    });
  }

  private closing: Promise<void> | undefined;

  /** Closes the subscriber, and the publisher if the notifier made it. Idempotent. */
  onApplicationShutdown(): Promise<void> {
    this.changes.close();
    this.closing ??= Promise.all([
      release(this.subscriber, true, this.timeoutMs),
      release(this.publisher, this.owned, this.timeoutMs),
    ]).then(() => undefined);
    return this.closing;
  }
}

/** Resolves once `client` is connected (at once when it is); never rejects. */
function readyOf(client: RedisClient): Promise<void> {
  if (client.status === 'ready') return Promise.resolve();
  return new Promise((resolve) => {
    client.once('ready', () => resolve());
    client.once('end', () => resolve());
  });
}

/**
 * The Redis notifier as a `notifier` for TasksModule:
 * `TasksModule.forRoot({ store: new RedisTaskStore(redis), notifier: redisNotifier(redis) })`.
 * Records sent by reference are read through the module's store.
 */
export function redisNotifier(options: RedisConnectionOptions): PartProvider<TaskNotifier> {
  return notifierProvider(
    (listenFeed, waiters, store) => new RedisTaskNotifier(options, listenFeed, waiters, store),
  );
}
