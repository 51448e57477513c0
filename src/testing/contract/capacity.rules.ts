/**
 * The contract rules of capacity: `maxRows` and `maxTasksPerOwner` hold, under concurrent creates too.
 */
import assert from 'node:assert/strict';
import { TaskQuotaError } from '../../index.js';
import { TaskStoreFullError } from '../../entries/store.js';
import type { TaskRecord } from '../../index.js';
import { sameRecord, isNull, is, accepted, refusal, errorName } from './contract-assertions.js';
import { HOUR, record } from './contract-fixtures.js';
import type { ContractRule } from './contract-fixtures.js';
import { alice, aliceOfTenant, bob, carol } from './contract-owners.js';

/** A full store or a full owner quota refuses a create; expired tasks hold no place. */
export const CAPACITY_RULES: readonly ContractRule[] = [
  [
    'maxRows: a create beyond it is refused as store full; freeing a row lets it in',
    async (store) => {
      const limit = { maxRows: 3 };
      const tasks = [record(), record(), record()];
      for (const task of tasks) await store.create(task, limit);
      const extra = record();
      const error = await refusal(store.create(extra, limit), 'create(a 4th task, maxRows 3)');
      assert.ok(
        error instanceof TaskStoreFullError,
        `create(a 4th task, maxRows 3) must reject with TaskStoreFullError, got ${errorName(error)}`,
      );
      is(error.code, -32603, 'the TaskStoreFullError code');
      assert.match(error.message, /full/, 'the TaskStoreFullError message must say "full"');
      isNull(await store.get(extra.taskId), 'get(the refused task)');
      await store.delete(tasks[0]!.taskId);
      await accepted(
        store.create(extra, limit),
        'create(at maxRows 3, after one of 3 was deleted)',
      );
      sameRecord(await store.get(extra.taskId), extra, 'get(a task created after a delete)');
    },
  ],

  [
    'maxRows: expired tasks do not hold rows',
    async (store) => {
      const limit = { maxRows: 2 };
      await store.create(record(alice, HOUR, Date.now() - 2 * HOUR), limit);
      await store.create(record(), limit);
      const third = record();
      await accepted(
        store.create(third, limit),
        'create(a task at maxRows 2, with one live and one expired task stored)',
      );
      sameRecord(
        await store.get(third.taskId),
        third,
        'get(a task created at maxRows 2 beside one live and one expired task)',
      );
    },
  ],

  [
    'maxRows is enforced under concurrent creates',
    async (store) => {
      const results = await Promise.allSettled(
        Array.from({ length: 20 }, () => store.create(record(), { maxRows: 5 })),
      );
      const accepted = results.filter((r) => r.status === 'fulfilled').length;
      is(accepted, 5, '20 concurrent creates with maxRows 5: number accepted');
      for (const result of results) {
        if (result.status === 'rejected' && !(result.reason instanceof TaskStoreFullError)) {
          assert.fail(
            `a concurrent create beyond maxRows must reject with TaskStoreFullError, got ${errorName(result.reason)}`,
          );
        }
      }
    },
  ],

  [
    "maxTasksPerOwner: at the quota the finished task that expires first makes room, never a live one or another owner's",
    async (store) => {
      const quota = { maxRows: null, maxTasksPerOwner: 3 };
      const now = Date.now();
      // `first` expires first (made earlier, same TTL); `second` finishes too; `live` runs.
      const first = record(alice, HOUR, now - 2000);
      const second = record(alice, HOUR, now - 1000);
      const live = record(alice, HOUR, now - 500);
      const bobs = record(bob);
      for (const task of [first, second, live, bobs]) await store.create(task, quota);
      const finished = (task: TaskRecord): TaskRecord => ({
        ...task,
        status: 'completed',
        result: { content: [], resultType: 'complete' },
        lastUpdatedAt: Date.now(),
        version: 2,
      });
      // Finished in the other order: room goes by expiry, not by when a task finished.
      const secondDone = finished(second);
      is(await store.compareAndSet(secondDone, 1), true, 'compareAndSet(finish a task)');
      is(await store.compareAndSet(finished(first), 1), true, 'compareAndSet(finish a task)');
      const fourth = record(alice);
      await accepted(store.create(fourth, quota), "create(alice's 4th task, quota 3, 2 finished)");
      isNull(await store.get(first.taskId), 'get(the finished task that expires first)');
      sameRecord(await store.get(second.taskId), secondDone, 'get(the other finished task)');
      sameRecord(await store.get(live.taskId), live, 'get(a live task at the quota)');
      sameRecord(await store.get(fourth.taskId), fourth, 'get(the task that took the place)');
      const fifth = record(alice);
      await accepted(store.create(fifth, quota), "create(alice's 5th task, quota 3, 1 finished)");
      isNull(await store.get(second.taskId), 'get(the last finished task, given up)');
      const sixth = record(alice);
      const error = await refusal(store.create(sixth, quota), 'create(at quota 3, all live)');
      assert.ok(
        error instanceof TaskQuotaError,
        `create(at maxTasksPerOwner 3, every task live) must reject with TaskQuotaError, got ${errorName(error)}`,
      );
      is(error.code, -32603, 'the TaskQuotaError code');
      assert.deepStrictEqual(error.data, { limit: 'maxTasksPerOwner', max: 3 });
      isNull(await store.get(sixth.taskId), 'get(the refused task)');
      for (const task of [live, fourth, fifth]) {
        sameRecord(await store.get(task.taskId), task, 'get(a live task after a refusal)');
      }
      sameRecord(await store.get(bobs.taskId), bobs, "get(bob's task, after alice's quota)");
      await accepted(
        store.create(record(bob), quota),
        "create(bob's 2nd task beside alice at her quota)",
      );
    },
  ],

  [
    'maxTasksPerOwner: owners are compared exactly, expired tasks do not count, a delete frees a place',
    async (store) => {
      const quota = { maxRows: null, maxTasksPerOwner: 2 };
      await store.create(record(alice, HOUR, Date.now() - 2 * HOUR), quota);
      const kept = record(alice);
      await store.create(kept, quota);
      const second = record(alice);
      await accepted(store.create(second, quota), 'create(at quota 2, beside one expired task)');
      await accepted(
        store.create(record(aliceOfTenant), quota),
        'create(the same principal in a tenant, another owner)',
      );
      await refusal(store.create(record(alice), quota), 'create(at quota 2, both live)');
      await store.delete(kept.taskId);
      await accepted(store.create(record(alice), quota), 'create(at quota 2, after a delete)');
      await accepted(
        store.create(record(alice), { maxRows: null }),
        'create(with no maxTasksPerOwner: no quota)',
      );
    },
  ],

  [
    'maxTasksPerOwner is enforced under concurrent creates',
    async (store) => {
      const quota = { maxRows: null, maxTasksPerOwner: 5 };
      const results = await Promise.allSettled(
        Array.from({ length: 20 }, () => store.create(record(carol), quota)),
      );
      is(
        results.filter((r) => r.status === 'fulfilled').length,
        5,
        '20 concurrent creates of one owner with maxTasksPerOwner 5: number accepted',
      );
      for (const result of results) {
        if (result.status === 'rejected' && !(result.reason instanceof TaskQuotaError)) {
          assert.fail(
            `a concurrent create beyond the quota must reject with TaskQuotaError, got ${errorName(result.reason)}`,
          );
        }
      }
      await accepted(
        store.create(record(bob), quota),
        'create(another owner, beside a full quota)',
      );
    },
  ],
];
