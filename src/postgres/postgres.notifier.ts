import { createHash } from 'node:crypto';
import { Logger, type OnApplicationShutdown } from '@nestjs/common';
import type { Pool, QueryConfig } from 'pg';
import type { PartProvider } from '../interfaces/tasks-module-options.interface.js';
import type { ListenFeed } from '../notify/listen-feed.js';
import { type ReceivedChanges, RemoteChanges } from '../notify/remote-changes.js';
import type { TaskNotifier } from '../notify/task-notifier.js';
import type { WaiterFeed } from '../notify/waiter-feed.js';
import type { TaskStore } from '../store/task-store.js';
import type { TaskRecord } from '../task.js';
import { notifierProvider } from '../notifier.provider.js';
import { ListenConnection, schemaChannel } from './listen-connection.js';
import {
  connectPool,
  type PostgresConnectionOptions,
  postgresAddress,
  postgresFault,
  schemaOf,
  timeoutOf,
} from './postgres-connection.js';
import { PostgresTaskStore } from './postgres.task-store.js';

/** How long the LISTEN connection waits before connecting again after it broke. */
const RECONNECT_MS = 1_000;
/** While the LISTEN connection cannot be made, how often that is logged. */
const FAILURE_LOG_MS = 60_000;

/**
 * The notifier for several instances on one PostgreSQL: each change is sent with `pg_notify` on
 * its task's channel, and each instance holds one dedicated connection that LISTENs on the
 * channels of the tasks someone on it waits on or listens to (RemoteChanges keeps the list, and
 * batches the LISTEN and UNLISTEN statements): an instance that watches nothing receives nothing.
 * A change is put on this instance's own listen streams at once; what it hears from the others
 * goes on its feeds (the ListenFeed of its listen streams, the WaiterFeed of its waiters).
 *
 * A NOTIFY payload holds at most 8,000 bytes: a record that fits is sent whole; a larger one as
 * its id and version, and each instance that hears it reads the record (one query). While some
 * instance wants every task's changes (a task console's live stream is open on it: it LISTENs on
 * `<schema>_changes`, and says so every 5 s on `<schema>_hearers`, which every instance LISTENs
 * on), the same payload also goes to `<schema>_changes`.
 * While the LISTEN connection is broken (PostgreSQL restarting) this instance hears nothing
 * written elsewhere; it connects again by itself every second and LISTENs again on what it
 * watches, and waiters re-read the store on their own timer as a safety net.
 */
export class PostgresTaskNotifier implements TaskNotifier, OnApplicationShutdown {
  private readonly logger = new Logger('PostgresTaskNotifier');
  readonly pool: Pool;
  private readonly owned: boolean;
  private readonly timeoutMs: number;
  private readonly schema: string;
  /** The channel of every task's changes. */
  readonly channel: string;
  /** Where the instances that want every task's changes say so; every instance LISTENs there. */
  private readonly controlChannel: string;
  /** What each task's channel name starts with (the schema's, hashed to keep names short). */
  private readonly taskChannelHead: string;
  private readonly changes: RemoteChanges;
  /** The store whose writes send their own changes (see the constructor), if it is one. */
  private readonly writer: PostgresTaskStore | undefined;
  /** The dedicated connection that LISTENs. */
  private readonly listener: ListenConnection;
  /** When a failure to make the LISTEN connection was last logged. */
  private failureLoggedAt = 0;
  /** Resolves once the first LISTEN connection is up (or failed: it then keeps trying). */
  readonly ready: Promise<void>;
  /** What other instances write reaches this process's waiters (when it was given the feed). */
  readonly deliversRemoteChanges: boolean;

  /**
   * `store` reads the records sent by reference (the module's store, given by
   * `postgresNotifier`); without it, a PostgresTaskStore on this notifier's own pool reads them.
   */
  constructor(
    options: PostgresConnectionOptions,
    private readonly listenFeed: ListenFeed,
    waiters?: WaiterFeed,
    store?: Pick<TaskStore, 'get'>,
  ) {
    this.schema = schemaOf(options, 'PostgresTaskNotifier');
    this.timeoutMs = timeoutOf(options, 'PostgresTaskNotifier');
    ({ pool: this.pool, owned: this.owned } = connectPool(
      options,
      'PostgresTaskNotifier',
      this.timeoutMs,
    ));
    this.channel = schemaChannel(this.schema, 'changes');
    this.controlChannel = schemaChannel(this.schema, 'hearers');
    this.taskChannelHead = `nmt${createHash('sha1').update(this.schema).digest('hex').slice(0, 8)}_`;
    this.deliversRemoteChanges = waiters !== undefined;
    this.listener = this.listen();
    this.ready = this.listener.ready;
    let reader = store;
    this.changes = new RemoteChanges(
      {
        apply: (watch, unwatch) =>
          this.run([
            ...watch.map((taskId) => `LISTEN "${this.channelOf(taskId)}"`),
            ...unwatch.map((taskId) => `UNLISTEN "${this.channelOf(taskId)}"`),
          ]),
        applyAll: (on) => this.run([`${on ? 'LISTEN' : 'UNLISTEN'} "${this.channel}"`]),
        read: (taskId) =>
          (reader ??= new PostgresTaskStore({
            connection: this.pool,
            schema: this.schema,
            setup: false,
            timeoutMs: this.timeoutMs,
          })).get(taskId),
      },
      waiters === undefined ? [listenFeed] : [listenFeed, waiters],
      this.timeoutMs,
      this.logger,
      (message) =>
        this.pool.query({
          text: 'SELECT pg_notify($1, $2)',
          values: [this.controlChannel, message],
          query_timeout: this.timeoutMs,
        } as QueryConfig),
    );
    // The module's store on this database and schema sends each write's change in the write's
    // own statement: one round trip and one commit a change, and none lost between the two.
    if (
      store instanceof PostgresTaskStore &&
      store.schema === this.schema &&
      postgresAddress(store.pool) === postgresAddress(this.pool)
    ) {
      this.writer = store;
      store.sendChanges({
        channelOf: (taskId) => this.channelOf(taskId),
        origin: this.changes.origin,
        reference: (record) => this.changes.reference(record),
        everyChange: () => (this.changes.announcing ? this.channel : null),
      });
    }
  }

