import { createRequire } from 'node:module';
import type { Client, ClientConfig, Pool, PoolConfig } from 'pg';
import { TasksConfigError } from '../errors.js';

/** How a PostgreSQL-backed part reaches PostgreSQL: the app's own pool, or where to connect. */
export interface PostgresConnectionOptions {
  /**
   * A `postgres://` connection string or `pg` pool options (the part makes its own pool and
   * closes it), or a `pg.Pool` the app owns (the part uses it and never closes it).
   */
  connection: string | PoolConfig | Pool;
  /**
   * The PostgreSQL schema of every table and function: lower-case letters, digits and `_`,
   * starting with a letter or `_`. Default `mcp_tasks`.
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

/** Names the schema may take: plain lower-case identifiers, which need no quoting. */
const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

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

/** The schema name, checked: the part writes it into its SQL. */
export function schemaOf(options: PostgresConnectionOptions, role: string): string {
  const schema = options.schema ?? DEFAULT_SCHEMA;
  if (typeof schema !== 'string' || !SCHEMA_NAME.test(schema)) {
    throw new TasksConfigError(
      `${role} schema must be a lower-case identifier (letters, digits, _), got ${JSON.stringify(schema)}`,
    );
  }
  return schema;
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
 * A new client (not from a pool) that connects as `pool` does: the notifier's dedicated LISTEN
 * connection. The pool may be the app's own; its connection options are read, not its clients.
 */
export function newClient(pool: Pool, timeoutMs: number): Client {
  const { Client } = loadPg();
  const options = (pool as unknown as { options?: ClientConfig }).options ?? {};
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
