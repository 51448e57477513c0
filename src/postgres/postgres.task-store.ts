import type { OnApplicationShutdown } from '@nestjs/common';
import type { Pool, QueryConfig, QueryResult, QueryResultRow } from 'pg';
import {
  checkCreated,
  createLimits,
  decodeRecord,
  encodeRecord,
  indexedFields,
  removeInBatches,
} from '../store/store-rules.js';
import {
  cursorKey,
  endPage,
  listingKey,
  newestFirst,
  ownerKey,
  placeOfKey,
  statusFilter,
} from '../store/task-listing.js';
import type {
  TaskListPage,
  TaskStore,
  TaskStoreCleanupOptions,
  TaskStoreCreateOptions,
  TaskStoreLeases,
  TaskStoreListAllOptions,
  TaskStoreListOptions,
  TaskStoreWriteOptions,
} from '../store/task-store.js';
import { inlineJson } from '../notify/change-message.js';
import type { TaskOwner, TaskRecord } from '../task.js';
import {
  connectPool,
  type PostgresConnectionOptions,
  postgresFault,
  schemaOf,
  timeoutOf,
  within,
} from './postgres-connection.js';
import { checkSchema, postgresSchemaSql, setUpSchema } from './postgres-schema.js';
import {
  listingStatement,
  type ListingShape,
  type Statement,
  statements,
  type TaskStatements,
  textOf,
} from './postgres-statements.js';
import { couldBeTaskId } from '../task-id.js';

export interface PostgresTaskStoreOptions extends PostgresConnectionOptions {
  /**
   * Create or upgrade the schema on first use (default true): idempotent, and safe with several
   * instances starting at once. `false` for a team that applies the shipped SQL itself
   * (`postgresSchemaSql`); the store then only checks the recorded version on first use.
   */
  setup?: boolean;
  /**
   * Prepare each statement once per connection (default true: PostgreSQL then parses and plans it
   * once). `false` sends every statement unnamed, for a connection pooler in transaction mode
   * that cannot keep prepared statements across transactions (PgBouncer before 1.21).
   */
  preparedStatements?: boolean;
}

/**
 * Index entries a filtered page (by status or tool) looks at most: a filter that matches few tasks
 * ends the page there, short, with a cursor to go on.
 */
const FILTERED_LOOKS = 1_000;

/** Expired or finished rows one cleanup call removes at most of each (it calls again while full). */
const CLEANUP_BATCH = 1_000;

/**
 * What a write needs to send its task's change the way PostgresTaskNotifier sends it (see
 * change-message.ts): the task's channel, the sender's tag, the message of a record too large to
 * carry, and the channel of every change while some instance hears them all (else null).
 */
export interface ChangeNotice {
  channelOf(taskId: string): string;
  readonly origin: string;
  reference(record: TaskRecord): string;
  everyChange(): string | null;
}

/**
 * What PostgreSQL answers when it refuses a `pg_notify`: its notification queue full (54000), a
 * payload or channel name it does not take (22023).
 */
const NOTIFY_REFUSALS = new Set(['54000', '22023']);

const rowsOf = <R extends QueryResultRow>(result: QueryResult<R>): R[] => result.rows;
const rowCountOf = (result: QueryResult): number => result.rowCount ?? 0;

/**
 * The TaskStore on PostgreSQL (node-postgres 8), for instances that share a database the app
 * already runs.
 *
 * - One row per task in `<schema>.tasks`: the record as JSON, and beside it what the statements
 *   filter and order by (owner, status, creation, expiry, when it finished, holder, tool). The
 *   owner and tool are kept as `textOf` gives them, so any string works (a NUL, half a surrogate
 *   pair); the record keeps them as they are. The schema's name is quoted in every statement.
 * - Every operation is one round trip: a statement, or a function of the schema where the work
 *   needs several statements each with a fresh snapshot (`delete_task`, `cleanup_tasks`); a
 *   create at the owner's count or at a used-up share of `maxRows` takes a second
 *   (`create_task`). Statements are prepared on each connection on first use.
 * - `create` counts rows (`maxRows`) in `<schema>.row_shards`: the row of its connection's shard,
 *   within that shard's share of `maxRows` (the shares add up to it), so creates on different
 *   connections never wait on each other; a used-up share is judged and shared again under every
 *   shard. The owner's quota is counted in `<schema>.owner_rows`, a row per owner whose lock queues
 *   that owner's creates alone; at the quota its finished task that expires first is deleted to
 *   make room. Both limits hold exactly under concurrency.
 * - An owner-scoped `get` compares the owner in the statement's WHERE: another owner's task is
 *   never sent, so it answers as a missing one does.
 * - `compareAndSet` is `UPDATE … WHERE version = $expected`: two instances racing on one task
 *   cannot both win; a task written terminal stops being held in the same statement.
 * - Listing reads an index by owner and creation (or by creation for `listAll`) with keyset
 *   cursors; a status or tool filter looks at a bounded window of entries per page. The owner's
 *   index holds a 16-byte hash of its key (`<schema>.owner_hash`), so a key of any length fits,
 *   and the key itself is compared for equality.
 * - A task id with a NUL (no stored id has one) is unknown without a query.
 * - Leases: `<schema>.instances` holds each instance's lease on PostgreSQL's clock; a task's
 *   `held_by` names the instance that holds it.
 */
