import { jest } from '@jest/globals';
import pg from 'pg';
import { PostgresTaskStore } from '../../src/postgres/postgres.task-store.js';
import { taskStoreContract } from '../../src/testing/index.js';
import { newTask, type TaskOwner, type TaskRecord } from '../../src/task.js';
import { newTaskId } from '../../src/task-id.js';
import { startTestPostgres, type TestPostgres } from '../support/postgres-server.js';

let postgres: TestPostgres;
let schemas = 0;

beforeAll(async () => {
  postgres = await startTestPostgres();
}, 60_000);
afterAll(async () => {
  await postgres.stop();
});

describe('TaskStore contract: PostgresTaskStore', () => {
  const contract = taskStoreContract({
    // Each case gets its own schema: a fresh, empty store on the same server.
    create: () =>
      new PostgresTaskStore({ connection: postgres.url, schema: `contract_${++schemas}` }),
    dispose: (store) => store.onApplicationShutdown(),
  });
  for (const rule of contract) it(rule.name, rule.run);
});

describe('PostgresTaskStore: listing', () => {
  it('a page that ends on tasks not listed goes on after the last entry it looked at, by number', async () => {
    const store = new PostgresTaskStore({ connection: postgres.url, schema: 'listing_edge' });
    try {
      const owner = { principal: 'alice', tenant: null };
      const at = (createdAt: number, ttlMs: number | null): TaskRecord => ({
        taskId: newTaskId(),
        owner,
        status: 'working',
        createdAt,
        lastUpdatedAt: createdAt,
        ttlMs,
        version: 1,
      });
      // Created at 10 (expired), 9 and 8: "10" sorts before "9" as text, not as a number.
      const expired = at(10, 1);
      const [nine, eight] = [at(9, null), at(8, null)];
      for (const task of [expired, nine, eight]) await store.create(task, { maxRows: null });
      const ids: string[] = [];
      let cursor: string | undefined;
      do {
        const page = await store.list(owner, { limit: 1, ...(cursor !== undefined && { cursor }) });
        ids.push(...page.tasks.map((task) => task.taskId));
        cursor = page.nextCursor;
      } while (cursor !== undefined && ids.length < 10);
      expect(ids).toEqual([nine.taskId, eight.taskId]);
    } finally {
      await store.onApplicationShutdown();
    }
  });
});

