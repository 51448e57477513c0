/**
 * The limits on what one owner can make the server hold: the size of a task record
 * (`maxTaskBytes`), the tasks of one owner (`maxTasksPerOwner`) and the bytes of the in-memory
 * store (`maxBytes`). Each refusal names its limit and changes nothing.
 */
import { Logger } from '@nestjs/common';
import { keptBytes } from '../src/task.js';
import { TaskQuotaError, TaskTooLargeError, type TaskRecord } from '../src/index.js';
import { InMemoryTaskStore, TaskStoreFullError } from '../src/entries/store.js';
import { accept, elicit, rejection, serviceWith, textResult } from './support/helpers.js';
import { KeptLog } from './support/kept-log.js';

const alice = { principal: 'alice' };
const mallory = { principal: 'mallory' };

describe('maxTaskBytes', () => {
  const small = { maxTaskBytes: 4_096 };

  it('a tasks/update answer that would pass it is -32602 naming the limit, and changes nothing', async () => {
    const { service, store } = serviceWith(small);
    const task = await service.create(alice);
    await service.requireInput(task.taskId, { name: elicit('Name?') });
    const before = (await store.get(task.taskId))!;
    const error = (await rejection(
      service.update(task.taskId, alice, { name: accept('x'.repeat(5_000)) }),
    )) as TaskTooLargeError;
    expect(error).toBeInstanceOf(TaskTooLargeError);
    expect(error.toJsonRpcError()).toEqual({
      code: -32602,
      message: expect.stringMatching(/^Invalid params: .*over maxTaskBytes \(4096\)$/),
      data: { limit: 'maxTaskBytes', max: 4096 },
    });
    expect(await store.get(task.taskId)).toEqual(before);
    // A smaller answer to the same request is taken as usual.
    const answered = await service.update(task.taskId, alice, { name: accept('Ada') });
    expect(answered.status).toBe('working');
  });

  it('every write records what the task keeps from clients and tools, in UTF-8 bytes of JSON', async () => {
    const { service, store } = serviceWith();
    const task = await service.create(alice, { statusMessage: 'Queued' });
    expect(task.bytes).toBe('Queued'.length);
    const asking = await service.requireInput(task.taskId, { name: elicit('Name?') });
    const json = (value: unknown): number => Buffer.byteLength(JSON.stringify(value));
    expect(asking.bytes).toBe(
      'Queued'.length + json(asking.inputRequests) + json(asking.usedInputKeys),
    );
    const result = textResult('é'.repeat(100)); // two bytes a character in UTF-8
    await service.update(task.taskId, alice, { name: accept('Ada') });
    await service.takeInputResponses(task.taskId);
    const done = await service.complete(task.taskId, result);
    expect(done.bytes).toBe(json(done.result) + json(done.usedInputKeys));
    expect(json(done.result)).toBeGreaterThan(200);
    expect((await store.get(task.taskId))!.bytes).toBe(done.bytes);
  });

  it('the size kept by each write, counted from the change, is the size of the whole record', async () => {
    const { service } = serviceWith({ cancellation: 'cooperative' });
    const check = (record: TaskRecord): void => {
      const { bytes, ...rest } = record;
      expect(bytes).toBe(keptBytes(rest as TaskRecord));
    };
    const task = await service.create(alice, {}, { toolName: 'x', arguments: { q: 'ünï' } });
    check(task);
    check(await service.progress(task.taskId, 'step one ✓'));
    check(await service.requireInput(task.taskId, { a: elicit('A?'), b: elicit('B?') }));
    check(await service.update(task.taskId, alice, { a: accept('Ada') }));
    check(await service.progress(task.taskId, null));
    check(await service.update(task.taskId, alice, { b: accept('Bob') }));
    await service.takeInputResponses(task.taskId);
    check(await service.status(task.taskId));
    check(await service.cancel(task.taskId, alice));
    check(await service.complete(task.taskId, textResult('done'), { statusMessage: 'Done' }));
  });

  it('a result that would pass it fails the task with a generic -32603; the reason, with the tool, is logged', async () => {
    const log = new KeptLog();
    Logger.overrideLogger(log);
    try {
      const { service } = serviceWith(small);
      const task = await service.create(alice, {}, { toolName: 'report' });
      const error = await rejection(service.complete(task.taskId, textResult('x'.repeat(5_000))));
      expect(error).toBeInstanceOf(TaskTooLargeError);
      const failed = await service.get(task.taskId, alice);
      expect(failed.status).toBe('failed');
      expect(failed.error).toEqual({ code: -32603, message: 'Internal error' });
      expect(failed.result).toBeUndefined();
      expect(log.errors.join('\n')).toMatch(
        /Task tool report: its result would make the task \d+ bytes, over maxTaskBytes \(4096\)/,
      );
    } finally {
      Logger.overrideLogger(true);
    }
  });

  it('so does an error whose data would pass it', async () => {
    const { service } = serviceWith(small);
    const task = await service.create(alice);
    await rejection(
      service.fail(task.taskId, { code: -32000, message: 'boom', data: 'x'.repeat(5_000) }),
    );
    expect((await service.get(task.taskId, alice)).error).toEqual({
      code: -32603,
      message: 'Internal error',
    });
  });

  it('input requests and status messages that would pass it are refused, the task unchanged', async () => {
    const { service, store } = serviceWith(small);
    const task = await service.create(alice);
    const before = (await store.get(task.taskId))!;
    expect(
      await rejection(service.requireInput(task.taskId, { name: elicit('x'.repeat(5_000)) })),
    ).toBeInstanceOf(TaskTooLargeError);
    expect(await rejection(service.progress(task.taskId, 'x'.repeat(5_000)))).toBeInstanceOf(
      TaskTooLargeError,
    );
    expect(await store.get(task.taskId)).toEqual(before);
  });
});