export class PostgresTaskStore implements TaskStore, TaskStoreLeases, OnApplicationShutdown {
  readonly pool: Pool;
  /** The schema of its tables and functions. */
  readonly schema: string;
  /** `list` and `listAll` filter by status themselves. */
  readonly listsByStatus: boolean = true;
  private readonly owned: boolean;
  private readonly timeoutMs: number;
  private readonly setup: boolean;
  private readonly prepared: boolean;
  /** How a write sends its change, once a notifier asked (see `sendChanges`). */
  private notice: ChangeNotice | undefined;
  /** The records whose own write sent their change, for the notifier not to send them again. */
  private readonly sentChanges = new WeakSet<TaskRecord>();
  private readying: Promise<void> | undefined;
  /** Set once the schema is set up (or checked): calls then go straight to the pool. */
  private isReady = false;
  private readonly sql: TaskStatements;
  private readonly listings = new Map<string, Statement>();

  constructor(options: PostgresTaskStoreOptions) {
    if (options === null || typeof options !== 'object') {
      throw new TypeError('PostgresTaskStore needs options: { connection, schema? }');
    }
    this.schema = schemaOf(options, 'PostgresTaskStore');
    this.timeoutMs = timeoutOf(options, 'PostgresTaskStore');
    this.setup = options.setup ?? true;
    // The shipped SQL is read now, so a package missing its schema files fails at startup with
    // a TasksConfigError rather than at the first request.
    if (this.setup) postgresSchemaSql(this.schema);
    this.prepared = options.preparedStatements ?? true;
    ({ pool: this.pool, owned: this.owned } = connectPool(
      options,
      'PostgresTaskStore',
      this.timeoutMs,
    ));
    this.sql = statements(this.schema);
  }

  /**
   * Sets up (or checks) the schema, once; the first operation waits for it. A failure (PostgreSQL
   * away) fails that operation, and the next one tries again.
   */
  ready(): Promise<void> {
    this.readying ??= (
      this.setup ? setUpSchema(this.pool, this.schema) : checkSchema(this.pool, this.schema)
    ).then(
      () => {
        this.isReady = true;
      },
      (error: unknown) => {
        this.readying = undefined;
        throw error;
      },
    );
    return this.readying;
  }

  /**
   * Runs one statement (after the setup, once). With the app's own pool the whole call is bounded
   * by `timeoutMs` here, since its wait for a connection is the app's to configure. Once the
   * schema is ready this is the pool's own promise and one `then`: a get or a create pays no
   * further turn of the microtask queue than plain `pg` does.
   */
  private run<R extends QueryResultRow>(statement: Statement, values: unknown[]): Promise<R[]> {
    return this.bounded<R>(statement, values).then(rowsOf, this.fault);
  }

  /** Runs one statement as `run` does, and answers how many rows it wrote. */
  private write(statement: Statement, values: unknown[]): Promise<number> {
    return this.bounded(statement, values).then(rowCountOf, this.fault);
  }

  /** The statement's result, bounded as `run` says. */
  private bounded<R extends QueryResultRow>(
    statement: Statement,
    values: unknown[],
  ): Promise<QueryResult<R>> {
    const result = this.isReady
      ? this.send<R>(statement, values)
      : this.ready().then(() => this.send<R>(statement, values));
    return this.owned ? result : within(result, this.timeoutMs);
  }

  /** A failure of a call, naming where PostgreSQL was sought (see `postgresFault`). */
  private readonly fault = (error: unknown): never => {
    throw postgresFault(this.pool, 'PostgresTaskStore', error);
  };

  /** The statement on the pool: prepared under its name, unless `preparedStatements` is off. */
  private send<R extends QueryResultRow>(
    { name, text }: Statement,
    values: unknown[],
  ): Promise<QueryResult<R>> {
    const config = this.prepared
      ? { name, text, values, query_timeout: this.timeoutMs }
      : { text, values, query_timeout: this.timeoutMs };
    return this.pool.query<R>(config as QueryConfig);
  }

