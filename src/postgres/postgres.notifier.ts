import { createHash, randomBytes } from 'node:crypto';
import { Logger, type OnApplicationShutdown } from '@nestjs/common';
import type { Client, Notification, Pool, QueryConfig } from 'pg';
import type { PartProvider } from '../interfaces/tasks-module-options.interface.js';
import { ListenFeed } from '../notify/listen-feed.js';
import type { TaskNotifier } from '../notify/task-notifier.js';
import { WaiterFeed } from '../notify/waiter-feed.js';
import type { TaskRecord } from '../task.js';
import {
  connectPool,
  newClient,
  type PostgresConnectionOptions,
  schemaOf,
  timeoutOf,
} from './postgres-connection.js';

/**
 * The most bytes of a NOTIFY payload PostgreSQL takes (8,000, less a margin): a change whose
 * record fits is sent whole; a larger one is sent as its id and version, and read by who hears it.
 */
const MAX_PAYLOAD_BYTES = 7_900;

/** How long the LISTEN connection waits before connecting again after it broke. */
const RECONNECT_MS = 1_000;

/** What one change's NOTIFY carries: who sent it, and the record or where to read it. */
interface Change {
  /** The sending notifier (it skips its own: it delivered them at once). */
  o: string;
  /** The record, when it fits in a payload. */
  r?: TaskRecord;
  /** Else the task's id and version: the receiver reads the record. */
  t?: string;
  v?: number;
}

/**
 * The notifier for several instances on one PostgreSQL: every change is sent with `pg_notify` on
 * the schema's channel (`<schema>_changes`), and every instance holds one dedicated connection
 * that LISTENs there and puts what it hears on its own feeds (the ListenFeed of its listen
 * streams, the WaiterFeed of its waiters). A change written here reaches this process's streams
 * at once, without the round trip.
 *
 * A NOTIFY payload holds at most 8,000 bytes: a record that fits is sent whole; a larger one as
 * its id and version, and each instance that hears it reads the record (one query). While the
 * LISTEN connection is broken (PostgreSQL restarting) this instance hears nothing written
 * elsewhere; it connects again by itself every second, and waiters re-read the store on their
 * own timer as a safety net.
 */
export class PostgresTaskNotifier implements TaskNotifier, OnApplicationShutdown {
  private readonly logger = new Logger('PostgresTaskNotifier');
  readonly pool: Pool;
  private readonly owned: boolean;
  private readonly timeoutMs: number;
  private readonly schema: string;
  /** The channel every instance of this schema LISTENs on. */
  readonly channel: string;
  private readonly origin = randomBytes(12).toString('base64url');
  private listener: Client | undefined;
  private reconnect: NodeJS.Timeout | undefined;
  private closed = false;
  private listening = false;
  /** Resolves once the first LISTEN is in place (or failed: it then keeps trying). */
  readonly ready: Promise<void>;
  /** What other instances write reaches this process's waiters (when it was given the feed). */
  readonly deliversRemoteChanges: boolean;

  constructor(
    options: PostgresConnectionOptions,
    private readonly listenFeed: ListenFeed,
    private readonly waiters?: WaiterFeed,
  ) {
    this.schema = schemaOf(options, 'PostgresTaskNotifier');
    this.timeoutMs = timeoutOf(options, 'PostgresTaskNotifier');
    ({ pool: this.pool, owned: this.owned } = connectPool(
      options,
      'PostgresTaskNotifier',
      this.timeoutMs,
    ));
    this.channel = channelOf(this.schema);
    this.deliversRemoteChanges = waiters !== undefined;
    this.ready = this.listen();
  }

  /** Whether the LISTEN connection is up: while it is not, changes written elsewhere are missed. */
  get subscribed(): boolean {
    return this.listening;
  }

