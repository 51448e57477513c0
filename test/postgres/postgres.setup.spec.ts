import { readFileSync } from 'node:fs';
import { createServer, type Socket } from 'node:net';
import pg from 'pg';
import { TasksConfigError } from '../../src/errors.js';
import {
  POSTGRES_SCHEMA_VERSION,
  PostgresTaskStore,
  postgresSchemaSql,
} from '../../src/postgres/index.js';
import {
  checkSchema,
  MIGRATIONS,
  type Migration,
  setUpSchema,
} from '../../src/postgres/postgres-schema.js';
import { ownerKey } from '../../src/store/task-listing.js';
import { newTask } from '../../src/task.js';
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
        { table_name: 'owner_rows' },
        { table_name: 'row_shards' },
        { table_name: 'schema_version' },
        { table_name: 'tasks' },
      ],
      versions: [{ version: POSTGRES_SCHEMA_VERSION }],
    });
    expect(POSTGRES_SCHEMA_VERSION).toBe(1);
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
      versions: [{ version: 1 }],
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
      /schema "never_set_up" is at version 0, this release needs 1: apply postgresSchemaSql\("never_set_up"\)/,
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
const SHIPPED = ['001-initial.sql'];
const shipped = (name: string): string =>
  readFileSync(new URL(`../../src/postgres/schema/${name}`, import.meta.url), 'utf8');

describe('PostgresTaskStore: the indexes', () => {
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
  it('a renewal finds the leases that ran out by an index, however many parked tasks hold leases', async () => {
    const one = new pg.Pool({ connectionString: postgres.url, max: 1 });
    try {
      const store = new PostgresTaskStore({ connection: one, schema: 'leased' });
      await store.ready();
      // 20,000 parked tasks' leases, running out over the next hours, and the planner's statistics.
      await one.query(
        `INSERT INTO leased.instances (instance_id, lease_until)
         SELECT 'park:' || g, ${Date.now()} + 3600000 + g FROM generate_series(1, 20000) g;
         ANALYZE leased.instances`,
      );
      expect(await store.renewLease('me', 30_000)).toEqual([]);
      const { rows } = await one.query(
        `SELECT name FROM pg_prepared_statements WHERE statement LIKE '%lease_until < clock.now%'`,
      );
      expect(rows).toHaveLength(1);
      const plan = await one.query(`EXPLAIN EXECUTE ${rows[0].name}('me', 30000)`);
      const text = plan.rows.map((row: Record<string, string>) => row['QUERY PLAN']).join('\n');
      // The expired ones from the index, not all 20,000 rows read.
      expect(text).toMatch(/instances_lease_until/);
      expect(text).not.toMatch(/Seq Scan on instances i/);
    } finally {
      await one.end();
    }
  });
});

describe('PostgresTaskStore: the upgrade to a next version (synthetic, test/postgres/schema-next)', () => {
  const alice = { principal: 'alice' };
  const next = new URL('./schema-next/', import.meta.url);
  /** The shipped versions and a synthetic version 2 that builds an index over the tasks there. */
  const toTwo: Migration[] = [...MIGRATIONS, { version: 2, file: '002-next.sql', dir: next }];
  const indexes = async (schema: string): Promise<string[]> =>
    (
      await pool.query(
        `SELECT indexname FROM pg_indexes WHERE schemaname = $1 AND tablename = 'tasks' ORDER BY 1`,
        [schema],
      )
    ).rows.map((row: { indexname: string }) => row.indexname);

  it('applies the versions above the recorded one in place, once, under one lock: the tasks stay', async () => {
    const schema = 'upgraded';
    const store = new PostgresTaskStore({ connection: pool, schema });
    const now = Date.now();
    const old = [0, 1, 2].map((i) => newTask(newTaskId(), alice, { ttlMs: 60_000 }, now - 3 + i));
    for (const record of old) await store.create(record, { maxRows: 10, maxTasksPerOwner: 3 });
    expect(await indexes(schema)).not.toContain('tasks_tool');
    // Instances of the next release that start together: one applies version 2, the rest wait
    // for it and find the work done.
    await Promise.all(Array.from({ length: 4 }, () => setUpSchema(pool, schema, toTwo)));
    const after = await layout(schema);
    expect(after).toMatchObject({
      versions: [{ version: 1 }, { version: 2, description: expect.stringMatching(/synthetic/) }],
    });
    expect(await indexes(schema)).toContain('tasks_tool');
    const live = await pool.query(`SELECT ${schema}.live_tasks($1) AS n`, [Date.now()]);
    expect(Number(live.rows[0].n)).toBe(3);
    await setUpSchema(pool, schema, toTwo);
    expect(await layout(schema)).toEqual(after);
    // The tasks stay, are found by owner, and still count for the quota and maxRows.
    expect((await store.list(alice, { limit: 10 })).tasks).toEqual([...old].reverse());
    await expect(store.create(task(), { maxRows: 10, maxTasksPerOwner: 3 })).rejects.toThrow(
      /quota|3/i,
    );
    expect(
      Number((await pool.query(`SELECT sum(n) AS n FROM ${schema}.row_shards`)).rows[0].n),
    ).toBe(3);
    // This release's setup finds a later version and leaves it.
    await new PostgresTaskStore({ connection: pool, schema }).ready();
    await new PostgresTaskStore({ connection: pool, schema, setup: false }).ready();
    expect(await layout(schema)).toEqual(after);
  });

  it('an upgrade that fails leaves the schema as it was, and is tried again on the next setup', async () => {
    const schema = 'failed_upgrade';
    const store = new PostgresTaskStore({ connection: pool, schema });
    const kept = task();
    await store.create(kept, { maxRows: null });
    const broken: Migration[] = [...toTwo, { version: 3, file: '003-broken.sql', dir: next }];
    await expect(setUpSchema(pool, schema, broken)).rejects.toThrow(/division by zero/);
    // Version 2, applied in the same transaction, is rolled back with it.
    const before = await layout(schema);
    expect(before).toMatchObject({ versions: [{ version: 1 }] });
    expect(await indexes(schema)).not.toContain('tasks_tool');
    expect(
      (await pool.query(`SELECT to_regclass('${schema}.half_done') AS t`)).rows[0].t,
    ).toBeNull();
    expect(await store.get(kept.taskId)).toEqual(kept);
    await setUpSchema(pool, schema, toTwo);
    expect(await layout(schema)).toMatchObject({ versions: [{ version: 1 }, { version: 2 }] });
  });

  it('with setup: false, a schema below the version needed is refused with what to apply', async () => {
    const schema = 'left_at_one';
    await pool.query(postgresSchemaSql(schema));
    await expect(checkSchema(pool, schema, 2)).rejects.toThrow(
      /schema "left_at_one" is at version 1, this release needs 2: apply postgresSchemaSql\("left_at_one"\)/,
    );
    await checkSchema(pool, schema);
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
