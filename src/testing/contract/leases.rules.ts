/**
 * The contract rules of leases (TaskStoreLeases) for a store that has them.
 */
import assert from 'node:assert/strict';
import type { TaskStore, TaskStoreLeases } from '../../entries/store.js';
import { HOUR, unlimited, record, changed, completed } from './contract-fixtures.js';
import type { ContractRule } from './contract-fixtures.js';

/** A lease holds its tasks while renewed; a lapsed or released lease is named once. */
export const LEASE_RULES: readonly ContractRule[] = [
  [
    'leases (when the store has them): a task created with heldBy is held until a write makes it terminal',
    async (store) => {
      if (!leased(store)) return;
      const held = { ...record(), heldBy: 'i1' };
      const free = record();
      const other = { ...record(), heldBy: 'i2' };
      for (const task of [held, free, other]) await store.create(task, unlimited);
      assert.deepStrictEqual(await store.heldTasks('i1'), [held.taskId], 'heldTasks(i1)');
      const progressed = changed(held, 'half way');
      await store.compareAndSet(progressed, held.version);
      assert.deepStrictEqual(
        await store.heldTasks('i1'),
        [held.taskId],
        'heldTasks(i1) after a write that leaves the task live',
      );
      assert.equal(await store.compareAndSet(completed(progressed, Date.now()), 2), true);
      assert.deepStrictEqual(await store.heldTasks('i1'), [], 'heldTasks(i1) once it completed');
      assert.deepStrictEqual(await store.heldTasks('i2'), [other.taskId], 'heldTasks(i2)');
    },
  ],

  [
    'leases (when the store has them): a write with { hold: true } holds the task for the instance its record names',
    async (store) => {
      if (!leased(store)) return;
      const held = { ...record(), heldBy: 'i1' };
      await store.create(held, unlimited);
      const moved = { ...changed(held, 'taken over'), heldBy: 'i2' };
      assert.equal(await store.compareAndSet(moved, held.version, { hold: true }), true);
      assert.deepStrictEqual(
        await store.heldTasks('i2'),
        [held.taskId],
        'heldTasks(i2) after a write that moved the task to it',
      );
      await store.releaseTasks('i1', [held.taskId]);
      assert.ok(
        !(await store.heldTasks('i1')).includes(held.taskId),
        'heldTasks(i1) after releaseTasks of the task it held before',
      );
      assert.equal(await store.compareAndSet(completed(moved, Date.now()), moved.version), true);
      assert.deepStrictEqual(await store.heldTasks('i2'), [], 'heldTasks(i2) once it completed');
    },
  ],

  [
    'leases (when the store has them): a lease that ran out is named to the others, and forgotten once it holds nothing',
    async (store) => {
      if (!leased(store)) return;
      const task = { ...record(), heldBy: 'dead' };
      await store.create(task, unlimited);
      assert.deepStrictEqual(await store.renewLease('dead', 100), [], 'renewLease(dead)');
      assert.deepStrictEqual(await store.renewLease('alive', HOUR), [], 'renewLease(alive)');
      assert.equal(await store.releaseTasks('dead', []), false, 'releaseTasks(a live lease)');
      await new Promise((resolve) => setTimeout(resolve, 200));
      assert.deepStrictEqual(await store.renewLease('alive', HOUR), ['dead'], 'expired leases');
      assert.deepStrictEqual(await store.heldTasks('dead'), [task.taskId], 'heldTasks(dead)');
      assert.equal(
        await store.releaseTasks('dead', []),
        false,
        'releaseTasks(a lease that ran out, still holding a task)',
      );
      assert.equal(await store.releaseTasks('dead', [task.taskId]), true, 'releaseTasks(all)');
      assert.equal(await store.releaseTasks('dead', [task.taskId]), true, 'releaseTasks, again');
      assert.deepStrictEqual(await store.renewLease('alive', HOUR), [], 'expired leases after');
      assert.deepStrictEqual(await store.get(task.taskId), task, 'the task itself');
    },
  ],

  [
    'leases (when the store has them): releaseLease ends a live lease with what it holds',
    async (store) => {
      if (!leased(store)) return;
      const task = { ...record(), heldBy: 'leaving' };
      await store.create(task, unlimited);
      await store.renewLease('leaving', 100);
      await store.releaseLease('leaving');
      await new Promise((resolve) => setTimeout(resolve, 200));
      assert.deepStrictEqual(await store.renewLease('alive', HOUR), [], 'expired leases');
      assert.deepStrictEqual(await store.heldTasks('leaving'), [], 'heldTasks(leaving)');
      assert.deepStrictEqual(await store.get(task.taskId), task, 'the task itself');
    },
  ],
];

/** Whether the store has leases (all of TaskStoreLeases; the contract checks the rest). */
function leased(store: TaskStore): store is TaskStore & Required<TaskStoreLeases> {
  return (
    typeof store.renewLease === 'function' &&
    typeof store.heldTasks === 'function' &&
    typeof store.releaseTasks === 'function' &&
    typeof store.releaseLease === 'function'
  );
}