describe('PostgresTaskStore: owners and ids of any content', () => {
  const task = (owner: TaskOwner, createdAt = Date.now(), toolName?: string): TaskRecord => ({
    taskId: newTaskId(),
    owner: { principal: owner.principal ?? null, tenant: owner.tenant ?? null },
    status: 'working',
    createdAt,
    lastUpdatedAt: createdAt,
    ttlMs: 60_000,
    version: 1,
    ...(toolName !== undefined && { toolName }),
  });

  it('owners are exact: a NUL, half a surrogate pair, U+0001 and 8,000 characters each stay apart', async () => {
    const store = new PostgresTaskStore({ connection: postgres.url, schema: 'odd_owners' });
    try {
      const owners: TaskOwner[] = [
        { principal: 'a\u0000b' },
        { principal: 'a\u0000c' },
        { principal: 'a' },
        { principal: 'a', tenant: '\u0000' },
        { principal: 'a', tenant: '' },
        { principal: 'x\ud800' },
        { principal: 'x\udbff' },
        { principal: 'x\ufffd' },
        { principal: 'x\udc00\ud800' },
        { principal: '\u0001' },
        { principal: 'p'.repeat(8_000) },
        { principal: 'p'.repeat(7_999) },
      ];
      const tasks = owners.map((owner) => task(owner));
      for (const created of tasks)
        await store.create(created, { maxRows: null, maxTasksPerOwner: 1 });
      for (const [i, owner] of owners.entries()) {
        expect({ i, listed: (await store.list(owner, { limit: 10 })).tasks }).toEqual({
          i,
          listed: [tasks[i]],
        });
        expect(await store.get(tasks[i]!.taskId, owner)).toEqual(tasks[i]);
        const other = tasks[(i + 1) % tasks.length]!;
        expect(await store.get(other.taskId, owner)).toBeNull();
      }
      // Each owner's quota of 1 counts its own task only: a finished one makes room for the next.
      const done = { ...tasks[0]!, status: 'completed' as const, version: 2 };
      expect(await store.compareAndSet(done, 1)).toBe(true);
      const next = task(owners[0]!);
      await store.create(next, { maxRows: null, maxTasksPerOwner: 1 });
      expect(await store.get(tasks[0]!.taskId)).toBeNull();
      expect(await store.get(tasks[1]!.taskId)).toEqual(tasks[1]);
      // The stored key is the plain one for a plain owner (as version 1 wrote it).
      const raw = new pg.Pool({ connectionString: postgres.url, max: 1 });
      try {
        const { rows } = await raw.query(
          `SELECT owner_key FROM odd_owners.tasks WHERE task_id = $1`,
          [tasks[2]!.taskId],
        );
        expect(rows).toEqual([{ owner_key: '1:a-' }]);
      } finally {
        await raw.end();
      }
    } finally {
      await store.onApplicationShutdown();
    }
  });

  it('tool names too: listAll by a tool name with a NUL finds its tasks only', async () => {
    const store = new PostgresTaskStore({ connection: postgres.url, schema: 'odd_tools' });
    try {
      const owner = { principal: 'alice' };
      const names = ['t\u0000', 't', 't\ud800', 't\ufffd'];
      const tasks = names.map((name) => task(owner, Date.now(), name));
      for (const created of tasks) await store.create(created, { maxRows: null });
      for (const [i, toolName] of names.entries()) {
        expect((await store.listAll({ limit: 10, toolName })).tasks).toEqual([tasks[i]]);
      }
    } finally {
      await store.onApplicationShutdown();
    }
  });

  it('a task id with a NUL is unknown to get, delete and compareAndSet, without a query', async () => {
    const store = new PostgresTaskStore({ connection: postgres.url, schema: 'odd_ids' });
    try {
      const owner = { principal: 'alice' };
      const created = task(owner);
      await store.create(created, { maxRows: null });
      const queries = jest.spyOn(store.pool, 'query');
      const odd = `${created.taskId}\u0000`;
      expect(await store.get(odd)).toBeNull();
      expect(await store.get(odd, owner)).toBeNull();
      expect(await store.delete(odd)).toBe(false);
      expect(await store.compareAndSet({ ...created, taskId: odd, version: 2 }, 1)).toBe(false);
      expect(queries).not.toHaveBeenCalled();
      queries.mockRestore();
      expect(await store.get(created.taskId, owner)).toEqual(created);
    } finally {
      await store.onApplicationShutdown();
    }
  });

  it('owners whose hashes meet still never see each other: the key is compared', async () => {
    const store = new PostgresTaskStore({ connection: postgres.url, schema: 'colliding' });
    const raw = new pg.Pool({ connectionString: postgres.url, max: 1 });
    try {
      await store.ready();
      // Every owner gets the same hash, as a collision would give two of them.
      await raw.query(
        `CREATE OR REPLACE FUNCTION colliding.owner_hash(text) RETURNS bytea
           LANGUAGE sql IMMUTABLE STRICT AS $$ SELECT '\\x00'::bytea $$;
         REINDEX TABLE colliding.tasks`,
      );
      const [alice, bob] = [{ principal: 'alice' }, { principal: 'bob' }];
      const base = Date.now();
      const ofAlice = [0, 2, 4].map((at) => task(alice, base + at));
      const ofBob = [1, 3, 5].map((at) => task(bob, base + at));
      for (const created of [...ofAlice, ...ofBob]) {
        await store.create(created, { maxRows: null, maxTasksPerOwner: 3 });
      }
      // Pages of 1 walk alice's tasks only, newest first; bob's are looked at, never listed.
      const seen: string[] = [];
      let cursor: string | undefined;
      for (let pages = 0; pages < 20; pages++) {
        const page = await store.list(alice, { limit: 1, ...(cursor !== undefined && { cursor }) });
        seen.push(...page.tasks.map((listed) => listed.taskId));
        cursor = page.nextCursor;
        if (cursor === undefined) break;
      }
      expect(seen).toEqual(ofAlice.map((listed) => listed.taskId).reverse());
      expect(await store.get(ofBob[0]!.taskId, alice)).toBeNull();
      // Alice's quota of 3 counts her tasks only; at it, her finished task makes room, not bob's.
      await expect(
        store.create(task(alice), { maxRows: null, maxTasksPerOwner: 3 }),
      ).rejects.toThrow();
      expect(await store.compareAndSet({ ...ofBob[0]!, status: 'completed', version: 2 }, 1)).toBe(
        true,
      );
      await expect(
        store.create(task(alice), { maxRows: null, maxTasksPerOwner: 3 }),
      ).rejects.toThrow();
      expect(
        await store.compareAndSet({ ...ofAlice[0]!, status: 'completed', version: 2 }, 1),
      ).toBe(true);
      await store.create(task(alice), { maxRows: null, maxTasksPerOwner: 3 });
      expect(await store.get(ofAlice[0]!.taskId)).toBeNull();
      expect(await store.get(ofBob[0]!.taskId)).not.toBeNull();
    } finally {
      await raw.end();
      await store.onApplicationShutdown();
    }
  });
});