  /**
   * A create below both limits is one statement that writes the owner's count, the shard's and
   * the row (`tryCreate`). One that stored nothing (the owner at its count, the connection's share
   * of `maxRows` used up, the id taken) is judged in full by `create_task`, a second round trip,
   * which answers what store-rules' create outcomes name (see the schema file).
   */
  async create(record: TaskRecord, options: TaskStoreCreateOptions): Promise<void> {
    const fields = indexedFields(record);
    const { maxRows, quota } = createLimits(options);
    const values = [
      record.taskId,
      textOf(fields.ownerKey),
      record.status,
      record.createdAt,
      fields.expiresAt,
      fields.terminalAt,
      fields.heldBy,
      fields.toolName === null ? null : textOf(fields.toolName),
      record.version,
      encodeRecord(record),
      maxRows,
      quota,
    ];
    if ((await this.write(this.sql.tryCreate, values)) === 1) return;
    values.push(Date.now());
    const [row] = await this.run<{ status: number }>(this.sql.create, values);
    checkCreated(row?.status, options);
  }

  /**
   * One statement; with `owner`, its key is compared in the WHERE, so another owner's record is
   * neither sent nor parsed and answers like a missing id.
   */
  async get(taskId: string, owner?: TaskOwner): Promise<TaskRecord | null> {
    if (!couldBeTaskId(taskId)) return null;
    const rows =
      owner === undefined
        ? await this.run<{ record: string }>(this.sql.get, [taskId, Date.now()])
        : await this.run<{ record: string }>(this.sql.getOwned, [
            taskId,
            textOf(ownerKey(owner)),
            Date.now(),
          ]);
    const row = rows[0];
    return row === undefined ? null : decodeRecord(row.record);
  }

  async compareAndSet(
    record: TaskRecord,
    expectedVersion: number,
    options?: TaskStoreWriteOptions,
  ): Promise<boolean> {
    if (!couldBeTaskId(record.taskId)) return false;
    const fields = indexedFields(record);
    const json = encodeRecord(record);
    const values: unknown[] = [
      record.taskId,
      json,
      record.version,
      record.status,
      textOf(fields.ownerKey),
      record.createdAt,
      fields.expiresAt,
      fields.terminalAt,
      fields.toolName === null ? null : textOf(fields.toolName),
      fields.terminal,
      expectedVersion,
      Date.now(),
    ];
    if (options?.hold === true && record.heldBy !== undefined) {
      // Taken over, the task is held by its new instance (a rare write: the notifier, not this
      // statement, sends its change).
      values.push(record.heldBy);
      return (await this.run(this.sql.compareAndSetHolding, values)).length === 1;
    }
    const notice = this.notice;
    if (notice === undefined || record.version === 1 || options?.quiet === true) {
      return (await this.run(this.sql.compareAndSet, values)).length === 1;
    }
    const { origin } = notice;
    const inline = inlineJson(origin, record, json) !== undefined;
    values.push(
      notice.channelOf(record.taskId),
      origin,
      inline ? null : notice.reference(record),
      notice.everyChange(),
    );
    let rows: QueryResultRow[];
    try {
      rows = (await this.bounded(this.sql.compareAndSetNotifying, values)).rows;
    } catch (error) {
      // PostgreSQL refused the NOTIFY itself (its notification queue full, a payload or channel
      // it does not take), and with it the write: the write goes alone, and the notifier sends
      // the change as a statement of its own (its failures are kept and sent again).
      if (!NOTIFY_REFUSALS.has((error as { code?: unknown })?.code as string)) this.fault(error);
      return (await this.run(this.sql.compareAndSet, values.slice(0, 12))).length === 1;
    }
    const written = rows.length === 1;
    if (written) this.sentChanges.add(record);
    return written;
  }

  /**
   * Makes each write of a task send its change in its own statement (one round trip, one commit,
   * and no change lost between the two): what a PostgresTaskNotifier on the same database and
   * schema asks of the module's store. A new task (version 1) sends none, as the notifier's own.
   */
  sendChanges(notice: ChangeNotice): void {
    this.notice = notice;
  }

  /** Whether the write of this very record sent its change (see `sendChanges`). */
  sentChange(record: TaskRecord): boolean {
    return this.sentChanges.has(record);
  }

  async delete(taskId: string): Promise<boolean> {
    if (!couldBeTaskId(taskId)) return false;
    const [row] = await this.run<{ deleted: boolean }>(this.sql.delete, [taskId]);
    return row?.deleted === true;
  }

  /** A call per batch of CLEANUP_BATCH rows of each kind, until a batch comes back short. */
  async cleanup(now: number, options: TaskStoreCleanupOptions): Promise<number> {
    return removeInBatches(CLEANUP_BATCH, async () => {
      const [row] = await this.run<{ removed: string }>(this.sql.cleanup, [
        now,
        now - options.terminalTtlMs,
        CLEANUP_BATCH,
      ]);
      return Number(row?.removed ?? 0);
    });
  }

