import pg from 'pg';
import { PostgresTaskStore } from '../../src/postgres/postgres.task-store.js';
import { taskStoreContract } from '../../src/testing/index.js';
import type { TaskRecord } from '../../src/task.js';
import { newTaskId } from '../../src/task-id.js';
import { startTestPostgres, type TestPostgres } from '../postgres-server.js';

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

describe('PostgresTaskStore: the row count', () => {
  it('cleanup takes what it removed off the row count, and recount_tasks heals a hand edit', async () => {
    const schema = 'row_count';
    const store = new PostgresTaskStore({ connection: postgres.url, schema });
    const raw = new pg.Pool({ connectionString: postgres.url });
    const rows = async (): Promise<number> =>
      Number((await raw.query(`SELECT n FROM ${schema}.counts WHERE name = 'rows'`)).rows[0].n);
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

describe('PostgresTaskStore: round trips', () => {
  it('every operation is one round trip once the schema is set up', async () => {
    const pool = new CountingPool({ connectionString: postgres.url });
    const store = new PostgresTaskStore({ connection: pool, schema: 'round_trips' });
    try {
      await store.ready();
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
          () => store.create(task, { maxRows: 10, maxTasksPerOwner: 5 }),
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
        const before = pool.queries;
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