describe('PostgresTaskStore: the row count', () => {
  it('cleanup takes what it removed off the row count, and recount_tasks heals a hand edit', async () => {
    const schema = 'row_count';
    const store = new PostgresTaskStore({ connection: postgres.url, schema });
    const raw = new pg.Pool({ connectionString: postgres.url });
    const rows = async (): Promise<number> =>
      Number((await raw.query(`SELECT sum(n) AS n FROM ${schema}.row_shards`)).rows[0].n);
    try {
      const owner = { principal: 'alice', tenant: null };
      const now = Date.now();
      const task = (ttlMs: number | null): TaskRecord => ({
        taskId: newTaskId(),
        owner,
        status: 'working',
        createdAt: now - 10_000,
        lastUpdatedAt: now - 10_000,
        ttlMs,
        version: 1,
      });
      for (let i = 0; i < 5; i++) await store.create(task(1_000), { maxRows: null });
      for (let i = 0; i < 3; i++) await store.create(task(null), { maxRows: null });
      expect(await rows()).toBe(8);
      expect(await store.cleanup(now, { terminalTtlMs: 60_000 })).toBe(5);
      expect(await rows()).toBe(3);
      // Nothing due: nothing removed, the count untouched.
      expect(await store.cleanup(now, { terminalTtlMs: 60_000 })).toBe(0);
      expect(await rows()).toBe(3);
      // With the count at maxRows, the next create is refused; a row deleted by hand is not
      // counted until recount_tasks.
      await expect(store.create(task(null), { maxRows: 3 })).rejects.toThrow(/full/i);
      await raw.query(`DELETE FROM ${schema}.tasks WHERE task_id IN
        (SELECT task_id FROM ${schema}.tasks LIMIT 1)`);
      expect(await rows()).toBe(3);
      expect(Number((await raw.query(`SELECT ${schema}.recount_tasks() AS n`)).rows[0].n)).toBe(2);
      await store.create(task(null), { maxRows: 3 });
      expect(await rows()).toBe(3);
    } finally {
      await raw.end();
      await store.onApplicationShutdown();
    }
  });
});

/** A pool that counts its queries: each is one round trip (pg sends one query at a time). */
class CountingPool extends pg.Pool {
  queries = 0;
  override query(...args: unknown[]): never {
    this.queries++;
    return (super.query as (...a: unknown[]) => never)(...args);
  }
}

