/**
 * The contract rules of `list` (an owner’s tasks, page by page) for a store that has it.
 */
import assert from 'node:assert/strict';
import type { TaskRecord, TaskState } from '../../index.js';
import type { TaskOwner, TaskStore } from '../../entries/store.js';
import { sameRecord, is, finish, everyPage, refusesForeignCursors } from './contract-assertions.js';
import { HOUR, unlimited, record, inEveryState, expiredCompleted } from './contract-fixtures.js';
import type { ContractRule } from './contract-fixtures.js';
import { alice, aliceOfTenant, bob, carol } from './contract-owners.js';

/** An owner’s listing: newest first, each task once, cursors that keep their place. */
export const LISTING_RULES: readonly ContractRule[] = [
  [
    'list (when the store has it): the owner’s tasks newest first, page by page, each once',
    async (store) => {
      if (!store.list) return;
      const t0 = Date.now() - 60_000;
      const mine: TaskRecord[] = [];
      for (let i = 0; i < 7; i++) mine.push(record(alice, HOUR, t0 + (i < 2 ? 0 : i) * 1000));
      const others = [record(bob), record(aliceOfTenant), record(bob)];
      for (const task of [...mine, ...others]) await store.create(task, unlimited);
      const expected = mine
        .slice()
        .sort((a, b) => b.createdAt - a.createdAt || (a.taskId < b.taskId ? 1 : -1))
        .map((task) => task.taskId);
      const seen = await listAll(store, alice, 3);
      assert.deepStrictEqual(seen, expected, 'list(alice, limit 3): the pages, in order');
      const page = await store.list(alice, { limit: 100 });
      sameRecord(page.tasks[0], mine[6]!, 'list(alice): the newest record');
      is(page.nextCursor, undefined, 'list(alice, limit 100): nextCursor of the only page');
      assert.deepStrictEqual(
        await listAll(store, aliceOfTenant, 10),
        [others[1]!.taskId],
        'list(alice of tenant t1): only her tasks in that tenant',
      );
      is((await listAll(store, carol, 10)).length, 0, 'list(an owner without tasks)');
    },
  ],

  [
    'list (when the store has it): expired and deleted tasks never appear',
    async (store) => {
      if (!store.list) return;
      const live = record();
      const expired = record(alice, HOUR, Date.now() - 2 * HOUR);
      const deleted = record();
      for (const task of [live, expired, deleted]) await store.create(task, unlimited);
      await store.delete(deleted.taskId);
      assert.deepStrictEqual(await listAll(store, alice, 1), [live.taskId], 'list(alice)');
    },
  ],

  [
    'list (when the store has it): a cursor keeps its place while tasks are created',
    async (store) => {
      if (!store.list) return;
      const t0 = Date.now() - 60_000;
      const first = [0, 1, 2, 3, 4].map((i) => record(alice, HOUR, t0 + i));
      for (const task of first) await store.create(task, unlimited);
      const page1 = await store.list(alice, { limit: 2 });
      for (let i = 0; i < 3; i++) await store.create(record(), unlimited);
      const rest: string[] = page1.tasks.map((task) => task.taskId);
      let cursor = page1.nextCursor;
      while (cursor !== undefined) {
        const page = await store.list(alice, { cursor, limit: 2 });
        rest.push(...page.tasks.map((task) => task.taskId));
        cursor = page.nextCursor;
      }
      assert.deepStrictEqual(
        rest,
        first.map((task) => task.taskId).reverse(),
        'the pages after the first: the older tasks, none twice, none missing',
      );
    },
  ],

  [
    'list (when the store has it): a cursor it did not make is refused with a TaskError',
    async (store) => {
      if (!store.list) return;
      await store.create(record(), unlimited);
      await refusesForeignCursors('list', (cursor) => store.list!(alice, { cursor, limit: 5 }));
    },
  ],

  [
    'list (when the store has it): a cursor keeps its place under concurrent creates, filtered or not',
    async (store) => {
      if (!store.list) return;
      const t0 = Date.now() - 60_000;
      const older = [0, 1, 2, 3, 4, 5].map((i) => ({
        ...record(alice, HOUR, t0 + i),
        status: (i % 2 === 0 ? 'completed' : 'working') as TaskState,
      }));
      for (const task of older) await store.create(task, unlimited);
      const status = store.listsByStatus === true ? (['completed'] as TaskState[]) : undefined;
      const first = await store.list(alice, { limit: 1, ...(status && { status }) });
      // Newer tasks, of both states, land while the rest of the pages are read.
      const creating = Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          store.create({ ...record(), status: i % 2 === 0 ? 'completed' : 'working' }, unlimited),
        ),
      );
      const rest = first.tasks.map((task) => task.taskId);
      let cursor = first.nextCursor;
      while (cursor !== undefined) {
        const page = await store.list(alice, { cursor, limit: 1, ...(status && { status }) });
        rest.push(...page.tasks.map((task) => task.taskId));
        cursor = page.nextCursor;
      }
      await creating;
      const expected = older
        .filter((task) => status === undefined || task.status === 'completed')
        .map((task) => task.taskId)
        .reverse();
      assert.deepStrictEqual(
        rest,
        expected,
        'the pages: the older tasks, none twice, none missing',
      );
    },
  ],

  [
    'list by status (when the store filters): one state or several, by the current status, newest first, owner-scoped',
    async (store) => {
      if (!store.list || store.listsByStatus !== true) return;
      const mine = inEveryState(15, () => alice);
      const othersDone = [bob, aliceOfTenant].map((owner) => ({
        ...record(owner),
        status: 'completed' as TaskState,
      }));
      for (const task of [...mine, expiredCompleted(alice), ...othersDone]) {
        await store.create(task, unlimited);
      }
      // A task that finishes is listed by the status it has now.
      const finished = await finish(store, mine[0]!, Date.now());
      const now = [finished, ...mine.slice(1)];
      const newest = (wanted: TaskState[]): string[] =>
        now
          .filter((task) => wanted.includes(task.status))
          .map((task) => task.taskId)
          .reverse();
      assert.deepStrictEqual(
        await listAll(store, alice, 2, 'completed'),
        newest(['completed']),
        'list(alice, status "completed", limit 2): the pages, in order',
      );
      assert.deepStrictEqual(
        await listAll(store, alice, 2, ['failed', 'cancelled']),
        newest(['failed', 'cancelled']),
        'list(alice, status ["failed", "cancelled"], limit 2): the pages, in order',
      );
      assert.deepStrictEqual(
        await listAll(store, alice, 100, ['working']),
        newest(['working']),
        'list(alice, status ["working"]): a finished task no longer listed as working',
      );
      const page = await store.list(alice, { limit: 100, status: 'input_required' });
      sameRecord(page.tasks[0], mine[14]!, 'list(alice, input_required): the newest record');
      assert.deepStrictEqual(
        await listAll(store, aliceOfTenant, 10, 'completed'),
        [othersDone[1]!.taskId],
        'list(alice of tenant t1, completed): only her task in that tenant',
      );
    },
  ],

  [
    'list by status (when the store filters): a rare state far down the listing is still reached, page by page',
    async (store) => {
      if (!store.list || store.listsByStatus !== true) return;
      const t0 = Date.now() - 60_000;
      const rare = [0, 1, 2].map((i) => ({ ...record(alice, HOUR, t0 + i), status: 'failed' }));
      for (const task of rare) await store.create(task as TaskRecord, unlimited);
      await Promise.all(
        Array.from({ length: 400 }, (_, i) =>
          store.create(record(alice, HOUR, t0 + 1000 + i), unlimited),
        ),
      );
      assert.deepStrictEqual(
        await listAll(store, alice, 2, 'failed'),
        rare.map((task) => task.taskId).reverse(),
        'list(alice, status "failed", limit 2) under 400 newer working tasks',
      );
    },
  ],
];

/** Every task id of `owner` (in `status`, when given), page after page. */
function listAll(
  store: TaskStore,
  owner: TaskOwner,
  limit: number,
  status?: TaskState | TaskState[],
): Promise<string[]> {
  return everyPage('list', limit, (cursor) =>
    store.list!(owner, {
      limit,
      ...(cursor !== undefined && { cursor }),
      ...(status !== undefined && { status }),
    }),
  );
}
