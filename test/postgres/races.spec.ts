import { TaskTerminalError } from '../../src/errors.js';
import { PostgresTaskStore } from '../../src/postgres/index.js';
import { isTerminal, type TaskOwner } from '../../src/task.js';
import { resolveTasksConfig } from '../../src/tasks.config.js';
import { TasksService } from '../../src/tasks.service.js';
import { racer, RecordingNotifier } from '../support/helpers.js';
import { startTestPostgres, type TestPostgres } from '../support/postgres-server.js';

/**
 * Two services over two PostgresTaskStores (two pools) on one schema stand for two processes
 * sharing the database: only the store's compare-and-set keeps their writes apart.
 */

const alice: TaskOwner = { principal: 'alice' };
let postgres: TestPostgres;
let schemas = 0;

beforeAll(async () => {
  postgres = await startTestPostgres();
}, 60_000);
afterAll(async () => {
  await postgres.stop();
});

async function twoProcesses() {
  const schema = `races_${++schemas}`;
  const stores = [0, 1].map(() => new PostgresTaskStore({ connection: postgres.url, schema }));
  const conflicts = { count: 0 };
  for (const store of stores) {
    const compareAndSet = store.compareAndSet.bind(store);
    store.compareAndSet = async (record, expectedVersion) => {
      const written = await compareAndSet(record, expectedVersion);
      if (!written) conflicts.count++;
      return written;
    };
    await store.ready();
  }
  const notifier = new RecordingNotifier();
  const config = resolveTasksConfig({ maxRows: null, maxTasksPerOwner: null });
  const services = stores.map((store) => new TasksService(store, notifier, config));
  return {
    conflicts,
    notifier,
    services: services as [TasksService, TasksService],
    close: () => Promise.all(stores.map((store) => store.onApplicationShutdown())),
  };
}

const racers = (service: TasksService, taskId: string, i: number): Promise<unknown> =>
  racer(service, alice, taskId, i);

describe('races on PostgreSQL (two stores, one schema)', () => {
  it('1,000 concurrent complete/fail/cancel/progress calls on one task: one terminal state, one terminal notification', async () => {
    const { services, notifier, conflicts, close } = await twoProcesses();
    try {
      const task = await services[0].create(alice);
      // The first 500 are progress calls from both stores at once, so that the two contend for
      // the same versions (a finish first could leave the other store nothing to race for).
      const outcomes = await Promise.allSettled(
        Array.from({ length: 1000 }, (_, i) =>
          i < 500
            ? services[i % 2].progress(task.taskId, `p${i}`)
            : racers(services[i % 2], task.taskId, i),
        ),
      );
      expect(conflicts.count).toBeGreaterThan(0);
      const final = await services[1].status(task.taskId);
      expect(isTerminal(final.status)).toBe(true);
      const terminal = notifier.for(task.taskId).filter((record) => isTerminal(record.status));
      expect(terminal).toEqual([final]);
      for (const outcome of outcomes) {
        if (outcome.status === 'rejected') expect(outcome.reason).toBeInstanceOf(TaskTerminalError);
      }
      // Versions announced are strictly increasing: no write was lost or applied twice.
      const versions = notifier.for(task.taskId).map((record) => record.version);
      expect(versions).toEqual([...versions].sort((a, b) => a - b));
      expect(new Set(versions).size).toBe(versions.length);
      expect(final.version).toBe(versions.at(-1));
    } finally {
      await close();
    }
  });

  it('100 tasks × 100 racing calls each (10,000 operations): every task ends in exactly one terminal state', async () => {
    const { services, notifier, close } = await twoProcesses();
    try {
      const tasks = await Promise.all(
        Array.from({ length: 100 }, (_, t) => services[t % 2].create(alice)),
      );
      await Promise.allSettled(
        tasks.flatMap((task, t) =>
          Array.from({ length: 100 }, (_, i) => racers(services[(i + t) % 2], task.taskId, i + t)),
        ),
      );
      for (const task of tasks) {
        const terminal = notifier.for(task.taskId).filter((record) => isTerminal(record.status));
        expect(terminal).toHaveLength(1);
        expect(await services[1].status(task.taskId)).toEqual(terminal[0]);
      }
    } finally {
      await close();
    }
  }, 120_000);
});
