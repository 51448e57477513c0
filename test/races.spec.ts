import { TaskError, TaskTerminalError } from '../src/errors.js';
import { InMemoryTaskStore } from '../src/store/in-memory.task-store.js';
import { isTerminal, type TaskOwner } from '../src/task.js';
import type { TasksModuleOptions } from '../src/interfaces/tasks-module-options.interface.js';
import { resolveTasksConfig } from '../src/tasks.config.js';
import { TasksService } from '../src/tasks.service.js';
import { accept, elicit, racer, RecordingNotifier } from './support/helpers.js';

const alice: TaskOwner = { principal: 'alice' };

/**
 * Two services over one store stand for two processes sharing a store: within a service, changes
 * to a task queue up; between the two, only the store's compare-and-set keeps them apart.
 */
function twoProcesses(options: TasksModuleOptions = {}) {
  const store = new InMemoryTaskStore();
  const conflicts = { count: 0 };
  const compareAndSet = store.compareAndSet.bind(store);
  store.compareAndSet = async (record, expectedVersion) => {
    const written = await compareAndSet(record, expectedVersion);
    if (!written) conflicts.count++;
    return written;
  };
  const notifier = new RecordingNotifier();
  const config = resolveTasksConfig(options);
  return {
    conflicts,
    notifier,
    services: [
      new TasksService(store, notifier, config),
      new TasksService(store, notifier, config),
    ] as const,
  };
}

const racers = (service: TasksService, taskId: string, i: number): Promise<unknown> =>
  racer(service, alice, taskId, i);

describe.each(['immediate', 'cooperative'] as const)('races (%s cancellation)', (cancellation) => {
  it('1,000 concurrent complete/fail/cancel/progress calls on one task: one terminal state, one terminal notification', async () => {
    const { services, notifier, conflicts } = twoProcesses({ cancellation });
    const task = await services[0].create(alice);
    const outcomes = await Promise.allSettled(
      Array.from({ length: 1000 }, (_, i) => racers(services[i % 2]!, task.taskId, i)),
    );

    // The two "processes" did collide on the store and compare-and-set settled it.
    expect(conflicts.count).toBeGreaterThan(0);
    const final = await services[0].status(task.taskId);
    expect(isTerminal(final.status)).toBe(true);
    const terminalNotes = notifier.for(task.taskId).filter((record) => isTerminal(record.status));
    expect(terminalNotes).toHaveLength(1);
    expect(terminalNotes[0]).toEqual(final);

    // Every call either succeeded or was refused as terminal; nothing else went wrong.
    for (const outcome of outcomes) {
      if (outcome.status === 'rejected') expect(outcome.reason).toBeInstanceOf(TaskTerminalError);
    }
    // Versions announced are strictly increasing: no write was lost or applied twice.
    const versions = notifier.for(task.taskId).map((record) => record.version);
    expect(versions).toEqual([...versions].sort((a, b) => a - b));
    expect(new Set(versions).size).toBe(versions.length);
    expect(final.version).toBe(versions.at(-1));
    // lastUpdatedAt never goes back.
    const times = notifier.for(task.taskId).map((record) => record.lastUpdatedAt);
    expect(times).toEqual([...times].sort((a, b) => a - b));
  });

  it('100 tasks × 100 racing calls each: every task ends in exactly one terminal state', async () => {
    const { services, notifier } = twoProcesses({ cancellation, maxRows: null });
    const tasks = await Promise.all(Array.from({ length: 100 }, () => services[0].create(alice)));
    await Promise.allSettled(
      tasks.flatMap((task, t) =>
        Array.from({ length: 100 }, (_, i) => racers(services[(i + t) % 2]!, task.taskId, i + t)),
      ),
    );
    for (const task of tasks) {
      const terminal = notifier.for(task.taskId).filter((record) => isTerminal(record.status));
      expect(terminal).toHaveLength(1);
      expect(await services[1].status(task.taskId)).toEqual(terminal[0]);
    }
  });
});

describe('races within one process', () => {
  it('changes to one task queue up: 1,000 concurrent calls cause no store conflict at all', async () => {
    const { services, conflicts, notifier } = twoProcesses();
    const task = await services[0].create(alice);
    await Promise.allSettled(
      Array.from({ length: 1000 }, (_, i) => racers(services[0], task.taskId, i)),
    );
    expect(conflicts.count).toBe(0);
    expect(notifier.for(task.taskId).filter((record) => isTerminal(record.status))).toHaveLength(1);
  });
});

describe('races on input', () => {
  it('concurrent updates answering different keys lose no accepted response', async () => {
    const { services } = twoProcesses();
    const task = await services[0].create(alice);
    const keys = Array.from({ length: 50 }, (_, i) => `k${i}`);
    await services[0].requireInput(
      task.taskId,
      Object.fromEntries(keys.map((k) => [k, elicit(k)])),
    );
    const results = await Promise.allSettled(
      keys.map((key, i) => services[i % 2]!.update(task.taskId, alice, { [key]: accept(key) })),
    );
    expect(results.every((r) => r.status === 'fulfilled')).toBe(true);
    const after = await services[1].status(task.taskId);
    expect(after.status).toBe('working');
    expect(Object.keys(after.inputResponses ?? {}).sort()).toEqual([...keys].sort());
  });

  it('takeInputResponses racing updates hands out every response exactly once', async () => {
    const { services } = twoProcesses();
    const task = await services[0].create(alice);
    const keys = Array.from({ length: 40 }, (_, i) => `k${i}`);
    await services[0].requireInput(
      task.taskId,
      Object.fromEntries(keys.map((k) => [k, elicit(k)])),
    );
    const taken: string[] = [];
    const take = async (service: TasksService) => {
      taken.push(...Object.keys(await service.takeInputResponses(task.taskId)));
    };
    await Promise.all(
      keys.flatMap((key, i) => [
        services[i % 2]!.update(task.taskId, alice, { [key]: accept(key) }),
        take(services[(i + 1) % 2]!),
      ]),
    );
    await take(services[0]);
    expect(taken.sort()).toEqual([...keys].sort());
  });

  it('requireInput racing with itself on one key: exactly one wins, the others are refused as duplicates', async () => {
    const { services } = twoProcesses();
    const task = await services[0].create(alice);
    const outcomes = await Promise.allSettled(
      Array.from({ length: 20 }, (_, i) =>
        services[i % 2]!.requireInput(task.taskId, { same: elicit(`${i}`) }),
      ),
    );
    expect(outcomes.filter((o) => o.status === 'fulfilled')).toHaveLength(1);
    for (const outcome of outcomes) {
      if (outcome.status === 'rejected')
        expect((outcome.reason as TaskError).kind).toBe('duplicate_input_key');
    }
  });
});