  /**
   * Sends a change to every instance, and puts it on this process's listen streams at once. A new
   * task (version 1) is not sent: no one can wait for an id before its creation returns it.
   */
  notify(record: TaskRecord): Promise<void> | undefined {
    if (record.version === 1) return undefined;
    this.listenFeed.publish(record);
    let payload = JSON.stringify({ o: this.origin, r: record } satisfies Change);
    if (Buffer.byteLength(payload) > MAX_PAYLOAD_BYTES) {
      payload = JSON.stringify({
        o: this.origin,
        t: record.taskId,
        v: record.version,
      } satisfies Change);
    }
    const query = {
      text: 'SELECT pg_notify($1, $2)',
      values: [this.channel, payload],
      query_timeout: this.timeoutMs,
    } as QueryConfig;
    return this.pool.query(query).then(() => undefined);
  }

  /** Connects the LISTEN connection; on failure or when it breaks later, tries again. */
  private async listen(): Promise<void> {
    if (this.closed) return;
    const client = newClient(this.pool, this.timeoutMs);
    this.listener = client;
    const broke = (): void => {
      if (this.listener !== client) return;
      this.listening = false;
      this.listener = undefined;
      client.end().catch(() => undefined);
      this.retry();
    };
    client.on('error', broke);
    client.on('end', broke);
    client.on('notification', (message: Notification) => {
      if (message.channel === this.channel && message.payload !== undefined) {
        this.hear(message.payload);
      }
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${this.channel}`);
      if (this.listener === client) this.listening = true;
    } catch (error) {
      this.logger.error(
        `Could not LISTEN: ${error instanceof Error ? error.message : String(error)}`,
      );
      broke();
    }
  }

  private retry(): void {
    if (this.closed || this.reconnect !== undefined) return;
    this.reconnect = setTimeout(() => {
      this.reconnect = undefined;
      void this.listen();
    }, RECONNECT_MS);
    this.reconnect.unref();
  }

  private hear(payload: string): void {
    let change: Change;
    try {
      change = JSON.parse(payload) as Change;
    } catch {
      return;
    }
    if (change.o === this.origin) return;
    if (change.r !== undefined) return this.deliver(change.r);
    if (typeof change.t !== 'string') return;
    const query = {
      text: `SELECT record::text AS record FROM ${this.schema}.tasks WHERE task_id = $1::text`,
      values: [change.t],
      query_timeout: this.timeoutMs,
    } as QueryConfig;
    this.pool.query<{ record: string }>(query).then(
      ({ rows }) => {
        const row = rows[0];
        if (row !== undefined) this.deliver(JSON.parse(row.record) as TaskRecord);
      },
      (error: unknown) =>
        this.logger.error(
          `Could not read a changed task: ${error instanceof Error ? error.message : String(error)}`,
        ),
    );
  }

  private deliver(record: TaskRecord): void {
    this.listenFeed.publish(record);
    this.waiters?.publish(record);
  }

  private closing: Promise<void> | undefined;

  /** Closes the LISTEN connection, and the pool if the notifier made it. Idempotent. */
  onApplicationShutdown(): Promise<void> {
    this.closing ??= (async () => {
      this.closed = true;
      clearTimeout(this.reconnect);
      const client = this.listener;
      this.listener = undefined;
      this.listening = false;
      await client?.end().catch(() => undefined);
      if (this.owned) await this.pool.end();
    })();
    return this.closing;
  }
}

/** The channel of a schema: `<schema>_changes`, or a name made from it when that is too long. */
function channelOf(schema: string): string {
  const name = `${schema}_changes`;
  if (name.length <= 63) return name;
  return `nmt_${createHash('sha1').update(schema).digest('hex').slice(0, 32)}_changes`;
}

/**
 * The PostgreSQL notifier as a `notifier` for TasksModule:
 * `TasksModule.forRoot({ store: new PostgresTaskStore(pg), notifier: postgresNotifier(pg) })`.
 */
export function postgresNotifier(options: PostgresConnectionOptions): PartProvider<TaskNotifier> {
  return {
    useFactory: (listenFeed: ListenFeed, waiters: WaiterFeed) =>
      new PostgresTaskNotifier(options, listenFeed, waiters),
    inject: [ListenFeed, WaiterFeed],
  } as PartProvider<TaskNotifier>;
}
