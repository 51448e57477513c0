/**
 * The SQL of PostgresTaskStore: each statement's text, named by it to be prepared once a
 * connection, and how a string column keeps any string. What the store does with the rows is in
 * postgres.task-store.ts; the tables and functions the statements name are in schema/.
 */
import { createHash } from 'node:crypto';
import { quoteIdentifier } from './postgres-connection.js';

/** One statement: its text and the name it is prepared under on each connection. */
export interface Statement {
  readonly name: string;
  readonly text: string;
}

/** A statement named by its text (a schema of its own gives other names): prepared once a connection. */
export function statement(text: string): Statement {
  return { name: `nmt_${createHash('sha1').update(text).digest('hex').slice(0, 24)}`, text };
}

/**
 * What starts the kept form of a string PostgreSQL's text cannot hold as it is (see `textOf`). No
 * owner key starts with it (they start with a digit or `-`), nor does any tool name in practice.
 */
const ENCODED = '\u0001';

/**
 * A string that may contain anything (an owner key, a tool name) as a text column keeps it,
 * exactly: PostgreSQL's text holds no NUL, and the driver sends half of a surrogate pair as
 * U+FFFD, which would make two owners one. Such a string, or one that starts with ENCODED, is
 * kept as ENCODED and the base64 of its UTF-16 code units; any other as it is (as version 1 of
 * the schema kept every one). No two strings share a kept form. The columns are compared, never
 * read back: the record holds the strings themselves.
 */
export function textOf(value: string): string {
  return value.includes('\0') || !(value as WellFormed).isWellFormed() || value.startsWith(ENCODED)
    ? ENCODED + Buffer.from(value, 'utf16le').toString('base64')
    : value;
}

/** ES2024's `String.prototype.isWellFormed` (Node 20), not in the ES2022 library the build targets. */
type WellFormed = string & { isWellFormed(): boolean };

/** Which listing a page reads, and with which filters: each shape is one prepared statement. */
export interface ListingShape {
  owner: boolean;
  cursor: boolean;
  status: boolean;
  tool: boolean;
}

/** The fixed statements of a schema, by operation. */
export type TaskStatements = ReturnType<typeof statements>;