describe("PostgresTaskStore: the owners' counts", () => {
  it("hold each owner's rows through creates, deletes, cleanup, a count set too high and a hand edit", async () => {
    const schema = 'owner_counts';
    const store = new PostgresTaskStore({ connection: postgres.url, schema });
    const raw = new pg.Pool({ connectionString: postgres.url });
    // Each owner's count beside its rows in tasks, by the hash of its key.
    const counts = async (): Promise<{ counted: number; rows: number }[]> =>
      (
        await raw.query(
          `SELECT coalesce(o.n, 0)::int AS counted, coalesce(t.rows, 0)::int AS rows
             FROM ${schema}.owner_rows o FULL JOIN
               (SELECT ${schema}.owner_hash(owner_key) AS owner_hash, count(*) AS rows
                  FROM ${schema}.tasks GROUP BY 1) t USING (owner_hash)
             ORDER BY 1, 2`,
        )
      ).rows;
    const exact = async (): Promise<void> => {
      for (const { counted, rows } of await counts()) expect(counted).toBe(rows);
    };
    try {
      const now = Date.now();
      const [alice, bob] = [
        { principal: 'alice', tenant: null },
        { principal: 'bob', tenant: 'acme' },
      ];
      const task = (owner: TaskOwner, ttlMs: number | null, age = 0): TaskRecord => ({
        taskId: newTaskId(),
        owner: { principal: owner.principal, tenant: owner.tenant ?? null },
        status: 'working',
        createdAt: now - age,
        lastUpdatedAt: now - age,
        ttlMs,
        version: 1,
      });
      const limits = { maxRows: 1_000, maxTasksPerOwner: 5 };
      const ofAlice: TaskRecord[] = [];
      for (let i = 0; i < 3; i++) {
        ofAlice.push(task(alice, 60_000));
        await store.create(ofAlice[i]!, limits);
      }
      for (let i = 0; i < 4; i++) await store.create(task(bob, 1_000, 10_000), limits);
      expect(await counts()).toEqual([
        { counted: 3, rows: 3 },
        { counted: 4, rows: 4 },
      ]);
      // A taken id stores nothing and leaves the count exact.
      await expect(store.create(ofAlice[0]!, limits)).rejects.toThrow(/already exists/);
      await exact();
      expect(await store.delete(ofAlice[1]!.taskId)).toBe(true);
      expect(await store.delete(ofAlice[1]!.taskId)).toBe(false);
      await exact();
      // Bob's four expired tasks go; his count follows.
      expect(await store.cleanup(now, { terminalTtlMs: 60_000 })).toBe(4);
      expect(await counts()).toEqual([
        { counted: 0, rows: 0 },
        { counted: 2, rows: 2 },
      ]);
      // A count above the rows (never below) sends the next create to the full judgement, which
      // stores it (2 of 5 live) and counts again.
      await raw.query(`UPDATE ${schema}.owner_rows SET n = 5 WHERE n = 2`);
      await store.create(task(alice, 60_000), limits);
      await exact();
      expect(await counts()).toContainEqual({ counted: 3, rows: 3 });
      // Rows added by hand are counted by recount_tasks; until then the count is below them.
      await raw.query(
        `INSERT INTO ${schema}.tasks (task_id, owner_key, status, created_at, expires_at, version, record)
           SELECT task_id || 'x', owner_key, status, created_at, expires_at, version, record
             FROM ${schema}.tasks`,
      );
      await raw.query(`SELECT ${schema}.recount_tasks()`);
      await exact();
      expect(await counts()).toContainEqual({ counted: 6, rows: 6 });
      // Alice at 6 rows of a quota of 5, none finished: refused, nothing written, not even a
      // new version of her count's row (its xmin stays): a refusal leaves no dead rows.
      const version = async (): Promise<string> =>
        (
          await raw.query(
            `SELECT xmin::text AS xmin FROM ${schema}.owner_rows WHERE n = 6 ORDER BY owner_hash`,
          )
        ).rows
          .map((row: { xmin: string }) => row.xmin)
          .join();
      const before = await version();
      expect(before).toMatch(/^\d+$/);
      await expect(store.create(task(alice, 60_000), limits)).rejects.toThrow(/quota/i);
      await exact();
      expect(await version()).toBe(before);
    } finally {
      await raw.end();
      await store.onApplicationShutdown();
    }
  });
});