  async list(owner: TaskOwner, options: TaskStoreListOptions): Promise<TaskListPage> {
    return this.page(textOf(ownerKey(owner)), options, undefined);
  }

  async listAll(options: TaskStoreListAllOptions): Promise<TaskListPage> {
    return this.page(
      undefined,
      options,
      options.toolName === undefined ? undefined : textOf(options.toolName),
    );
  }

  /**
   * One page in one statement (`owner` and `toolName` as `textOf` keeps them): the index entries
   * after the cursor (at most `limit + 1` unfiltered, FILTERED_LOOKS with a filter), the records
   * of the first `limit + 1` that are live and pass the filters, and the last entry looked at with
   * the number looked at. More than `limit` records: the page ends at its last task. Fewer, with
   * the window full: it goes on after the last entry looked at.
   */
  private async page(
    owner: string | undefined,
    options: TaskStoreListOptions,
    toolName: string | undefined,
  ): Promise<TaskListPage> {
    const cursor = cursorKey(options);
    const after = cursor === undefined ? undefined : placeOfKey(cursor);
    const states = statusFilter(options.status);
    const { limit } = options;
    const filtered = states !== undefined || toolName !== undefined;
    const window = filtered ? Math.max(limit + 1, FILTERED_LOOKS) : limit + 1;
    const shape: ListingShape = {
      owner: owner !== undefined,
      cursor: after !== undefined,
      status: states !== undefined,
      tool: toolName !== undefined,
    };
    const values: unknown[] = [Date.now(), window, limit + 1];
    if (owner !== undefined) values.push(owner);
    if (after !== undefined) values.push(after.createdAt, after.taskId);
    if (states !== undefined) values.push([...states]);
    if (toolName !== undefined) values.push(toolName);
    const rows = await this.run<{
      task_id: string;
      created_at: string;
      record: string | null;
      looked: string | null;
    }>(this.listing(shape), values);
    let edge: { createdAt: number; taskId: string } | undefined;
    let looked = 0;
    const kept: TaskRecord[] = [];
    for (const row of rows) {
      if (row.looked !== null) {
        edge = { createdAt: Number(row.created_at), taskId: row.task_id };
        looked = Number(row.looked);
      } else if (row.record !== null) {
        kept.push(decodeRecord(row.record));
      }
    }
    // The rows come in join order; task ids sort alike in JS and in the C collation (ASCII).
    kept.sort(newestFirst);
    return endPage(
      kept,
      limit,
      edge !== undefined && looked >= window ? listingKey(edge) : undefined,
    );
  }

  /** The statement of one listing shape, made on first use. */
  private listing(shape: ListingShape): Statement {
    const key = `${+shape.owner}${+shape.cursor}${+shape.status}${+shape.tool}`;
    let found = this.listings.get(key);
    if (found === undefined) this.listings.set(key, (found = listingStatement(this.schema, shape)));
    return found;
  }

  /** Renews on PostgreSQL's clock, in the statement that finds the leases run out. */
  async renewLease(instanceId: string, ttlMs: number): Promise<string[]> {
    const rows = await this.run<{ instance_id: string }>(this.sql.renewLease, [instanceId, ttlMs]);
    return rows.map((row) => row.instance_id);
  }

  async heldTasks(instanceId: string): Promise<string[]> {
    const rows = await this.run<{ task_id: string }>(this.sql.heldTasks, [instanceId]);
    return rows.map((row) => row.task_id);
  }

  async releaseTasks(instanceId: string, taskIds: readonly string[]): Promise<boolean> {
    const [row] = await this.run<{ forgotten: boolean }>(this.sql.releaseTasks, [
      instanceId,
      [...taskIds],
    ]);
    return row?.forgotten === true;
  }

  async releaseLease(instanceId: string): Promise<void> {
    await this.run(this.sql.releaseLease, [instanceId]);
  }

  /** `SELECT 1`, bounded by `timeoutMs`; it does not set the schema up. */
  async ping(): Promise<void> {
    const pong = this.pool.query({
      text: 'SELECT 1',
      query_timeout: this.timeoutMs,
    } as QueryConfig);
    await (this.owned ? pong : within(pong, this.timeoutMs)).then(undefined, this.fault);
  }

  private closing: Promise<void> | undefined;

  /** Ends the pool the store made (not the app's own). Idempotent. */
  onApplicationShutdown(): Promise<void> {
    this.closing ??= this.owned ? this.pool.end() : Promise.resolve();
    return this.closing;
  }
}