/** The fixed statements of a schema (`schema`: its name, quoted here). */
export function statements(name: string) {
  const schema = quoteIdentifier(name);
  const tasks = `${schema}.tasks`;
  const live = `(expires_at IS NULL OR expires_at > $NOW::bigint)`;
  const clock = `clock AS (SELECT (extract(epoch FROM statement_timestamp()) * 1000)::bigint AS now)`;
  const compareAndSet =
    `UPDATE ${tasks} SET record = $2::json, version = $3::bigint, status = $4::text, ` +
    `owner_key = $5::text, created_at = $6::bigint, expires_at = $7::bigint, ` +
    `terminal_at = $8::bigint, tool_name = $9::text, ` +
    `held_by = CASE WHEN $10::boolean THEN NULL ELSE held_by END ` +
    `WHERE task_id = $1::text AND version = $11::bigint AND ${live.replace('$NOW', '$12')}`;
  const createArguments =
    `($1::text, $2::text, $3::text, $4::bigint, $5::bigint, $6::bigint, $7::text, $8::text, ` +
    `$9::bigint, $10::json, $11::bigint, $12::bigint, $13::bigint) AS status`;
  return {
    // Below both limits, one statement: one more in the owner's count (its row locked: the
    // owner's creates queue there), one more on the connection's shard within its share of
    // maxRows, and the row; each step only if the one before it passed. A row count of 0: the
    // owner at its count, the share used up or the id taken; `create` then judges it in full.
    // (A step that passed before a later one failed leaves a count above the rows, never below:
    // create_task counts the owner again; recount_tasks the shards.)
    tryCreate: statement(
      `WITH counted AS (INSERT INTO ${schema}.owner_rows AS o (owner_hash, n) ` +
        `VALUES (${schema}.owner_hash($2::text), 1) ON CONFLICT (owner_hash) DO UPDATE ` +
        `SET n = o.n + 1 WHERE o.n < coalesce($12::bigint, 9223372036854775807) RETURNING 1), ` +
        `shard AS (UPDATE ${schema}.row_shards SET n = n + 1 ` +
        `WHERE shard = ${schema}.own_shard() ` +
        `AND ($11::bigint IS NULL OR (max_rows = $11::bigint AND n + 1 <= cap)) ` +
        `AND ($12::bigint IS NULL OR $12::bigint > 0) AND EXISTS (SELECT FROM counted) ` +
        `AND NOT EXISTS (SELECT FROM ${tasks} WHERE task_id = $1::text) RETURNING 1) ` +
        `INSERT INTO ${tasks} (task_id, owner_key, status, created_at, expires_at, terminal_at, ` +
        `held_by, tool_name, version, record) ` +
        `SELECT $1::text, $2::text, $3::text, $4::bigint, $5::bigint, $6::bigint, $7::text, ` +
        `$8::text, $9::bigint, $10::json FROM shard ` +
        `ON CONFLICT (task_id) DO NOTHING`,
    ),
    create: statement(`SELECT ${schema}.create_task${createArguments}`),
    get: statement(
      `SELECT record::text AS record FROM ${tasks} WHERE task_id = $1::text AND ${live.replace('$NOW', '$2')}`,
    ),
    // By the primary key; the owner key is then compared for equality (no index needed).
    getOwned: statement(
      `SELECT record::text AS record FROM ${tasks} ` +
        `WHERE task_id = $1::text AND owner_key = $2::text AND ${live.replace('$NOW', '$3')}`,
    ),
    compareAndSet: statement(`${compareAndSet} RETURNING 1 AS written`),
    // The same write, moving the task's hold to the instance $13 (a durable call taken over).
    compareAndSetHolding: statement(
      `${compareAndSet.replace(
        'held_by = CASE WHEN $10::boolean THEN NULL ELSE held_by END',
        'held_by = CASE WHEN $10::boolean THEN NULL ELSE $13::text END',
      )} RETURNING 1 AS written`,
    ),
    // The same write, sending its change in its own transaction (see ChangeNotice): on the
    // task's channel ($13), and on the schema's ($16) while some instance hears every change.
    // The message is the sender's tag ($14) and the record when it fits, else a reference ($15).
    compareAndSetNotifying: statement(
      `WITH written AS (${compareAndSet} RETURNING 1 AS written), ` +
        `message AS (SELECT coalesce($15::text, $14::text || $2::text) AS body) ` +
        `SELECT written, pg_notify($13::text, body), ` +
        `CASE WHEN $16::text IS NOT NULL THEN pg_notify($16::text, body) END ` +
        `FROM written, message`,
    ),
    delete: statement(`SELECT ${schema}.delete_task($1::text) AS deleted`),
    cleanup: statement(
      `SELECT ${schema}.cleanup_tasks($1::bigint, $2::bigint, $3::integer) AS removed`,
    ),
    renewLease: statement(
      `WITH ${clock}, renewed AS (` +
        `INSERT INTO ${schema}.instances (instance_id, lease_until) ` +
        `SELECT $1::text, now + $2::bigint FROM clock ` +
        `ON CONFLICT (instance_id) DO UPDATE SET lease_until = EXCLUDED.lease_until) ` +
        `SELECT i.instance_id FROM ${schema}.instances i, clock ` +
        `WHERE i.lease_until < clock.now AND i.instance_id <> $1::text`,
    ),
    heldTasks: statement(`SELECT task_id FROM ${tasks} WHERE held_by = $1::text`),
    // The UPDATE's effect is not seen by the other parts of the statement (one snapshot): the
    // tasks it releases are left out of "holds nothing else" by id.
    releaseTasks: statement(
      `WITH ${clock}, released AS (` +
        `UPDATE ${tasks} SET held_by = NULL WHERE held_by = $1::text AND task_id = ANY($2::text[])), ` +
        `settled AS (SELECT NOT EXISTS (SELECT 1 FROM ${schema}.instances, clock ` +
        `WHERE instance_id = $1::text AND lease_until > clock.now) ` +
        `AND NOT EXISTS (SELECT 1 FROM ${tasks} ` +
        `WHERE held_by = $1::text AND task_id <> ALL($2::text[])) AS forgotten), ` +
        `forgot AS (DELETE FROM ${schema}.instances ` +
        `WHERE instance_id = $1::text AND (SELECT forgotten FROM settled)) ` +
        `SELECT forgotten FROM settled`,
    ),
    releaseLease: statement(
      `WITH gone AS (DELETE FROM ${schema}.instances WHERE instance_id = $1::text) ` +
        `UPDATE ${tasks} SET held_by = NULL WHERE held_by = $1::text`,
    ),
  };
}

