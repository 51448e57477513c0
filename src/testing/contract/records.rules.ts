/**
 * The contract rules of one record: create, get (owner-scoped), compareAndSet, delete, and a
 * detailed record kept field by field.
 */
import assert from 'node:assert/strict';
import { TaskError } from '../../index.js';
import type { TaskRecord } from '../../index.js';
import { sameRecord, isNull, is, refusal, errorName, writeRefused } from './contract-assertions.js';
import { unlimited, newId, record, changed, completed } from './contract-fixtures.js';
import type { ContractRule } from './contract-fixtures.js';
import { alice } from './contract-owners.js';

/** Create, read, replace and delete one record; an owner sees only its own tasks. */
export const RECORD_RULES: readonly ContractRule[] = [
  [
    'create then get returns an equal record',
    async (store) => {
      const task = record();
      await store.create(task, unlimited);
      sameRecord(await store.get(task.taskId), task, 'get(taskId) after create');
    },
  ],

  [
    'get of an unknown id is null',
    async (store) => {
      isNull(await store.get(newId()), 'get(unknown id)');
      isNull(await store.get(newId(), alice), 'get(unknown id, owner)');
    },
  ],

  [
    'create refuses an id that exists, and keeps the first record',
    async (store) => {
      const task = record();
      await store.create(task, unlimited);
      const twin: TaskRecord = {
        ...record({ principal: 'mallory', tenant: 'x' }),
        taskId: task.taskId,
        statusMessage: 'twin',
      };
      const error = await refusal(
        store.create(twin, unlimited),
        'create(a record whose id exists)',
      );
      assert.ok(
        error instanceof TaskError,
        `create(a record whose id exists) must reject with a TaskError, got ${errorName(error)}`,
      );
      sameRecord(await store.get(task.taskId), task, 'get(taskId) after a refused duplicate');
    },
  ],

  [
    'owner-scoped get: the owner sees the task; another principal, tenant or anonymous do not',
    async (store) => {
      const task = record({ principal: 'alice', tenant: 't1' });
      await store.create(task, unlimited);
      sameRecord(
        await store.get(task.taskId, { principal: 'alice', tenant: 't1' }),
        task,
        'get(taskId, its owner)',
      );
      isNull(
        await store.get(task.taskId, { principal: 'bob', tenant: 't1' }),
        'get(taskId, another principal of the same tenant)',
      );
      isNull(
        await store.get(task.taskId, { principal: 'alice', tenant: 't2' }),
        'get(taskId, the same principal in another tenant)',
      );
      isNull(
        await store.get(task.taskId, { principal: 'alice' }),
        'get(taskId, the same principal without a tenant)',
      );
      isNull(
        await store.get(task.taskId, { principal: null, tenant: 't1' }),
        'get(taskId, anonymous in the same tenant)',
      );
    },
  ],

  [
    'an absent tenant is the null tenant',
    async (store) => {
      const task = record({ principal: 'alice' });
      await store.create(task, unlimited);
      sameRecord(
        await store.get(task.taskId, { principal: 'alice' }),
        task,
        'get(taskId, { principal }) of a task without a tenant',
      );
      sameRecord(
        await store.get(task.taskId, { principal: 'alice', tenant: null }),
        task,
        'get(taskId, { principal, tenant: null }) of a task without a tenant',
      );
      isNull(
        await store.get(task.taskId, { principal: 'alice', tenant: 't1' }),
        'get(taskId, the same principal with a tenant) of a task without a tenant',
      );
    },
  ],

  [
    'anonymous tasks belong to the anonymous owner only',
    async (store) => {
      const task = record({ principal: null });
      await store.create(task, unlimited);
      sameRecord(await store.get(task.taskId, { principal: null }), task, 'get(taskId, anonymous)');
      sameRecord(
        await store.get(task.taskId, { principal: null, tenant: null }),
        task,
        'get(taskId, anonymous with tenant null)',
      );
      isNull(await store.get(task.taskId, { principal: 'alice' }), 'get(anonymous task, alice)');
    },
  ],

  [
    'compareAndSet writes when the version matches and refuses a stale version',
    async (store) => {
      const task = record();
      await store.create(task, unlimited);
      const first = changed(task, 'one');
      const rival = changed(task, 'two');
      is(await store.compareAndSet(first, task.version), true, 'compareAndSet(matching version)');
      is(
        await store.compareAndSet(rival, task.version),
        false,
        'compareAndSet(a version that was already replaced)',
      );
      sameRecord(await store.get(task.taskId), first, 'get(taskId) after one write won');
    },
  ],

  [
    'compareAndSet replaces the whole record: fields the new record lacks are gone',
    async (store) => {
      const task: TaskRecord = {
        ...record(),
        status: 'input_required',
        statusMessage: 'Need a name',
        inputRequests: {
          name: {
            method: 'elicitation/create',
            params: { message: 'Name?', requestedSchema: { type: 'object', properties: {} } },
          },
        },
        usedInputKeys: ['name'],
        inputResponses: { earlier: { action: 'accept' } },
        cancelRequested: true,
        steps: { fetch: { value: 1 } },
      };
      await store.create(task, unlimited);
      const { statusMessage, ...rest } = completed(task, Date.now());
      is(await store.compareAndSet(rest, task.version), true, 'compareAndSet(matching version)');
      const read = await store.get(task.taskId);
      sameRecord(read, rest, 'get(taskId) after a write that drops fields');
      for (const key of [
        'statusMessage',
        'inputRequests',
        'inputResponses',
        'cancelRequested',
        'steps',
      ]) {
        assert.ok(
          (read as unknown as Record<string, unknown>)[key] === undefined,
          `get(taskId) after compareAndSet of a record without ${key}: ${key} is still there`,
        );
      }
    },
  ],

  [
    'compareAndSet of a missing task is false and creates nothing',
    async (store) => {
      const task = record();
      await writeRefused(store, task, 'a task never created');
    },
  ],

  [
    'of many concurrent compareAndSets on one version exactly one wins',
    async (store) => {
      const task = record();
      await store.create(task, unlimited);
      const rivals = Array.from({ length: 50 }, (_, i) => changed(task, `m${i}`));
      const results = await Promise.all(
        rivals.map((rival) => store.compareAndSet(rival, task.version)),
      );
      const winners = results.filter((won) => won === true).length;
      is(winners, 1, '50 concurrent compareAndSets on one version: number that returned true');
      const winner = rivals[results.indexOf(true)]!;
      const stored = await store.get(task.taskId);
      is(stored?.version, task.version + 1, 'the version stored after the race');
      sameRecord(stored, winner, 'get(taskId) after the race (the record of the one that won)');
    },
  ],

  [
    'delete removes the task and says whether it was there',
    async (store) => {
      const task = record();
      await store.create(task, unlimited);
      is(await store.delete(task.taskId), true, 'delete(a stored task)');
      isNull(await store.get(task.taskId), 'get(taskId) after delete');
      is(await store.delete(task.taskId), false, 'delete(a task deleted before)');
      is(await store.delete(newId()), false, 'delete(an id never stored)');
    },
  ],
];

