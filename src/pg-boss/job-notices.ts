import { Logger } from '@nestjs/common';
import type PgBoss from 'pg-boss';
import { ListenConnection, schemaChannel } from '../postgres/listen-connection.js';
import { DEFAULT_POSTGRES_TIMEOUT_MS, postgresAddress } from '../postgres/postgres-connection.js';

/** The LISTEN connection's first wait before connecting again, doubled up to JOB_NOTICES_MAX_RETRY_MS. */
export const JOB_NOTICES_RETRY_MS = 500;
/** The LISTEN connection's longest wait between two connects. */
export const JOB_NOTICES_MAX_RETRY_MS = 15_000;

/**
 * The channel of a pg-boss schema's job notices: `<schema>_nmt_jobs`. Two deployments in one
 * database (two pg-boss schemas) do not wake each other's workers.
 */
export function jobNoticesChannel(schema: string): string {
  return schemaChannel(schema, 'nmt_jobs');
}

/** Who hears the notices: the workers of this process. */
export interface JobNoticeHearer {
  /** A job was sent to `queue` by some process. */
  sent(queue: string): void;
  /** Notices may have been missed (the LISTEN connection was down): every queue looks. */
  missed(): void;
}

/**
 * Job notices across processes, so a worker takes a job sent by another process (an API-only
 * instance) at once rather than at its next poll. A process that sends a job sends the queue's
 * name with `pg_notify` on the schema's channel, once the job is in (its insert committed), on
 * pg-boss's pool, without the call waiting for it: the sends of one tick go as one statement. A
 * process with workers LISTENs on that channel on a connection of its own (ListenConnection):
 * made again with backoff when it breaks, after which every queue looks once (notices sent in
 * between were lost). Polling stays the fallback: a notice lost, or a worker that cannot LISTEN,
 * only waits for the next poll.
 */
export class JobNotices {
  private readonly logger = new Logger('TaskQueueWorkers');
  /** The channel of this pg-boss schema's notices. */
  readonly channel: string;
  /** The queues of the jobs sent this tick, announced together. */
  private pending: Set<string> | undefined;
  /** The announcements on their way, for the shutdown to wait on. */
  private readonly sending = new Set<Promise<void>>();
  private listener: ListenConnection | undefined;
  private closed = false;

  constructor(
    private readonly boss: PgBoss,
    private readonly connection: string | PgBoss.ConstructorOptions,
    schema: string,
    /** Where a failed announcement goes (logged once a minute). */
    private readonly report: (error: unknown) => void,
  ) {
    this.channel = jobNoticesChannel(schema);
  }

  /** Announces a job sent to `queue` (its insert committed); not awaited by the call. */
  sent(queue: string): void {
    if (this.closed) return;
    if (this.pending !== undefined) {
      this.pending.add(queue);
      return;
    }
    this.pending = new Set([queue]);
    setImmediate(() => this.flush());
  }

  /** Sends the notices of the jobs sent this tick: one statement, one notice per queue. */
  private flush(): void {
    const queues = [...(this.pending ?? [])];
    this.pending = undefined;
    if (queues.length === 0) return;
    const sending = this.boss
      .getDb()
      .executeSql('SELECT pg_notify($1, queue) FROM unnest($2::text[]) AS queue', [
        this.channel,
        queues,
      ])
      .then(
        () => undefined,
        (error: unknown) => this.report(error),
      );
    this.sending.add(sending);
    void sending.finally(() => this.sending.delete(sending));
  }

  /**
   * LISTENs for the notices of other processes (and this one's), on a connection of its own;
   * resolves once the first connect is done (up, or failed: it is then tried again, and said once
   * in a WARN). With pg-boss given a `db` of the app's own there is nothing to connect with:
   * the workers poll, and a WARN says so.
   */
  listen(hearer: JobNoticeHearer): Promise<void> {
    if (this.closed || this.listener !== undefined) return Promise.resolve();
    const { connection } = this;
    const config = typeof connection === 'string' ? { connectionString: connection } : connection;
    if (config.db !== undefined) {
      this.logger.warn(
        "pg-boss runs on a `db` of the app's own: workers see jobs sent by other processes at " +
          'their next poll (pollingIntervalSeconds), not at once',
      );
      return Promise.resolve();
    }
    const source = { options: config };
    const address = postgresAddress(source);
    this.listener = new ListenConnection(source, {
      role: 'TasksQueueModule (pg-boss)',
      timeoutMs: DEFAULT_POSTGRES_TIMEOUT_MS,
      channels: [this.channel],
      retry: { firstMs: JOB_NOTICES_RETRY_MS, maxMs: JOB_NOTICES_MAX_RETRY_MS },
      onNotification: (message) => {
        if (message.channel === this.channel && message.payload) hearer.sent(message.payload);
      },
      onConnected: (again, downMs) => {
        if (downMs > 0) {
          this.logger.log(
            `Job notices: LISTEN on ${address} made again after ${Math.round(downMs / 1000)} s`,
          );
        }
        if (again) hearer.missed();
      },
      onFailure: (fault, first) => {
        // Once per outage: the workers still poll, and the connect is tried again with backoff.
        if (!first) return;
        this.logger.warn(
          `Job notices: could not LISTEN (${fault.message}); workers see jobs sent by other ` +
            'processes at their next poll until it connects (tried again with backoff)',
        );
      },
    });
    return this.listener.ready;
  }

  /** Whether the LISTEN connection is up. */
  get listening(): boolean {
    return this.listener?.subscribed ?? false;
  }

  /** Waits for the announcements on their way, and ends the LISTEN connection. */
  async close(): Promise<void> {
    this.closed = true;
    this.flush();
    await Promise.all(this.sending);
    await this.listener?.close();
  }
}