/**
 * The page statement of one listing shape. Parameters: $1 now, $2 entries to look at, $3 records
 * to keep at most, then the owner, the cursor's createdAt and task id, the states, the tool, each
 * when the shape has it. An owner's tasks are read by the index on its key's hash, and kept when
 * their key is equal (a task of another owner whose hash is the same is looked at, never kept).
 */
export function listingStatement(name: string, shape: ListingShape): Statement {
  const schema = quoteIdentifier(name);
  let count = 3;
  const param = (type: string): string => `$${++count}::${type}`;
  const where: string[] = [];
  const keep = ['(expires_at IS NULL OR expires_at > $1::bigint)'];
  if (shape.owner) {
    // The window is read by the hash alone, newest first from the index; the key is compared
    // among what was read. (With both in the window's WHERE the planner, taking them for
    // independent, expects one row and reads all of the owner's tasks to sort them.)
    const owner = param('text');
    where.push(`${schema}.owner_hash(owner_key) = ${schema}.owner_hash(${owner})`);
    keep.push(`owner_key = ${owner}`);
  }
  if (shape.cursor) where.push(`(created_at, task_id) < (${param('bigint')}, ${param('text')})`);
  if (shape.status) keep.push(`status = ANY(${param('text[]')})`);
  if (shape.tool) keep.push(`tool_name = ${param('text')}`);
  const last =
    `UNION ALL (SELECT task_id, created_at::text, NULL::text, count(*) OVER () ` +
    `FROM looked ORDER BY looked.created_at, looked.task_id LIMIT 1)`;
  if (!shape.status && !shape.tool) {
    // Unfiltered, the window is the page (limit + 1 entries): its records are read with it,
    // with no second look-up by id.
    return statement(
      `WITH looked AS MATERIALIZED (` +
        `SELECT task_id, created_at, expires_at, owner_key, record FROM ${schema}.tasks` +
        (where.length > 0 ? ` WHERE ${where.join(' AND ')}` : '') +
        ` ORDER BY created_at DESC, task_id DESC LIMIT $2::integer) ` +
        `(SELECT task_id, created_at::text AS created_at, record::text AS record, ` +
        `NULL::bigint AS looked FROM looked WHERE ${keep.join(' AND ')} LIMIT $3::integer) ` +
        last,
    );
  }
  const text =
    `WITH looked AS MATERIALIZED (` +
    `SELECT task_id, created_at, status, expires_at, owner_key, tool_name FROM ${schema}.tasks` +
    (where.length > 0 ? ` WHERE ${where.join(' AND ')}` : '') +
    ` ORDER BY created_at DESC, task_id DESC LIMIT $2::integer), ` +
    `kept AS (SELECT task_id FROM looked WHERE ${keep.join(' AND ')} ` +
    `ORDER BY created_at DESC, task_id DESC LIMIT $3::integer) ` +
    `SELECT t.task_id, t.created_at::text AS created_at, t.record::text AS record, ` +
    `NULL::bigint AS looked FROM kept JOIN ${schema}.tasks t ON t.task_id = kept.task_id ` +
    last;
  return statement(text);
}
