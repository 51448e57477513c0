/**
 * The contract rules of `listAll` (every owner’s tasks, for operators) for a store that has it.
 */
import assert from 'node:assert/strict';
import type { TaskRecord, TaskState } from '../../index.js';
import type { TaskOwner, TaskStore } from '../../entries/store.js';
import { sameRecord, is, finish, everyPage, refusesForeignCursors } from './contract-assertions.js';
import {
  HOUR,
  unlimited,
  record,
  newestFirst,
  inEveryState,
  expiredCompleted,
} from './contract-fixtures.js';
import type { ContractRule } from './contract-fixtures.js';
import { alice, aliceOfTenant, bob, carol } from './contract-owners.js';

/** Every owner’s listing: newest first, each task once, filtered by status or tool. */
export const LIST_ALL_RULES: readonly ContractRule[] = [
  [
    'listAll (when the store has it): every owner’s tasks newest first, page by page, each once',
    async (store) => {
      if (!store.listAll) return;
      const t0 = Date.now() - 60_000;
      const anonymous: TaskOwner = { principal: null, tenant: null };
      const owners = [alice, bob, aliceOfTenant, anonymous, carol];
      // Many tasks of one millisecond (their order is their id's), between older and newer ones.
      const tasks = Array.from({ length: 40 }, (_, i) =>
        record(owners[i % owners.length], HOUR, t0 + (i < 5 ? i : i < 35 ? 100 : i * 10)),
      );
      for (const task of tasks) await store.create(task, unlimited);
      const expected = newestFirst(tasks);
      assert.deepStrictEqual(
        await listEveryOwner(store, 4),
        expected,
        'listAll(limit 4): the pages, in order',
      );
      const page = await store.listAll({ limit: 100 });
      sameRecord(page.tasks[0], tasks[39]!, 'listAll(limit 100): the newest record');
      is(page.nextCursor, undefined, 'listAll(limit 100): nextCursor of the only page');
      // A cursor keeps its place when the task it ended at is deleted before the next page.
      const first = await store.listAll({ limit: 12 });
      const last = first.tasks[first.tasks.length - 1]!;
      is(await store.delete(last.taskId), true, 'delete(the last task of a page)');
      const rest = await listEveryOwner(store, 7, first.nextCursor);
      assert.deepStrictEqual(
        [...first.tasks.map((task) => task.taskId), ...rest],
        expected,
        'listAll after the page’s last task was deleted: the pages go on where it stood',
      );
    },
  ],

  [
    'listAll (when the store has it): expired and deleted tasks never appear, before or after cleanup',
    async (store) => {
      if (!store.listAll) return;
      const live = [record(alice), record(bob, null)];
      const expired = [record(alice, HOUR, Date.now() - 2 * HOUR), record(carol, 1000, 0)];
      const deleted = record(bob);
      for (const task of [...live, ...expired, deleted]) await store.create(task, unlimited);
      await store.delete(deleted.taskId);
      const listed = newestFirst(live);
      assert.deepStrictEqual(await listEveryOwner(store, 1), listed, 'listAll before cleanup');
      await store.cleanup(Date.now(), { terminalTtlMs: HOUR });
      assert.deepStrictEqual(await listEveryOwner(store, 1), listed, 'listAll after cleanup');
    },
  ],

  [
    'listAll (when the store has it): a cursor keeps its place under concurrent creates, filtered or not',
    async (store) => {
      if (!store.listAll) return;
      const t0 = Date.now() - 60_000;
      const older = [0, 1, 2, 3, 4, 5, 6, 7].map((i) => ({
        ...record(i % 2 === 0 ? alice : bob, HOUR, t0 + i),
        toolName: i % 4 < 2 ? 'render' : 'export',
      }));
      for (const task of older) await store.create(task, unlimited);
      const stored = [...older];
      for (const [round, toolName] of [undefined, 'render'].entries()) {
        const listed = newestFirst(
          stored.filter((task) => toolName === undefined || task.toolName === toolName),
        );
        const first = await store.listAll({ limit: 1, ...(toolName && { toolName }) });
        // Newer tasks, of both tools and several owners, land while the other pages are read
        // (later than any task of the round before, whose newest may start this round's pages).
        const later = Date.now() + (round + 1) * 1000;
        const newer = Array.from({ length: 20 }, (_, i) => ({
          ...record(i % 2 === 0 ? carol : alice, HOUR, later),
          toolName: i % 2 ? 'render' : 'export',
        }));
        const creating = Promise.all(newer.map((task) => store.create(task, unlimited)));
        const seen = first.tasks.map((task) => task.taskId);
        seen.push(...(await listEveryOwner(store, 1, first.nextCursor, { toolName })));
        await creating;
        stored.push(...newer);
        assert.deepStrictEqual(
          seen,
          listed,
          `listAll(toolName ${String(toolName)}): the tasks there at the first page, none twice, none missing`,
        );
      }
    },
  ],

  [
    'listAll (when the store has it): toolName keeps that tool’s tasks only, with a status filter too',
    async (store) => {
      if (!store.listAll) return;
      const t0 = Date.now() - 60_000;
      const tools = ['render', 'export', undefined];
      const tasks = Array.from({ length: 24 }, (_, i) => {
        const task: TaskRecord = {
          ...record([alice, bob, carol][i % 3], HOUR, t0 + i),
          status: i % 2 === 0 ? 'working' : 'completed',
        };
        const toolName = tools[i % 4 === 3 ? 2 : i % 2];
        return toolName === undefined ? task : { ...task, toolName };
      });
      for (const task of tasks) await store.create(task, unlimited);
      const wanted = (tool: string, status?: TaskState): string[] =>
        newestFirst(
          tasks.filter(
            (task) => task.toolName === tool && (status === undefined || task.status === status),
          ),
        );
      assert.deepStrictEqual(
        await listEveryOwner(store, 2, undefined, { toolName: 'render' }),
        wanted('render'),
        'listAll(toolName "render", limit 2)',
      );
      assert.deepStrictEqual(
        await listEveryOwner(store, 100, undefined, { toolName: 'nothing made me' }),
        [],
        'listAll(toolName of no task)',
      );
      if (store.listsByStatus !== true) return;
      assert.deepStrictEqual(
        await listEveryOwner(store, 2, undefined, { toolName: 'export', status: 'completed' }),
        wanted('export', 'completed'),
        'listAll(toolName "export", status "completed", limit 2)',
      );
    },
  ],

  [
    'listAll by status (when the store filters): one state or several, by the current status, every owner',
    async (store) => {
      if (!store.listAll || store.listsByStatus !== true) return;
      const tasks = inEveryState(15, (i) => [alice, bob, aliceOfTenant][i % 3]!);
      for (const task of [...tasks, expiredCompleted(bob)]) await store.create(task, unlimited);
      // A task that finishes is listed by the status it has now.
      const finished = await finish(store, tasks[0]!, Date.now());
      const now = [finished, ...tasks.slice(1)];
      const wanted = (status: TaskState[]): string[] =>
        newestFirst(now.filter((task) => status.includes(task.status)));
      assert.deepStrictEqual(
        await listEveryOwner(store, 2, undefined, { status: 'completed' }),
        wanted(['completed']),
        'listAll(status "completed", limit 2)',
      );
      assert.deepStrictEqual(
        await listEveryOwner(store, 2, undefined, { status: ['failed', 'cancelled'] }),
        wanted(['failed', 'cancelled']),
        'listAll(status ["failed", "cancelled"], limit 2)',
      );
      assert.deepStrictEqual(
        await listEveryOwner(store, 100, undefined, { status: ['working'] }),
        wanted(['working']),
        'listAll(status ["working"]): a finished task no longer listed as working',
      );
    },
  ],

  [
    'listAll (when the store has it): a cursor it did not make is refused with a TaskError',
    async (store) => {
      if (!store.listAll) return;
      await store.create(record(), unlimited);
      await refusesForeignCursors('listAll', (cursor) => store.listAll!({ cursor, limit: 5 }));
    },
  ],
];

/** Every task id `listAll` gives (with `filters`), page after page from `cursor`. */
function listEveryOwner(
  store: TaskStore,
  limit: number,
  cursor?: string,
  filters: { status?: TaskState | TaskState[]; toolName?: string | undefined } = {},
): Promise<string[]> {
  const { status, toolName } = filters;
  return everyPage(
    'listAll',
    limit,
    (next) =>
      store.listAll!({
        limit,
        ...(next !== undefined && { cursor: next }),
        ...(status !== undefined && { status }),
        ...(toolName !== undefined && { toolName }),
      }),
    cursor,
  );
}
