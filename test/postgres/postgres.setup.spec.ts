import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer, type Socket } from 'node:net';
import pg from 'pg';
import { TasksConfigError } from '../../src/errors.js';
import {
  POSTGRES_SCHEMA_VERSION,
  PostgresTaskStore,
  postgresSchemaSql,
} from '../../src/postgres/index.js';
import { encodeRecord, indexedFields } from '../../src/store/store-rules.js';
import { ownerKey } from '../../src/store/task-listing.js';
import { newTask, type TaskRecord } from '../../src/task.js';
import { newTaskId } from '../../src/task-id.js';
import { startTestPostgres, type TestPostgres } from '../support/postgres-server.js';

let postgres: TestPostgres;
let pool: pg.Pool;

beforeAll(async () => {
  postgres = await startTestPostgres();
  pool = new pg.Pool({ connectionString: postgres.url });
}, 60_000);
afterAll(async () => {
  await pool.end();
  await postgres.stop();
});

const task = (principal = 'alice') =>
  newTask(newTaskId(), { principal }, { ttlMs: 60_000 }, Date.now());

/** The schema's tables, functions and recorded versions, to compare before and after. */
async function layout(schema: string): Promise<unknown> {
  const tables = await pool.query(
    `SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY 1`,
    [schema],
  );
  const functions = await pool.query(
    `SELECT p.proname, md5(p.prosrc) AS body FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
     WHERE n.nspname = $1 ORDER BY 1`,
    [schema],
  );
  const versions = await pool.query(
    `SELECT version, description FROM ${schema}.schema_version ORDER BY version`,
  );
  return { tables: tables.rows, functions: functions.rows, versions: versions.rows };
}

describe('PostgresTaskStore: the schema', () => {
  it('sets the schema up on first use, records its version, and a second setup changes nothing', async () => {
    const exists = async (): Promise<boolean> =>
      (await pool.query(`SELECT 1 FROM pg_namespace WHERE nspname = 'first_use'`)).rowCount === 1;
    const store = new PostgresTaskStore({ connection: pool, schema: 'first_use' });
    expect(await exists()).toBe(false);
    const first = task();
    await store.create(first, { maxRows: null });
    expect(await exists()).toBe(true);
    const before = await layout('first_use');
    expect(before).toMatchObject({
      tables: [
        { table_name: 'instances' },
        { table_name: 'row_shards' },
        { table_name: 'schema_version' },
        { table_name: 'tasks' },
      ],
      versions: [
        { version: 1 },
        { version: 2 },
        { version: 3 },
        { version: POSTGRES_SCHEMA_VERSION },
      ],
    });
    expect(POSTGRES_SCHEMA_VERSION).toBe(4);
    // Instances that start together: each sets up, under one lock; the data stays.
    const others = Array.from(
      { length: 4 },
      () => new PostgresTaskStore({ connection: pool, schema: 'first_use' }),
    );
    await Promise.all(others.map((other) => other.ready()));
    expect(await layout('first_use')).toEqual(before);
    expect(await others[0]!.get(first.taskId)).toEqual(first);
    // The shipped SQL applied once more by hand is idempotent too.
    await pool.query(postgresSchemaSql('first_use'));
    expect(await layout('first_use')).toEqual(before);
    expect(await store.get(first.taskId)).toEqual(first);
  });

  it('with setup: false, works on the shipped SQL applied by hand', async () => {
    // As a team's own migration would: the files as shipped, with its schema's name put in.
    const sql = SHIPPED.map((name) => shipped(name).replaceAll('mcp_tasks', '"by_hand"')).join(
      '\n',
    );
    expect(sql).toBe(postgresSchemaSql('by_hand'));
    await pool.query(sql);
    const store = new PostgresTaskStore({ connection: pool, schema: 'by_hand', setup: false });
    const created = task();
    await store.create(created, { maxRows: 10, maxTasksPerOwner: 5 });
    expect(await store.get(created.taskId, { principal: 'alice' })).toEqual(created);
    expect((await store.list({ principal: 'alice' }, { limit: 10 })).tasks).toEqual([created]);
    expect(await layout('by_hand')).toMatchObject({
      versions: [{ version: 1 }, { version: 2 }, { version: 3 }, { version: 4 }],
    });
  });

  it('with setup: false on a schema never set up, refuses with what to apply, and creates nothing', async () => {
    const store = new PostgresTaskStore({ connection: pool, schema: 'never_set_up', setup: false });
    const error = await store.create(task(), { maxRows: null }).then(
      () => undefined,
      (caught: unknown) => caught,
    );
    expect(error).toBeInstanceOf(TasksConfigError);
    expect((error as Error).message).toMatch(
      /schema "never_set_up" is at version 0, this release needs 4: apply postgresSchemaSql\("never_set_up"\)/,
    );
    const found = await pool.query(`SELECT 1 FROM pg_namespace WHERE nspname = 'never_set_up'`);
    expect(found.rowCount).toBe(0);
  });

  it('refuses, when made, a schema name PostgreSQL would refuse or cut, or that could break its SQL', () => {
    for (const schema of [
      'x; DROP TABLE y',
      '',
      'a'.repeat(64),
      'pg_tasks',
      'a"b',
      'a$$b',
      'a\nb',
      'é',
      'a.b',
    ]) {
      expect(() => new PostgresTaskStore({ connection: pool, schema })).toThrow(TasksConfigError);
      expect(() => postgresSchemaSql(schema)).toThrow(TasksConfigError);
    }
    // Quoted in every statement: capitals, a dash, a leading digit, a reserved word, 63 characters.
    for (const schema of ['Tasks', 'a-b', '1x', 'user', 'a'.repeat(63)]) {
      expect(new PostgresTaskStore({ connection: pool, schema }).schema).toBe(schema);
    }
  });
});