/** Every field of a record, as deep as it goes, survives a write and a read. */
export const DETAILED_RECORD_RULES: readonly ContractRule[] = [
  [
    'keeps every field of a detailed record intact',
    async (store) => {
      const task = record({ principal: 'p', tenant: 'acme' });
      const rich: TaskRecord = {
        ...task,
        status: 'input_required',
        statusMessage: 'Need a name',
        pollIntervalMs: 250,
        inputRequests: {
          name: {
            method: 'elicitation/create',
            params: { message: 'Name?', requestedSchema: { type: 'object', properties: {} } },
          },
        },
        usedInputKeys: ['name', 'earlier'],
        inputResponses: { earlier: { action: 'accept', content: { x: 1 } } },
        cancelRequested: true,
        steps: { fetch: { value: { rows: [1, 'two', null] } }, 'log ✓': {} },
        version: 1,
      };
      await store.create(rich, unlimited);
      sameRecord(await store.get(task.taskId), rich, 'get(a record with every field)');
      const failed: TaskRecord = {
        ...task,
        status: 'failed',
        statusMessage: 'Boom',
        error: { code: -32001, message: 'Boom', data: { retry: false, at: [1, 'two'] } },
        lastUpdatedAt: task.lastUpdatedAt + 1,
        version: 2,
      };
      is(await store.compareAndSet(failed, rich.version), true, 'compareAndSet(failed)');
      sameRecord(await store.get(task.taskId), failed, 'get(a failed record with error data)');
      const done: TaskRecord = {
        ...task,
        status: 'completed',
        result: {
          content: [{ type: 'text', text: 'ünïcødé ✓' }],
          structuredContent: { sum: 3, nested: { list: [1, null, true] } },
          isError: false,
          _meta: { k: 'v' },
          resultType: 'complete',
        },
        version: 3,
      };
      is(await store.compareAndSet(done, failed.version), true, 'compareAndSet(completed)');
      sameRecord(await store.get(task.taskId), done, 'get(a completed record with its result)');
    },
  ],
];
