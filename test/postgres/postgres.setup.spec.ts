import { readFileSync } from 'node:fs';
import { createServer, type Socket } from 'node:net';
import pg from 'pg';
import { TasksConfigError } from '../../src/errors.js';
import {
  POSTGRES_SCHEMA_VERSION,
  PostgresTaskStore,
  postgresSchemaSql,
} from '../../src/postgres/index.js';
import { newTask } from '../../src/task.js';
import { newTaskId } from '../../src/task-id.js';
import { startTestPostgres, type TestPostgres } from '../postgres-server.js';

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
        { table_name: 'counts' },
        { table_name: 'instances' },
        { table_name: 'schema_version' },
        { table_name: 'tasks' },
      ],
      versions: [{ version: POSTGRES_SCHEMA_VERSION }],
    });
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
    // As a team's own migration would: the file as shipped, with its schema's name put in.
    const file = new URL('../../src/postgres/schema/001-initial.sql', import.meta.url);
    const sql = readFileSync(file, 'utf8').replaceAll('mcp_tasks', 'by_hand');
    expect(sql).toBe(postgresSchemaSql('by_hand'));
    await pool.query(sql);
    const store = new PostgresTaskStore({ connection: pool, schema: 'by_hand', setup: false });
    const created = task();
    await store.create(created, { maxRows: 10, maxTasksPerOwner: 5 });
    expect(await store.get(created.taskId, { principal: 'alice' })).toEqual(created);
    expect((await store.list({ principal: 'alice' }, { limit: 10 })).tasks).toEqual([created]);
    expect(await layout('by_hand')).toMatchObject({ versions: [{ version: 1 }] });
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

  it('refuses a schema name that is not a plain lower-case identifier', () => {
    for (const schema of ['Tasks', 'a-b', '1x', 'x; DROP TABLE y', '', 'a'.repeat(64)]) {
      expect(() => new PostgresTaskStore({ connection: pool, schema })).toThrow(TasksConfigError);
    }
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
        expect((error as Error).message).toBe('PostgreSQL did not answer within 200 ms');
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