/** The shipped schema files, in order. */
const SHIPPED = [
  '001-initial.sql',
  '002-owner-hash.sql',
  '003-create-without-hot-row.sql',
  '004-create-in-one-pass.sql',
];
const shipped = (name: string): string =>
  readFileSync(new URL(`../../src/postgres/schema/${name}`, import.meta.url), 'utf8');

describe('PostgresTaskStore: the upgrade from version 1', () => {
  const alice = { principal: 'alice' };
  /** Makes `schema` as version 1 made it, with `count` tasks of alice created as version 1 did. */
  async function versionOne(schema: string, count: number): Promise<TaskRecord[]> {
    await pool.query(shipped('001-initial.sql').replaceAll('mcp_tasks', schema));
    const now = Date.now();
    const tasks = Array.from({ length: count }, (_, i) =>
      newTask(newTaskId(), alice, { ttlMs: 60_000 }, now - count + i),
    );
    for (const record of tasks) {
      const fields = indexedFields(record);
      // The very call version 1's create made.
      await pool.query(
        `SELECT ${schema}.create_task($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
        [
          record.taskId,
          fields.ownerKey,
          record.status,
          record.createdAt,
          fields.expiresAt,
          fields.terminalAt,
          fields.heldBy,
          fields.toolName,
          record.version,
          encodeRecord(record),
          now,
          null,
          null,
        ],
      );
    }
    return tasks;
  }

  const indexes = async (schema: string): Promise<string[]> =>
    (
      await pool.query(
        `SELECT indexname FROM pg_indexes WHERE schemaname = $1 AND tablename = 'tasks' ORDER BY 1`,
        [schema],
      )
    ).rows.map((row: { indexname: string }) => row.indexname);

  it('is applied in place on first use: the tasks stay, are found by owner, and count for the quota', async () => {
    const old = await versionOne('upgraded', 3);
    expect(await indexes('upgraded')).toContain('tasks_owner_created');
    const store = new PostgresTaskStore({ connection: pool, schema: 'upgraded' });
    expect((await store.list(alice, { limit: 10 })).tasks).toEqual([...old].reverse());
    expect(await layout('upgraded')).toMatchObject({
      versions: [{ version: 1 }, { version: 2 }, { version: 3 }, { version: 4 }],
    });
    expect(await indexes('upgraded')).toEqual([
      'tasks_created',
      'tasks_expiry',
      'tasks_held',
      'tasks_owner_hash_created',
      'tasks_owner_hash_finished',
      'tasks_pkey',
      'tasks_terminal',
    ]);
    expect(await store.get(old[0]!.taskId, alice)).toEqual(old[0]);
    expect(await store.get(old[0]!.taskId, { principal: 'bob' })).toBeNull();
    // The three old tasks count: a fourth is over a quota of 3, and none is finished to make room.
    await expect(store.create(task(), { maxRows: null, maxTasksPerOwner: 3 })).rejects.toThrow(
      /quota|3/i,
    );
    // A finished old task makes room, found by the new finished-tasks index.
    const done = { ...old[0]!, status: 'completed' as const, version: 2 };
    expect(await store.compareAndSet(done, 1)).toBe(true);
    const fourth = task();
    await store.create(fourth, { maxRows: null, maxTasksPerOwner: 3 });
    expect(await store.get(old[0]!.taskId)).toBeNull();
    // An owner version 1 could not index.
    const long = { principal: randomBytes(6_000).toString('base64url') };
    const longs = task(long.principal);
    await store.create(longs, { maxRows: null, maxTasksPerOwner: 3 });
    expect((await store.list(long, { limit: 10 })).tasks).toEqual([longs]);
    expect((await store.list(alice, { limit: 10 })).tasks).toHaveLength(3);
    // Setting up again finds the work done; setup: false finds the version it needs.
    const before = await layout('upgraded');
    await new PostgresTaskStore({ connection: pool, schema: 'upgraded' }).ready();
    expect(await layout('upgraded')).toEqual(before);
    await new PostgresTaskStore({ connection: pool, schema: 'upgraded', setup: false }).ready();
  });

  it('with setup: false, a version-1 schema is refused with what to apply', async () => {
    await versionOne('left_at_one', 1);
    const store = new PostgresTaskStore({ connection: pool, schema: 'left_at_one', setup: false });
    await expect(store.ready()).rejects.toThrow(
      /schema "left_at_one" is at version 1, this release needs 4: apply postgresSchemaSql\("left_at_one"\)/,
    );
  });

  it("an owner's page walks the index of the owner's hash newest first; the quota counts by it", async () => {
    const one = new pg.Pool({ connectionString: postgres.url, max: 1 });
    try {
      const store = new PostgresTaskStore({ connection: one, schema: 'planned' });
      await store.ready();
      // 20 owners of 200 tasks each, as the store writes their rows, and the planner's statistics.
      await one.query(
        `INSERT INTO planned.tasks (task_id, owner_key, status, created_at, expires_at, version, record)
         SELECT 'id' || g, length('owner-' || g % 20) || ':owner-' || g % 20 || '-', 'working',
           g, NULL, 1, '{}'::json FROM generate_series(1, 4000) g;
         ANALYZE planned.tasks`,
      );
      const owner = { principal: 'owner-7' };
      expect((await store.list(owner, { limit: 10 })).tasks).toHaveLength(10);
      const { rows } = await one.query(
        `SELECT name FROM pg_prepared_statements WHERE statement LIKE '%owner_hash%'`,
      );
      expect(rows).toHaveLength(1);
      const plan = await one.query(
        `EXPLAIN EXECUTE ${rows[0].name}(${Date.now()}, 11, 11, '${ownerKey(owner)}')`,
      );
      const text = plan.rows.map((row: Record<string, string>) => row['QUERY PLAN']).join('\n');
      // 11 entries from the index, not all 200 of the owner's tasks read and sorted.
      expect(text).toMatch(/Index Scan Backward using tasks_owner_hash_created /);
      expect(text).not.toMatch(/Sort Key: tasks\.created_at DESC/);
      // create_task's count of the owner's live tasks, as the function writes it.
      const count = await one.query(
        `EXPLAIN SELECT count(*) FROM planned.tasks
         WHERE planned.owner_hash(owner_key) = planned.owner_hash($1) AND owner_key = $1`.replaceAll(
          '$1',
          `'${ownerKey(owner)}'`,
        ),
      );
      expect(count.rows.map((row: Record<string, string>) => row['QUERY PLAN']).join('\n')).toMatch(
        /tasks_owner_hash_created/,
      );
    } finally {
      await one.end();
    }
  });
});

describe('PostgresTaskStore: the upgrade from version 2', () => {
  /** The call every release's create makes (its arguments have not changed since version 1). */
  const createCall = (schema: string, record: TaskRecord, maxRows: number | null) => {
    const fields = indexedFields(record);
    return pool.query(
      `SELECT ${schema}.create_task($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) AS s`,
      [
        record.taskId,
        fields.ownerKey,
        record.status,
        record.createdAt,
        fields.expiresAt,
        fields.terminalAt,
        fields.heldBy,
        fields.toolName,
        record.version,
        encodeRecord(record),
        Date.now(),
        maxRows,
        100,
      ],
    );
  };
  const rows = async (schema: string): Promise<number> =>
    Number((await pool.query(`SELECT sum(n) AS n FROM ${schema}.row_shards`)).rows[0].n);

  it("counts version 2's tasks into the shards, drops counts, and the previous release's create is counted", async () => {
    const schema = 'from_two';
    await pool.query(
      SHIPPED.slice(0, 2)
        .map((name) => shipped(name))
        .join('\n')
        .replaceAll('mcp_tasks', schema),
    );
    for (let i = 0; i < 5; i++) await createCall(schema, task(`owner-${i}`), null);
    const store = new PostgresTaskStore({ connection: pool, schema });
    await store.ready();
    expect(await layout(schema)).toMatchObject({
      tables: [
        { table_name: 'instances' },
        { table_name: 'row_shards' },
        { table_name: 'schema_version' },
        { table_name: 'tasks' },
      ],
      versions: [{ version: 1 }, { version: 2 }, { version: 3 }, { version: 4 }],
    });
    expect(await rows(schema)).toBe(5);
    // The previous release still running calls the same function: now version 3's, counted.
    expect((await createCall(schema, task('old-release'), 7)).rows[0].s).toBe(1);
    await store.create(task('new-release'), { maxRows: 7 });
    expect(await rows(schema)).toBe(7);
    await expect(store.create(task('one-more'), { maxRows: 7 })).rejects.toThrow(/full/i);
    expect((await createCall(schema, task('old-release'), 7)).rows[0].s).toBe(0);
    expect(await rows(schema)).toBe(7);
  });
});

describe('PostgresTaskStore: the upgrade from version 3', () => {
  it("adds try_create_task beside create_task: both releases' creates count alike", async () => {
    const schema = 'from_three';
    await pool.query(
      SHIPPED.slice(0, 3)
        .map((name) => shipped(name))
        .join('\n')
        .replaceAll('mcp_tasks', schema),
    );
    // The previous release's create: create_task, with maxRows 4 and maxTasksPerOwner 2.
    const fields = (record: TaskRecord): unknown[] => {
      const indexed = indexedFields(record);
      return [
        record.taskId,
        indexed.ownerKey,
        record.status,
        record.createdAt,
        indexed.expiresAt,
        indexed.terminalAt,
        indexed.heldBy,
        indexed.toolName,
        record.version,
        encodeRecord(record),
        Date.now(),
        4,
        2,
      ];
    };
    const call = async (record: TaskRecord): Promise<number> =>
      (
        await pool.query(
          `SELECT ${schema}.create_task($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) AS s`,
          fields(record),
        )
      ).rows[0].s;
    expect(await call(task('alice'))).toBe(1);
    const store = new PostgresTaskStore({ connection: pool, schema });
    await store.ready();
    expect(await layout(schema)).toMatchObject({
      versions: [{ version: 1 }, { version: 2 }, { version: 3 }, { version: 4 }],
    });
    // The new release's creates and the previous release's share the quota (2) and maxRows (4).
    await store.create(task('alice'), { maxRows: 4, maxTasksPerOwner: 2 });
    expect(await call(task('alice'))).toBe(-2);
    await expect(store.create(task('alice'), { maxRows: 4, maxTasksPerOwner: 2 })).rejects.toThrow(
      /quota|limit/i,
    );
    expect(await call(task('bob'))).toBe(1);
    await store.create(task('carol'), { maxRows: 4, maxTasksPerOwner: 2 });
    expect(await call(task('dave'))).toBe(0);
    await expect(store.create(task('erin'), { maxRows: 4, maxTasksPerOwner: 2 })).rejects.toThrow(
      /full/i,
    );
    // A taken id: refused by either, nothing written.
    const taken = task('bob');
    await pool.query(`DELETE FROM ${schema}.tasks WHERE owner_key LIKE '%carol%'`);
    await pool.query(`SELECT ${schema}.recount_tasks()`);
    await store.create(taken, { maxRows: 4, maxTasksPerOwner: 2 });
    await expect(store.create(taken, { maxRows: 4, maxTasksPerOwner: 2 })).rejects.toThrow(
      /already exists/,
    );
    expect(await call(taken)).toBe(-1);
    expect(
      Number((await pool.query(`SELECT sum(n) AS n FROM ${schema}.row_shards`)).rows[0].n),
    ).toBe(4);
  });
});

describe('PostgresTaskStore: connections and schemas', () => {
  it("uses the app's own pool and leaves it open", async () => {
    const own = new pg.Pool({ connectionString: postgres.url, max: 2 });
    try {
      const store = new PostgresTaskStore({ connection: own, schema: 'own_pool' });
      expect(store.pool).toBe(own);
      const created = task();
      await store.create(created, { maxRows: null });
      expect(own.totalCount).toBeGreaterThan(0);
      await store.onApplicationShutdown();
      expect(own.ended).toBe(false);
      expect((await own.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
      expect(
        await new PostgresTaskStore({ connection: own, schema: 'own_pool' }).get(created.taskId),
      ).toEqual(created);
    } finally {
      await own.end();
    }
  });

  it("bounds every call on the app's pool by timeoutMs, also a wait for a connection that never comes", async () => {
    // A server that accepts connections and never answers: the pool's connect waits forever.
    const sockets: Socket[] = [];
    const silent = createServer((socket) => void sockets.push(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const { port } = silent.address() as { port: number };
    const stuck = new pg.Pool({
      connectionString: `postgres://postgres@127.0.0.1:${port}/postgres`,
    });
    try {
      const store = new PostgresTaskStore({ connection: stuck, schema: 'stuck', timeoutMs: 200 });
      for (const call of [store.get('abc'), store.ping()]) {
        const error = await call.then(
          () => undefined,
          (caught: unknown) => caught,
        );
        // Bounded, and naming where PostgreSQL was sought.
        expect((error as Error).message).toContain(
          `PostgresTaskStore could not reach PostgreSQL at 127.0.0.1:${port}/postgres ` +
            '(PostgreSQL did not answer within 200 ms)',
        );
      }
    } finally {
      for (const socket of sockets) socket.destroy();
      await stuck.end().catch(() => undefined);
      await new Promise((resolve) => silent.close(resolve));
    }
  });

  it('ends the pool it made from a connection string, once', async () => {
    const store = new PostgresTaskStore({ connection: postgres.url, schema: 'made_pool' });
    await store.ping();
    expect(store.pool.ended).toBe(false);
    await Promise.all([store.onApplicationShutdown(), store.onApplicationShutdown()]);
    expect(store.pool.ended).toBe(true);
  });

  it('two schemas are two stores: tasks, listings, counts and leases do not cross', async () => {
    const a = new PostgresTaskStore({ connection: pool, schema: 'isolated_a' });
    const b = new PostgresTaskStore({ connection: pool, schema: 'isolated_b' });
    const owner = { principal: 'alice' };
    const inA = { ...task(), heldBy: 'i1' };
    await a.create(inA, { maxRows: 1, maxTasksPerOwner: 1 });
    expect(await b.get(inA.taskId)).toBeNull();
    expect(await b.delete(inA.taskId)).toBe(false);
    expect((await b.list(owner, { limit: 10 })).tasks).toEqual([]);
    expect((await b.listAll({ limit: 10 })).tasks).toEqual([]);
    expect(await b.heldTasks('i1')).toEqual([]);
    // A's maxRows and quota of 1 are A's: B takes a task of the same owner and id.
    await b.create(inA, { maxRows: 1, maxTasksPerOwner: 1 });
    expect(await b.compareAndSet({ ...inA, statusMessage: 'b', version: 2 }, 1)).toBe(true);
    expect(await a.get(inA.taskId)).toEqual(inA);
    expect(await a.cleanup(Date.now() + 3_600_000, { terminalTtlMs: 0 })).toBe(1);
    expect(await b.get(inA.taskId)).toMatchObject({ statusMessage: 'b' });
  });
});

describe('PostgresTaskStore: prepared statements', () => {
  /** The statements prepared on the one connection of a pool of one. */
  const prepared = async (one: pg.Pool): Promise<number> =>
    Number((await one.query('SELECT count(*) AS n FROM pg_prepared_statements')).rows[0].n);

  it.each([
    [true, 'prepares each statement once per connection'],
    [false, 'with preparedStatements: false, prepares none (for a pooler in transaction mode)'],
  ])('%s: %s', async (preparedStatements) => {
    const one = new pg.Pool({ connectionString: postgres.url, max: 1 });
    try {
      const store = new PostgresTaskStore({
        connection: one,
        schema: 'prepared',
        preparedStatements,
      });
      const created = task();
      await store.create(created, { maxRows: null });
      expect(await store.get(created.taskId)).toEqual(created);
      expect(await store.get(created.taskId)).toEqual(created);
      expect(await prepared(one)).toBe(preparedStatements ? 2 : 0);
    } finally {
      await one.end();
    }
  });
});
