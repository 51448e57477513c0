import pg from 'pg';
import { PostgresTaskStore } from '../../src/postgres/postgres.task-store.js';
import { TaskQuotaError, TaskStoreFullError } from '../../src/errors.js';
import type { TaskOwner, TaskRecord } from '../../src/task.js';
import { newTaskId } from '../../src/task-id.js';
import { startTestPostgres, type TestPostgres } from '../support/postgres-server.js';

/**
 * The create's limits under concurrency: no single row serializes creates any more (the owner's
 * quota is judged under a lock of that owner, maxRows on a sharded count), so these check that
 * neither limit is passed when many creates race, on 20 connections.
 */
let postgres: TestPostgres;
let pool: pg.Pool;

beforeAll(async () => {
  // Commits that wait for the disk, as in production: creates overlap longer, races show.
  postgres = await startTestPostgres({ fsync: true });
  pool = new pg.Pool({ connectionString: postgres.url, max: 20 });
}, 60_000);
afterAll(async () => {
  await pool?.end();
  await postgres?.stop();
});

const task = (owner: TaskOwner, ttlMs: number | null = 60_000): TaskRecord => {
  const now = Date.now();
  return {
    taskId: newTaskId(),
    owner: { principal: owner.principal ?? null, tenant: owner.tenant ?? null },
    status: 'working',
    createdAt: now,
    lastUpdatedAt: now,
    ttlMs,
    version: 1,
  };
};

/** The outcome of each create: 'created', or the refusal's class name. */
async function race(
  store: PostgresTaskStore,
  records: TaskRecord[],
  options: { maxRows: number | null; maxTasksPerOwner?: number | null },
): Promise<Record<string, number>> {
  const outcomes = await Promise.all(
    records.map((record) =>
      store.create(record, options).then(
        () => 'created',
        (error: unknown) => (error as Error).constructor.name,
      ),
    ),
  );
  const tally: Record<string, number> = {};
  for (const outcome of outcomes) tally[outcome] = (tally[outcome] ?? 0) + 1;
  return tally;
}

const stored = async (schema: string, where = 'true'): Promise<number> =>
  Number((await pool.query(`SELECT count(*) AS n FROM ${schema}.tasks WHERE ${where}`)).rows[0].n);

describe('PostgresTaskStore: limits under concurrent creates', () => {
  it("1,000 concurrent creates of one owner never pass its quota of 100, nor another owner's", async () => {
    const store = new PostgresTaskStore({ connection: pool, schema: 'quota_race' });
    try {
      const alice = { principal: 'alice' };
      const bob = { principal: 'bob' };
      // Bob's tasks race beside Alice's: a lock of the wrong owner would show as his refusals.
      const records = Array.from({ length: 1_000 }, (_, i) => task(i % 10 === 9 ? bob : alice));
      const tally = await race(store, records, { maxRows: null, maxTasksPerOwner: 100 });
      expect(tally).toEqual({ created: 200, [TaskQuotaError.name]: 800 });
      expect(await stored('quota_race', `owner_key LIKE '%alice%'`)).toBe(100);
      expect(await stored('quota_race', `owner_key LIKE '%bob%'`)).toBe(100);
      // Finished tasks make room, exactly as many as finish, however many race for it.
      const ofAlice = (await store.list(alice, { limit: 100 })).tasks.slice(0, 30);
      for (const record of ofAlice) {
        expect(await store.compareAndSet({ ...record, status: 'completed', version: 2 }, 1)).toBe(
          true,
        );
      }
      const more = await race(
        store,
        Array.from({ length: 300 }, () => task(alice)),
        { maxRows: null, maxTasksPerOwner: 100 },
      );
      expect(more).toEqual({ created: 30, [TaskQuotaError.name]: 270 });
      expect(await stored('quota_race', `owner_key LIKE '%alice%'`)).toBe(100);
    } finally {
      await store.onApplicationShutdown();
    }
  }, 20_000);

  it('1,000 concurrent creates of 1,000 owners stop at maxRows exactly; expired tasks make room', async () => {
    const schema = 'rows_race';
    const store = new PostgresTaskStore({ connection: pool, schema });
    try {
      const owners = Array.from({ length: 1_000 }, (_, i) => ({ principal: `owner-${i}` }));
      const tally = await race(
        store,
        owners.map((owner) => task(owner)),
        { maxRows: 300, maxTasksPerOwner: 100 },
      );
      expect(tally).toEqual({ created: 300, [TaskStoreFullError.name]: 700 });
      expect(await stored(schema)).toBe(300);
      // A lower maxRows (another app's setting) is judged exactly too: nothing more fits.
      expect(await race(store, [task(owners[0]!)], { maxRows: 200 })).toEqual({
        [TaskStoreFullError.name]: 1,
      });
      // 50 tasks expire: exactly 50 creates of the next 500 fit.
      await pool.query(
        `UPDATE ${schema}.tasks SET expires_at = 1 WHERE task_id IN
          (SELECT task_id FROM ${schema}.tasks ORDER BY task_id LIMIT 50)`,
      );
      const next = await race(
        store,
        owners.slice(0, 500).map((owner) => task(owner)),
        { maxRows: 300, maxTasksPerOwner: 100 },
      );
      expect(next).toEqual({ created: 50, [TaskStoreFullError.name]: 450 });
      expect(await stored(schema)).toBe(300);
      // Deletes give their rows back: 20 deleted, 20 more fit.
      const ids = (
        await pool.query(`SELECT task_id FROM ${schema}.tasks ORDER BY task_id LIMIT 20`)
      ).rows.map((row: { task_id: string }) => row.task_id);
      await Promise.all(ids.map((id) => store.delete(id)));
      const last = await race(
        store,
        owners.slice(0, 100).map((owner) => task(owner)),
        { maxRows: 300 },
      );
      expect(last).toEqual({ created: 20, [TaskStoreFullError.name]: 80 });
      expect(await stored(schema)).toBe(300);
    } finally {
      await store.onApplicationShutdown();
    }
  }, 20_000);
});
