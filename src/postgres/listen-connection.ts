import { createHash } from 'node:crypto';
import type { Client, Notification } from 'pg';
import { newClient, type PostgresSource, postgresFault } from './postgres-connection.js';

/** How a ListenConnection is made, and what it tells its owner. */
export interface ListenConnectionOptions {
  /** Who holds it, for messages (`PostgresTaskNotifier`). */
  role: string;
  /** Bounds the connect and each statement. */
  timeoutMs: number;
  /** The channels LISTENed on by every connection made, before it counts as up. */
  channels: readonly string[];
  /**
   * How long to wait before connecting again after a failure or a break: `firstMs`, doubled at
   * each failure in a row up to `maxMs` (the same two: a fixed delay).
   */
  retry: { firstMs: number; maxMs: number };
  onNotification(message: Notification): void;
  /**
   * A connection is up and LISTENs on `channels`: `again` when one was up before (what was sent
   * in between was not heard), `downMs` how long connects failed before this one (0 when none
   * did).
   */
  onConnected?(again: boolean, downMs: number): void;
  /** A connect failed (`first` of a run of failures); it is tried again by itself. */
  onFailure?(fault: Error, first: boolean): void;
}

/**
 * One dedicated PostgreSQL connection that LISTENs (not from a pool: a pooled connection would
 * LISTEN for whoever uses it next). It connects at once; when it cannot, or breaks later, it
 * connects again by itself, with the `retry` delays, until `close()`. Its timer and socket are
 * closed by `close()`; the timer never keeps the process alive on its own.
 */
export class ListenConnection {
  private client: Client | undefined;
  /** Resolves once the current attempt is done: the client, or undefined if it failed. */
  private connected: Promise<Client | undefined>;
  private timer: NodeJS.Timeout | undefined;
  private closed = false;
  private listening = false;
  /** Failed connects in a row, for the backoff. */
  private failures = 0;
  /** Since when connects fail (undefined while the connection is up). */
  private failingSince: number | undefined;
  /** Whether a connection was up before (the next one is made again). */
  private wasUp = false;
  private closing: Promise<void> | undefined;
  /** Resolves once the first attempt is done (up, or failed: it then keeps trying). */
  readonly ready: Promise<void>;

  constructor(
    private readonly source: PostgresSource,
    private readonly options: ListenConnectionOptions,
  ) {
    this.connected = this.connect();
    this.ready = this.connected.then(() => undefined);
  }

  /** Whether the connection is up: while it is not, notices are missed. */
  get subscribed(): boolean {
    return this.listening;
  }

  /** The connection once the current attempt is done, or undefined while it is down. */
  async current(): Promise<Client | undefined> {
    const client = await this.connected;
    return client !== undefined && client === this.client ? client : undefined;
  }

  private async connect(): Promise<Client | undefined> {
    if (this.closed) return undefined;
    const { role, timeoutMs, channels } = this.options;
    const client = newClient(this.source, timeoutMs);
    this.client = client;
    const broke = (): void => {
      if (this.client !== client) return;
      this.listening = false;
      this.client = undefined;
      client.end().catch(() => undefined);
      this.retry();
    };
    client.on('error', broke);
    client.on('end', broke);
    client.on('notification', (message) => this.options.onNotification(message));
    try {
      await client.connect();
      if (channels.length > 0) {
        await client.query(channels.map((channel) => `LISTEN "${channel}"`).join('; '));
      }
      if (this.client !== client) return undefined;
      this.listening = true;
      this.failures = 0;
      const downMs = this.failingSince === undefined ? 0 : Date.now() - this.failingSince;
      this.failingSince = undefined;
      const again = this.wasUp;
      this.wasUp = true;
      this.options.onConnected?.(again, downMs);
      return client;
    } catch (error) {
      const first = this.failingSince === undefined;
      this.failingSince ??= Date.now();
      this.failures++;
      if (!this.closed) {
        this.options.onFailure?.(postgresFault(this.source, role, error) as Error, first);
      }
      broke();
      return undefined;
    }
  }

  private retry(): void {
    if (this.closed || this.timer !== undefined) return;
    const { firstMs, maxMs } = this.options.retry;
    const delay = Math.min(maxMs, firstMs * 2 ** Math.max(0, this.failures - 1));
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.connected = this.connect();
    }, delay);
    this.timer.unref();
  }

  /** Ends the connection and stops connecting again. Idempotent. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      this.closed = true;
      clearTimeout(this.timer);
      const client = this.client;
      this.client = undefined;
      this.listening = false;
      await client?.end().catch(() => undefined);
    })();
    return this.closing;
  }
}

/**
 * A channel of a schema: `<schema>_<suffix>`, or a name made from it when that is longer than
 * PostgreSQL's 63-byte identifiers.
 */
export function schemaChannel(schema: string, suffix: string): string {
  const name = `${schema}_${suffix}`;
  if (name.length <= 63) return name;
  return `nmt_${createHash('sha1').update(schema).digest('hex').slice(0, 32)}_${suffix}`;
}