describe('maxTasksPerOwner', () => {
  it('a create→cancel loop only ever hurts its own owner: its finished tasks make room', async () => {
    const { service, store } = serviceWith({ maxTasksPerOwner: 5, maxRows: 20 });
    const alices = await service.create(alice);
    for (let i = 0; i < 2_000; i++) {
      const task = await service.create(mallory);
      await service.cancel(task.taskId, mallory);
    }
    expect((store as InMemoryTaskStore).size).toBe(6);
    expect((await service.get(alices.taskId, alice)).status).toBe('working');
    for (let i = 0; i < 4; i++) await service.create(alice);
  });

  it('an owner whose tasks all run is refused with -32603 naming the quota; others go on', async () => {
    const { service } = serviceWith({ maxTasksPerOwner: 3 });
    for (let i = 0; i < 3; i++) await service.create(mallory);
    const error = (await rejection(service.create(mallory))) as TaskQuotaError;
    expect(error).toBeInstanceOf(TaskQuotaError);
    expect(error.toJsonRpcError()).toEqual({
      code: -32603,
      message: 'Task quota reached (maxTasksPerOwner 3)',
      data: { limit: 'maxTasksPerOwner', max: 3 },
    });
    await service.create(alice);
  });

  it('is 100 by default, and null turns it off', async () => {
    const { service } = serviceWith();
    for (let i = 0; i < 100; i++) await service.create(mallory);
    expect(await rejection(service.create(mallory))).toBeInstanceOf(TaskQuotaError);
    const open = serviceWith({ maxTasksPerOwner: null }).service;
    for (let i = 0; i < 101; i++) await open.create(mallory);
  });
});

describe('InMemoryTaskStore maxBytes', () => {
  it('refuses a create past it like a full store, naming maxBytes', async () => {
    const store = new InMemoryTaskStore({ maxBytes: 2_000 });
    const { service } = serviceWith({ maxTasksPerOwner: null }, store);
    let created = 0;
    let error: unknown;
    for (;;) {
      try {
        await service.create(alice, { statusMessage: 'x'.repeat(200) });
        created++;
      } catch (thrown) {
        error = thrown;
        break;
      }
    }
    expect(created).toBeGreaterThan(2);
    expect(store.bytes).toBeLessThanOrEqual(2_000);
    expect(error).toBeInstanceOf(TaskStoreFullError);
    expect((error as TaskStoreFullError).toJsonRpcError()).toEqual({
      code: -32603,
      message: 'Task store is full (maxBytes 2000)',
      data: { limit: 'maxBytes', max: 2000 },
    });
  });

  it('refuses a write that grows a record past it, and takes one that does not', async () => {
    const store = new InMemoryTaskStore({ maxBytes: 3_000 });
    const { service } = serviceWith({}, store);
    const task = await service.create(alice);
    await service.requireInput(task.taskId, { name: elicit('Name?') });
    const before = (await store.get(task.taskId))!;
    const error = await rejection(
      service.update(task.taskId, alice, { name: accept('x'.repeat(3_000)) }),
    );
    expect(error).toBeInstanceOf(TaskStoreFullError);
    expect(await store.get(task.taskId)).toEqual(before);
    await service.update(task.taskId, alice, { name: accept('Ada') });
  });

  it('a result the store has no room for fails the task generically instead of leaving it live', async () => {
    const store = new InMemoryTaskStore({ maxBytes: 3_000 });
    const { service } = serviceWith({}, store);
    const task = await service.create(alice, {}, { toolName: 'report' });
    const error = await rejection(service.complete(task.taskId, textResult('x'.repeat(3_000))));
    expect(error).toBeInstanceOf(TaskStoreFullError);
    const failed = await service.get(task.taskId, alice);
    expect(failed.status).toBe('failed');
    expect(failed.error).toEqual({ code: -32603, message: 'Internal error' });
  });

  it('counts what it holds: bytes come back with every removal (delete, expiry, making room)', async () => {
    const store = new InMemoryTaskStore();
    const { service } = serviceWith({ maxTasksPerOwner: 2 }, store);
    const first = await service.create(alice);
    // Each record counts 256 bytes for the fields every record has, and what it keeps.
    expect(store.bytes).toBe(256 + first.bytes!);
    await service.complete(first.taskId, textResult('x'.repeat(1_000)));
    await service.create(alice);
    await service.create(alice); // gives the finished one up
    expect(await store.get(first.taskId)).toBeNull();
    const kept: TaskRecord[] = [];
    for (const id of [...(store as unknown as { tasks: Map<string, TaskRecord> }).tasks.keys()]) {
      kept.push((await store.get(id))!);
    }
    expect(store.bytes).toBe(kept.reduce((sum, task) => sum + 256 + task.bytes!, 0));
    for (const task of kept) await store.delete(task.taskId);
    expect(store.bytes).toBe(0);
    await service.create(alice, { ttlMs: 1 });
    await new Promise((resolve) => setTimeout(resolve, 5));
    await store.cleanup(Date.now(), { terminalTtlMs: 1 });
    expect(store.bytes).toBe(0);
  });

  it('is 256 MiB by default; null, or a bad value, is said at construction', () => {
    expect(() => new InMemoryTaskStore({ maxBytes: null })).not.toThrow();
    expect(() => new InMemoryTaskStore({ maxBytes: 0 })).toThrow(
      /maxBytes must be a positive integer or null/,
    );
  });
});
