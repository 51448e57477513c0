import { createRequire } from 'node:module';
import type { Client, ClientConfig, Pool, PoolConfig } from 'pg';
import { StoreUnavailableError, TaskError, TasksConfigError } from '../errors.js';

/** How a PostgreSQL-backed part reaches PostgreSQL: the app's own pool, or where to connect. */
export interface PostgresConnectionOptions {
  /**
   * A `postgres://` connection string or `pg` pool options (the part makes its own pool and
   * closes it), or a `pg.Pool` the app owns (the part uses it and never closes it).
   */
  connection: string | PoolConfig | Pool;
  /**
   * The PostgreSQL schema of every table and function: 1 to 63 ASCII letters, digits, `_` and
   * `-`, not starting with `pg_` (PostgreSQL keeps that prefix for itself). It is quoted in every
   * statement, so a reserved word (`user`) works and case counts (`Tasks` is not `tasks`).
   * Default `mcp_tasks`.
   */
  schema?: string;
  /**
   * A query that takes longer fails (and so does the request, with "Task store unavailable"), and
   * so does waiting that long for a connection (with the app's own pool, the store bounds the
   * whole call). Default 5 s.
   */
  timeoutMs?: number;
}

export const DEFAULT_SCHEMA = 'mcp_tasks';
export const DEFAULT_POSTGRES_TIMEOUT_MS = 5_000;

/**
 * The characters a schema name may hold. Every statement quotes the name, so any identifier
 * would do for PostgreSQL; these are the ones that also stay inert where the shipped SQL puts the
 * name (its comments, its function bodies between `$$`) and in a channel name.
 */
const SCHEMA_NAME = /^[A-Za-z0-9_-]+$/;
/** PostgreSQL's longest identifier, in bytes (a longer one is cut, so two names would meet). */
const MAX_IDENTIFIER_BYTES = 63;

interface PgModule {
  Pool: new (config?: PoolConfig) => Pool;
  Client: new (config?: ClientConfig) => Client;
}

/** Loads `pg`, an optional peer dependency, with a clear message when it is missing. */
function loadPg(): PgModule {
  try {
    const module = createRequire(import.meta.url)('pg') as PgModule & { default?: PgModule };
    return module.Pool === undefined && module.default !== undefined ? module.default : module;
  } catch {
    throw new TasksConfigError('The PostgreSQL store and notifier need pg: npm install pg');
  }
}

/** Whether `value` is a pool (the app's own) rather than options to make one. */
function isPool(value: unknown): value is Pool {
  const candidate = value as { query?: unknown; connect?: unknown } | null;
  return (
    typeof candidate === 'object' &&
    candidate !== null &&
    typeof candidate.query === 'function' &&
    typeof candidate.connect === 'function'
  );
}

/**
 * The schema name, checked when the part is made: a name PostgreSQL would refuse (or cut) fails
 * here, with the rule, rather than at the first request.
 */
export function schemaOf(options: PostgresConnectionOptions, role: string): string {
  return checkSchemaName(options.schema ?? DEFAULT_SCHEMA, role);
}

/** `schema`, when PostgreSQL and the shipped SQL take it as a schema name; else a TasksConfigError. */
export function checkSchemaName(schema: unknown, role: string): string {
  const refuse = (rule: string): never => {
    throw new TasksConfigError(`${role} schema ${rule}, got ${JSON.stringify(schema)}`);
  };
  if (typeof schema !== 'string' || !SCHEMA_NAME.test(schema)) {
    return refuse('must be ASCII letters, digits, _ and - (1 to 63 of them)');
  }
  if (schema.length > MAX_IDENTIFIER_BYTES) {
    refuse(`must be at most ${MAX_IDENTIFIER_BYTES} characters (PostgreSQL's identifier length)`);
  }
  if (schema.startsWith('pg_')) {
    refuse('must not start with pg_ (PostgreSQL reserves that prefix for its own schemas)');
  }
  return schema;
}

/**
 * `name` as a quoted identifier (`"` doubled): reserved words and capitals keep their meaning.
 * Every statement names the schema this way.
 */
