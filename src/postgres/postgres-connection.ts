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
