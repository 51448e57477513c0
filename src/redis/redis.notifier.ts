import { Logger, type OnApplicationShutdown } from '@nestjs/common';
import type { Cluster, Redis } from 'ioredis';
import { ListenFeed } from '../notify/listen-feed.js';
import type { TaskNotifier } from '../notify/task-notifier.js';
import { WaiterFeed } from '../notify/waiter-feed.js';
import type { PartProvider } from '../interfaces/tasks-module-options.interface.js';
import type { TaskRecord } from '../task.js';
import {
  connect,
  DEFAULT_PREFIX,
  DEFAULT_REDIS_TIMEOUT_MS,
  type RedisClient,
  type RedisConnectionOptions,
  release,
} from './redis-connection.js';

/**
 * The notifier for several instances: every change is published on `{prefix}changes`, and every
 * instance (this one included) subscribes and puts what it hears on its own feeds: the
 * ListenFeed, where its ListenHandler delivers to the streams watching the task (checking
 * ownership there), and the WaiterFeed of the code waiting on the task in that process. So a task completed on
 * instance A reaches a listen stream held by instance B.
 */
export class RedisTaskNotifier implements TaskNotifier, OnApplicationShutdown {
  private readonly logger = new Logger('RedisTaskNotifier');
  private readonly publisher: RedisClient;
  private readonly subscriber: RedisClient;
  private readonly owned: boolean;
  private readonly channel: string;
  private readonly timeoutMs: number;
  /** Resolves once the subscription is in place. */
  readonly ready: Promise<void>;
  /** What other instances write reaches this process's waiters (when it was given the feed). */
  readonly deliversRemoteChanges: boolean;

  constructor(
    options: RedisConnectionOptions,
    private readonly listenFeed: ListenFeed,
    private readonly waiters?: WaiterFeed,
  ) {
    ({ client: this.publisher, owned: this.owned } = connect(options, 'RedisTaskNotifier'));
    this.deliversRemoteChanges = waiters !== undefined;
    // On a Redis Cluster, a PUBLISH on any node reaches the subscribers of every node (the
    // cluster bus carries it), so one subscription, on whichever node ioredis picks, hears all.
    this.subscriber = this.publisher.isCluster
      ? (this.publisher as Cluster).duplicate()
      : (this.publisher as Redis).duplicate();
    this.subscriber.on('error', () => undefined);
    this.channel = `${options.prefix ?? DEFAULT_PREFIX}changes`;
    this.timeoutMs = options.timeoutMs ?? DEFAULT_REDIS_TIMEOUT_MS;
    this.subscriber.on('message', (channel: string, message: string) => {
      if (channel === this.channel) this.hear(message);
    });
    this.ready = this.subscriber.subscribe(this.channel).then(
      () => undefined,
      (error: unknown) => this.logger.error(`Could not subscribe: ${String(error)}`),
    );
  }

  /**
   * Whether the subscriber is connected (and so subscribed: ioredis subscribes again after a
   * reconnect). While it is not, this instance hears no change written elsewhere.
   */
  get subscribed(): boolean {
    return this.subscriber.status === 'ready';
  }

  /**
   * Publishes a change to every instance. A new task (version 1) is not published: no one can
   * wait for an id before its creation returns it, and whoever learns the id reads the task.
   */
  notify(record: TaskRecord): Promise<void> | undefined {
    if (record.version === 1) return undefined;
    return this.publisher.publish(this.channel, JSON.stringify(record)).then(() => undefined);
  }

  private closing: Promise<void> | undefined;

  /** Closes the subscriber, and the publisher if the notifier made it. Idempotent. */
  onApplicationShutdown(): Promise<void> {
    this.closing ??= Promise.all([
      release(this.subscriber, true, this.timeoutMs),
      release(this.publisher, this.owned, this.timeoutMs),
    ]).then(() => undefined);
    return this.closing;
  }

  private hear(message: string): void {
    let record: TaskRecord;
    try {
      record = JSON.parse(message) as TaskRecord;
    } catch {
      return;
    }
    this.listenFeed.publish(record);
    this.waiters?.publish(record);
  }
}

/**
 * The Redis notifier as a `notifier` for TasksModule:
 * `TasksModule.forRoot({ store: new RedisTaskStore(redis), notifier: redisNotifier(redis) })`.
 */
export function redisNotifier(options: RedisConnectionOptions): PartProvider<TaskNotifier> {
  return {
    useFactory: (listenFeed: ListenFeed, waiters: WaiterFeed) =>
      new RedisTaskNotifier(options, listenFeed, waiters),
    inject: [ListenFeed, WaiterFeed],
  } as PartProvider<TaskNotifier>;
}