  /** Whether the LISTEN connection is up: while it is not, changes written elsewhere are missed. */
  get subscribed(): boolean {
    return this.listener.subscribed;
  }

  /** What this instance has heard from the others. */
  get received(): Readonly<ReceivedChanges> {
    return this.changes.received;
  }

  /** Whether a change also goes on the schema's channel: while some instance has said it wants every task's changes. */
  get announcing(): boolean {
    return this.changes.announcing;
  }

  /** How many tasks this instance LISTENs for (or is about to). */
  get watchedTasks(): number {
    return this.changes.watchedTasks;
  }

  /**
   * The channel of a task's changes: a name of at most 63 bytes, as PostgreSQL's identifiers are
   * (ids this package makes are used as they are; any other is hashed).
   */
  channelOf(taskId: string): string {
    return /^[A-Za-z0-9_-]{1,50}$/.test(taskId)
      ? `${this.taskChannelHead}${taskId}`
      : `${this.taskChannelHead}h${createHash('sha1').update(taskId).digest('hex')}`;
  }

  /**
   * Puts a change on this process's listen streams at once, and sends it to the other instances,
   * unless the store's write of this record sent it already. A new task (version 1) is not sent:
   * no one can wait for an id before its creation returns it.
   */
  notify(record: TaskRecord): Promise<void> | undefined {
    if (record.version === 1) return undefined;
    this.listenFeed.publish(record);
    if (this.writer?.sentChange(record)) return undefined;
    const channel = this.channelOf(record.taskId);
    const message = this.changes.encode(record);
    // The schema's channel too while some instance wants every task's changes.
    const query = (
      this.changes.announcing
        ? {
            text: 'SELECT pg_notify($1, $3), pg_notify($2, $3)',
            values: [channel, this.channel, message],
            query_timeout: this.timeoutMs,
          }
        : {
            text: 'SELECT pg_notify($1, $2)',
            values: [channel, message],
            query_timeout: this.timeoutMs,
          }
    ) as QueryConfig;
    return this.pool.query(query).then(
      () => undefined,
      (error: unknown) => {
        throw postgresFault(this.pool, 'PostgresTaskNotifier', error);
      },
    );
  }

  /** Runs LISTEN/UNLISTEN statements on the listener, in one round trip. */
  private async run(statements: readonly string[]): Promise<void> {
    const client = await this.listener.current();
    if (client === undefined) {
      throw new Error(`the LISTEN connection to ${postgresAddress(this.pool)} is down`);
    }
    try {
      await client.query({
        text: statements.join('; '),
        query_timeout: this.timeoutMs,
      } as QueryConfig);
    } catch (error) {
      throw postgresFault(this.pool, 'PostgresTaskNotifier', error);
    }
  }

  /**
   * The LISTEN connection, on the control channel: when it breaks it connects again every
   * RECONNECT_MS and LISTENs again on what this instance watches.
   */
  private listen(): ListenConnection {
    return new ListenConnection(this.pool, {
      role: 'PostgresTaskNotifier',
      timeoutMs: this.timeoutMs,
      channels: [this.controlChannel],
      retry: { firstMs: RECONNECT_MS, maxMs: RECONNECT_MS },
      onNotification: (message) => {
        if (message.payload !== undefined) this.changes.hear(message.payload);
      },
      onConnected: (again, downMs) => {
        if (downMs > 0) {
          this.logger.log(`LISTEN connection made again after ${Math.round(downMs / 1000)} s`);
        }
        // A new connection LISTENs on nothing: every watch is made again on it.
        if (again) this.changes.resubscribe();
      },
      onFailure: (fault, first) => {
        // Tried again every second while PostgreSQL is away: logged when it starts, then once a
        // minute.
        const now = Date.now();
        if (!first && now - this.failureLoggedAt < FAILURE_LOG_MS) return;
        this.failureLoggedAt = now;
        this.logger.error(
          `Could not connect to LISTEN: ${fault.message} (tried again every ${RECONNECT_MS} ms; logged once a minute)`,
        );
      },
    });
  }

  private closing: Promise<void> | undefined;

  /** Closes the LISTEN connection, and the pool if the notifier made it. Idempotent. */
  onApplicationShutdown(): Promise<void> {
    this.closing ??= (async () => {
      this.changes.close();
      await this.listener.close();
      if (this.owned) await this.pool.end();
    })();
    return this.closing;
  }
}

/**
 * The PostgreSQL notifier as a `notifier` for TasksModule:
 * `TasksModule.forRoot({ store: new PostgresTaskStore(pg), notifier: postgresNotifier(pg) })`.
 */
export function postgresNotifier(options: PostgresConnectionOptions): PartProvider<TaskNotifier> {
  return notifierProvider(
    (listenFeed, waiters, store) => new PostgresTaskNotifier(options, listenFeed, waiters, store),
  );
}
