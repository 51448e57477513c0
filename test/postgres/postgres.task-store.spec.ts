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
