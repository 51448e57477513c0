import { readFileSync } from 'node:fs';
import type { Pool, QueryConfig } from 'pg';
import { TasksConfigError } from '../errors.js';
import { checkSchemaName, DEFAULT_SCHEMA, quoteIdentifier } from './postgres-connection.js';

/** One version of the schema: a file, applied in order. */
export interface Migration {
  readonly version: number;
  readonly file: string;
  /** The folder that holds `file`: `schema/` beside this module unless given (the tests give one). */
  readonly dir?: URL;
}

/**
 * The schema's versions, oldest first. A release that changes the schema adds a file (002-….sql)
 * that takes version 1 to 2 in place, recording itself in `schema_version` as 001 does. Until
 * the first release the schema is one file, edited in place.
 */
export const MIGRATIONS: readonly Migration[] = [{ version: 1, file: '001-initial.sql' }];

/** The schema version this release reads and writes. */
export const POSTGRES_SCHEMA_VERSION = MIGRATIONS[MIGRATIONS.length - 1]!.version;

/**
 * How long one upgrade may take: it builds indexes over every task (seconds for a million), more
 * than a request's `timeoutMs`. Requests wait for it (with the app's own pool, `timeoutMs` at most).
 */
const MIGRATION_TIMEOUT_MS = 600_000;

/** The name every shipped file uses for the schema, replaced by the configured one. */
const PLACEHOLDER = new RegExp(`\\b${DEFAULT_SCHEMA}\\b`, 'g');

/**
 * The SQL of one shipped file, for `schema` (quoted, so that a reserved word or capitals work).
 * The files live in `schema/` beside this module (in the package: `dist/postgres/schema/`, copied
 * there by the build).
 */
function fileSql({ file, dir }: Migration, schema: string): string {
  const url = new URL(file, dir ?? new URL('./schema/', import.meta.url));
  let text: string;
  try {
    text = readFileSync(url, 'utf8');
  } catch {
    throw new TasksConfigError(`The PostgreSQL schema file ${file} is missing (looked in ${url})`);
  }
  return schema === DEFAULT_SCHEMA ? text : text.replace(PLACEHOLDER, quoteIdentifier(schema));
}

/**
 * The SQL that sets up `schema` from nothing to the current version (every shipped file, in
 * order), for a team that runs its own migrations: apply it, then give the store `setup: false`.
 */
export function postgresSchemaSql(schema: string = DEFAULT_SCHEMA): string {
  checkSchemaName(schema, 'postgresSchemaSql');
  return MIGRATIONS.map((migration) => fileSql(migration, schema)).join('\n');
}

/** The highest version recorded in `schema`, 0 when it has none (or no version table). */
async function recordedVersion(
  query: (text: string, values?: unknown[]) => Promise<{ rows: Record<string, unknown>[] }>,
  schema: string,
): Promise<number> {
  const table = `${quoteIdentifier(schema)}.schema_version`;
  const found = await query(`SELECT to_regclass($1) IS NOT NULL AS present`, [table]);
  if (found.rows[0]?.present !== true) return 0;
  const { rows } = await query(
    `SELECT coalesce(max(version), 0)::integer AS version FROM ${table}`,
  );
  return Number(rows[0]?.version ?? 0);
}

/**
 * Brings `schema` to the current version: in one transaction, under an advisory lock of its own
 * (instances starting together wait for each other; the second finds the work done), each
 * version above the recorded one is applied. Idempotent. `migrations` is for the tests (a
 * synthetic next version).
 */
export async function setUpSchema(
  pool: Pool,
  schema: string,
  migrations: readonly Migration[] = MIGRATIONS,
): Promise<void> {
  const client = await pool.connect();
  let failed = true;
  try {
    await client.query('BEGIN');
    await client.query(
      `SELECT pg_advisory_xact_lock(hashtext('nestjs-mcp-tasks schema'), hashtext($1))`,
      [schema],
    );
    const current = await recordedVersion((text, values) => client.query(text, values), schema);
    for (const migration of migrations) {
      if (migration.version > current) {
        // An upgrade rebuilds indexes over every task: it may take longer than a request may.
        await client.query({
          text: fileSql(migration, schema),
          query_timeout: MIGRATION_TIMEOUT_MS,
        } as QueryConfig);
      }
    }
    await client.query('COMMIT');
    failed = false;
  } finally {
    if (failed) await client.query('ROLLBACK').catch(() => undefined);
    // A connection whose transaction failed halfway is not handed to anyone else.
    client.release(failed);
  }
}

/**
 * Checks that `schema` is at the current version or later (for `setup: false`), with a message
 * that says what to apply. `needed` is for the tests (a synthetic next version).
 */
export async function checkSchema(
  pool: Pool,
  schema: string,
  needed: number = POSTGRES_SCHEMA_VERSION,
): Promise<void> {
  const version = await recordedVersion((text, values) => pool.query(text, values), schema);
  if (version < needed) {
    throw new TasksConfigError(
      `PostgresTaskStore: schema "${schema}" is at version ${version}, this release needs ${needed}: apply postgresSchemaSql("${schema}") (the files of nestjs-mcp-tasks/dist/postgres/schema/) or leave setup on`,
    );
  }
}