export function quoteIdentifier(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

/** The timeout, checked. */
export function timeoutOf(options: PostgresConnectionOptions, role: string): number {
  const timeoutMs = options.timeoutMs ?? DEFAULT_POSTGRES_TIMEOUT_MS;
  if (!(Number.isSafeInteger(timeoutMs) && timeoutMs > 0)) {
    throw new TasksConfigError(
      `${role} timeoutMs must be a positive integer, got ${String(timeoutMs)}`,
    );
  }
  return timeoutMs;
}

/** The pool to use, and whether the part made it (and so closes it). */
export function connectPool(
  options: PostgresConnectionOptions,
  role: string,
  timeoutMs: number,
): { pool: Pool; owned: boolean } {
  const { connection } = options;
  if (isPool(connection)) return { pool: connection, owned: false };
  if (typeof connection !== 'string' && (typeof connection !== 'object' || connection === null)) {
    throw new TasksConfigError(`${role} needs a connection: a connection string or a pg.Pool`);
  }
  const { Pool } = loadPg();
  const config: PoolConfig =
    typeof connection === 'string' ? { connectionString: connection } : { ...connection };
  const pool = new Pool({
    connectionTimeoutMillis: timeoutMs,
    query_timeout: timeoutMs,
    ...config,
  });
  // An idle connection that breaks (PostgreSQL restarted) is reported here: the pool drops it and
  // the next query connects again. Without a listener the process would crash.
  pool.on('error', () => undefined);
  return { pool, owned: true };
}

/**
 * Where a part connects: a pool (its options are read, not its clients), or the same options
 * without one (pg-boss's constructor options are a pool's keys).
 */
export type PostgresSource = Pool | { readonly options: PoolConfig };

/**
 * A new client (not from a pool) that connects as `source` does: a dedicated LISTEN connection.
 * The pool may be the app's own; its connection options are read, not its clients.
 */
export function newClient(source: PostgresSource, timeoutMs: number): Client {
  const { Client } = loadPg();
  const options: ClientConfig = source.options ?? {};
  return new Client({ connectionTimeoutMillis: timeoutMs, ...options });
}

export class PostgresTimeoutError extends Error {
  constructor(ms: number) {
    super(`PostgreSQL did not answer within ${ms} ms`);
    this.name = 'PostgresTimeoutError';
  }
}

/**
 * Rejects with a PostgresTimeoutError when `operation` takes longer than `ms`. For the app's own
 * pool, whose wait for a free connection the part cannot bound by options: a request then fails
 * in bounded time, as with a pool the part made (its `connectionTimeoutMillis`).
 */
export function within<T>(operation: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new PostgresTimeoutError(ms)), ms);
    timer.unref();
  });
  return Promise.race([operation, timeout]).finally(() => clearTimeout(timer));
}

/**
 * Where `pool` connects, for messages: `host:port/database` (a socket directory for a Unix
 * socket), from its options, else PostgreSQL's environment variables and defaults, as `pg` reads
 * them. Never a user or password: a connection string is parsed here for its host, port and
 * database only.
 */
export function postgresAddress(pool: PostgresSource): string {
  const options: PoolConfig = pool.options ?? {};
  let host = options.host;
  let port: string | number | undefined = options.port;
  let database = options.database;
  if (typeof options.connectionString === 'string') {
    try {
      const url = new URL(options.connectionString);
      host ??= decodeURIComponent(url.hostname) || url.searchParams.get('host') || undefined;
      port ??= url.port || undefined;
      database ??= decodeURIComponent(url.pathname.slice(1)) || undefined;
    } catch {
      return 'PostgreSQL at an unreadable connection string';
    }
  }
  host ??= process.env.PGHOST ?? 'localhost';
  port ??= process.env.PGPORT ?? 5432;
  database ??= process.env.PGDATABASE;
  const at = host.startsWith('/') ? `${host} (port ${port})` : `${hostPort(host, port)}`;
  return `PostgreSQL at ${at}${database ? `/${database}` : ''}`;
}

/** `host:port`, with an IPv6 host in brackets. */
function hostPort(host: string, port: string | number): string {
  return `${host.includes(':') && !host.startsWith('[') ? `[${host}]` : host}:${port}`;
}

/**
 * An error PostgreSQL (or the way to it) gave `role`, naming where PostgreSQL was sought, and for
 * a connection that failed what to check. The original error is its `cause`.
 */
export class PostgresUnavailableError extends StoreUnavailableError {}

/**
 * SQLSTATE classes of a connection that failed or was refused: connection exceptions (08),
 * invalid authorization (28), an unknown database (3D000), a server shutting down or starting
 * (57P01 to 57P03).
 */
const CONNECTION_STATES = /^(08|28|3D000|57P0[1-3])/;

/**
 * `error` of a call on `pool` by `role`: this package's own errors (a schema at the wrong
 * version, a refusal) pass as they are; any other names the address, and when the connection
 * itself failed (refused, timed out, not resolved, login refused) what to check.
 */
export function postgresFault(pool: PostgresSource, role: string, error: unknown): unknown {
  if (
    error instanceof PostgresUnavailableError ||
    error instanceof TaskError ||
    error instanceof TasksConfigError
  ) {
    return error;
  }
  const address = postgresAddress(pool);
  const own = (error as Error)?.message ?? String(error);
  const { code } = (error ?? {}) as { code?: unknown };
  const sqlState = typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) ? code : undefined;
  if (sqlState !== undefined && !CONNECTION_STATES.test(sqlState)) {
    return new PostgresUnavailableError(address, `${address} answered ${role}: ${own}`, {
      cause: error,
    });
  }
  if (sqlState !== undefined && /^(28|3D)/.test(sqlState)) {
    const what = sqlState.startsWith('28') ? 'user and password' : 'database name';
    return new PostgresUnavailableError(
      address,
      `${address} refused ${role}'s login (${own}): check the ${what} of ${role}'s connection`,
      { cause: error },
    );
  }
  return new PostgresUnavailableError(
    address,
    `${role} could not reach ${address} (${own}): check that PostgreSQL runs there and that ` +
      `${role}'s connection names the right host and port`,
    { cause: error },
  );
}
