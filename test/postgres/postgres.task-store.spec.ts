import pg from 'pg';
import { PostgresTaskStore } from '../../src/postgres/postgres.task-store.js';
import { taskStoreContract } from '../../src/testing/index.js';
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

void pg;