describe('PostgresTaskStore: writes that send their change', () => {
  it('a NOTIFY PostgreSQL refuses does not lose the write: it goes alone, and is not marked sent', async () => {
    const store = new PostgresTaskStore({ connection: postgres.url, schema: 'notify_refused' });
    try {
      const task = newTask(newTaskId(), { principal: 'alice' }, { ttlMs: 60_000 }, Date.now());
      await store.create(task, { maxRows: null });
      // An empty channel name: pg_notify raises 22023, as it raises 54000 with its queue full.
      store.sendChanges({
        channelOf: () => '',
        origin: 'o'.repeat(12),
        reference: (record) => `${record.version} ${record.taskId}`,
        everyChange: () => null,
      });
      const changed = { ...task, statusMessage: 'half way', version: 2 };
      expect(await store.compareAndSet(changed, 1)).toBe(true);
      expect(store.sentChange(changed)).toBe(false);
      expect(await store.get(task.taskId)).toEqual(changed);
      // The version moved on: the same write again loses, as any stale compare-and-set does.
      expect(await store.compareAndSet({ ...changed, version: 3 }, 1)).toBe(false);
    } finally {
      await store.onApplicationShutdown();
    }
  });
});

describe('PostgresTaskStore: round trips', () => {
  it('every operation is one round trip once the schema is set up', async () => {
    // One connection, whose share of maxRows (1,000 / 64 shards) the first create makes: that
    // create, finding no share, is judged in full by create_task, a second round trip (as is a
    // create at the owner's quota).
    const pool = new CountingPool({ connectionString: postgres.url, max: 1 });
    const store = new PostgresTaskStore({ connection: pool, schema: 'round_trips' });
    try {
      await store.ready();
      const first = newTask(newTaskId(), { principal: 'first' }, { ttlMs: 60_000 }, Date.now());
      let before = pool.queries;
      await store.create(first, { maxRows: 1_000, maxTasksPerOwner: 5 });
      expect(pool.queries - before).toBe(2);
      // At the owner's quota: the first statement writes nothing, create_task makes room (or refuses).
      before = pool.queries;
      await expect(
        store.create(newTask(newTaskId(), { principal: 'first' }, { ttlMs: 60_000 }, Date.now()), {
          maxRows: 1_000,
          maxTasksPerOwner: 1,
        }),
      ).rejects.toThrow(/quota/i);
      expect(pool.queries - before).toBe(2);
      const owner = { principal: 'alice', tenant: null };
      const task: TaskRecord = {
        taskId: newTaskId(),
        owner,
        status: 'working',
        createdAt: Date.now(),
        lastUpdatedAt: Date.now(),
        ttlMs: 60_000,
        version: 1,
        heldBy: 'i1',
        toolName: 'tool',
      };
      const done: TaskRecord = {
        ...task,
        status: 'completed',
        result: { content: [], resultType: 'complete' },
        version: 2,
      };
      const operations: [string, () => Promise<unknown>][] = [
        [
          'create (with maxRows and a quota)',
          () => store.create(task, { maxRows: 1_000, maxTasksPerOwner: 5 }),
        ],
        ['get', () => store.get(task.taskId)],
        ['get (owner-scoped)', () => store.get(task.taskId, owner)],
        ['list', () => store.list(owner, { limit: 10 })],
        ['list (by status)', () => store.list(owner, { limit: 10, status: ['working'] })],
        ['listAll (by tool)', () => store.listAll({ limit: 10, toolName: 'tool' })],
        ['renewLease', () => store.renewLease('i1', 60_000)],
        ['heldTasks', () => store.heldTasks('i1')],
        ['compareAndSet (terminal, releasing the hold)', () => store.compareAndSet(done, 1)],
        ['releaseTasks', () => store.releaseTasks('i1', [task.taskId])],
        ['releaseLease', () => store.releaseLease('i1')],
        ['cleanup', () => store.cleanup(Date.now(), { terminalTtlMs: 60_000 })],
        ['delete', () => store.delete(task.taskId)],
        ['ping', () => store.ping()],
      ];
      const counted: [string, number][] = [];
      for (const [name, run] of operations) {
        before = pool.queries;
        await run();
        counted.push([name, pool.queries - before]);
      }
      expect(counted).toEqual(operations.map(([name]) => [name, 1]));
      // And the writes happened: the hold ended with the terminal write, the task is gone.
      expect(await store.get(task.taskId)).toBeNull();
    } finally {
      await store.onApplicationShutdown();
      await pool.end();
    }
  });
});
