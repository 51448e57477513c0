/**
 * The contract rules of expiry: a task past its TTL is gone at once, and `cleanup` removes exactly
 * the expired and the long-finished tasks.
 */
import type { TaskStore } from '../../entries/store.js';
import { sameRecord, isNull, is, finish, writeRefused } from './contract-assertions.js';
import { HOUR, unlimited, record } from './contract-fixtures.js';
import type { ContractRule } from './contract-fixtures.js';
import { alice } from './contract-owners.js';

/** An expired task is never read nor written; cleanup counts what it removed. */
export const EXPIRY_RULES: readonly ContractRule[] = [
  [
    'an expired task is not returned nor writable, even before cleanup',
    async (store) => {
      const task = record(alice, HOUR, Date.now() - 2 * HOUR);
      await store.create(task, unlimited);
      isNull(await store.get(task.taskId), 'get(an expired task)');
      isNull(await store.get(task.taskId, alice), 'get(an expired task, its owner)');
      await writeRefused(store, task, 'an expired task');
    },
  ],

  [
    'a task with ttlMs null never expires by age',
    async (store) => {
      const task = record(alice, null, Date.now() - 1000 * HOUR);
      await store.create(task, unlimited);
      sameRecord(await store.get(task.taskId), task, 'get(a 1000 h old working task without TTL)');
      await removes(store, Date.now(), 0, 'cleanup() count with only a working task without TTL');
      sameRecord(
        await store.get(task.taskId),
        task,
        'get(a working task without TTL) after cleanup',
      );
    },
  ],

  [
    'cleanup removes exactly the tasks past createdAt + ttlMs',
    async (store) => {
      const now = Date.now();
      const expired = [1, 2, 3].map((n) => record(alice, HOUR, now - HOUR - n * 1000));
      const boundary = record(alice, HOUR, now - HOUR); // expires exactly at `now`
      const live = [1, 2, 3].map((n) => record(alice, HOUR, now - HOUR + n * 1000));
      for (const task of [...live, ...expired, boundary]) await store.create(task, unlimited);
      await removes(
        store,
        now,
        4,
        'cleanup(now) count with 3 expired tasks and 1 expiring exactly at now (3 live)',
      );
      for (const task of [...expired, boundary]) {
        isNull(await store.get(task.taskId), 'get(a task cleanup removed)');
      }
      for (const task of live) sameRecord(await store.get(task.taskId), task, 'get(a live task)');
      await removes(store, now, 0, 'a second cleanup(now) count');
    },
  ],

  [
    'cleanup judges expiry at the `now` it is given',
    async (store) => {
      const now = Date.now();
      const task = record(alice, HOUR, now - HOUR - HOUR / 2); // expired half an hour ago
      await store.create(task, unlimited);
      await removes(
        store,
        now - HOUR,
        0,
        'cleanup(an hour ago) count, with a task that expired half an hour ago',
      );
      await removes(store, now, 1, 'cleanup(now) count, with a task that expired half an hour ago');
    },
  ],

  [
    'cleanup removes terminal tasks without a TTL once terminalTtlMs old, and only those',
    async (store) => {
      const now = Date.now();
      const old = record(alice, null, now - 10 * HOUR);
      const recent = record(alice, null, now - 10 * HOUR);
      const working = record(alice, null, now - 10 * HOUR);
      for (const task of [old, recent, working]) await store.create(task, unlimited);
      await finish(store, old, now - 2 * HOUR);
      const recentDone = await finish(store, recent, now - HOUR / 2);
      await removes(
        store,
        now,
        1,
        'cleanup(now, terminalTtlMs 1 h) count: finished 2 h ago, finished 30 min ago, working',
      );
      isNull(await store.get(old.taskId), 'get(a task finished 2 h ago) after cleanup');
      sameRecord(
        await store.get(recent.taskId),
        recentDone,
        'get(a task finished 30 min ago) after cleanup',
      );
      sameRecord(await store.get(working.taskId), working, 'get(a working task) after cleanup');
    },
  ],

  [
    'cleanup of finished tasks without a TTL: exactly terminalTtlMs old goes, younger stays, twice removes nothing more',
    async (store) => {
      const now = Date.now();
      const due = record(alice, null, now - 10 * HOUR);
      const young = record(alice, null, now - 10 * HOUR);
      for (const task of [due, young]) await store.create(task, unlimited);
      await finish(store, due, now - HOUR);
      const youngDone = await finish(store, young, now - HOUR + 1);
      await removes(
        store,
        now,
        1,
        'cleanup(now, terminalTtlMs 1 h) count: finished exactly 1 h ago, finished 1 ms later',
      );
      isNull(await store.get(due.taskId), 'get(a task finished exactly terminalTtlMs ago)');
      sameRecord(
        await store.get(young.taskId),
        youngDone,
        'get(a task finished 1 ms less than terminalTtlMs ago)',
      );
      await removes(store, now, 0, 'a second cleanup(now) count');
    },
  ],

  [
    'cleanup keeps a finished task with a TTL until that TTL ends',
    async (store) => {
      const now = Date.now();
      const task = record(alice, 24 * HOUR, now - 10 * HOUR);
      await store.create(task, unlimited);
      const done = await finish(store, task, now - 9 * HOUR);
      await removes(
        store,
        now,
        0,
        'cleanup(now, terminalTtlMs 1 h) count with a task finished 9 h ago whose 24 h TTL runs on',
      );
      sameRecord(await store.get(task.taskId), done, 'get(a finished task within its TTL)');
    },
  ],

  [
    'cleanup after delete counts only what it removed',
    async (store) => {
      const now = Date.now();
      const gone = record(alice, HOUR, now - 2 * HOUR);
      const due = record(alice, HOUR, now - 2 * HOUR);
      await store.create(gone, unlimited);
      await store.create(due, unlimited);
      await store.delete(gone.taskId);
      await removes(
        store,
        now,
        1,
        'cleanup(now) count with two expired tasks, one of them deleted before',
      );
    },
  ],
];

/** Runs `cleanup(now)` with a `terminalTtlMs` of an hour, checking how many tasks it removed. */
async function removes(store: TaskStore, now: number, count: number, what: string): Promise<void> {
  is(await store.cleanup(now, { terminalTtlMs: HOUR }), count, what);
}
