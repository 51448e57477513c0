import {
  DuplicateInputKeyError,
  InvalidTaskParamsError,
  TaskError,
  TaskInternalError,
  TaskNotFoundError,
  TaskStoreFullError,
  TaskTerminalError,
} from '../src/errors.js';
import { InMemoryTaskStore } from '../src/store/in-memory.task-store.js';
import { WaiterFeed } from '../src/notify/waiter-feed.js';
import type { TaskStore } from '../src/store/task-store.js';
import type { TaskOwner } from '../src/task.js';
import { resolveTasksConfig } from '../src/tasks.config.js';
import { TasksService } from '../src/tasks.service.js';
import { CallOutage } from '../src/tools/store-outage.js';
import { RunningTaskContext } from '../src/tools/task-context.js';
import { accept, elicit, serviceWith, sleep, textResult } from './support/helpers.js';

const alice: TaskOwner = { principal: 'alice' };
const bob: TaskOwner = { principal: 'bob' };
const text = textResult;

async function rejection(promise: Promise<unknown>): Promise<TaskError> {
  const error = await promise.then(
    () => {
      throw new Error('expected a rejection');
    },
    (reason: unknown) => reason,
  );
  expect(error).toBeInstanceOf(TaskError);
  return error as TaskError;
}

describe('TasksService: create', () => {
  it('stores the task before it resolves, working, with a 32-byte base64url id', async () => {
    const { service, store } = serviceWith();
    const task = await service.create(alice, { statusMessage: 'Queued', pollIntervalMs: 500 });
    expect(task.taskId).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(Buffer.from(task.taskId, 'base64url')).toHaveLength(32);
    expect(await store.get(task.taskId)).toEqual(task);
    expect(task).toMatchObject({ status: 'working', statusMessage: 'Queued', pollIntervalMs: 500 });
  });

  it('gives every task a new id', async () => {
    const { service } = serviceWith({ maxRows: null, maxTasksPerOwner: null });
    const ids = new Set<string>();
    for (let i = 0; i < 2000; i++) ids.add((await service.create(alice)).taskId);
    expect(ids.size).toBe(2000);
  });

  it('TTL: one hour by default, the requested one, 7 days at most, null for unlimited without a cap', async () => {
    const { service } = serviceWith();
    expect((await service.create(alice)).ttlMs).toBe(3_600_000);
    expect((await service.create(alice, { ttlMs: 5000 })).ttlMs).toBe(5000);
    expect((await service.create(alice, { ttlMs: null })).ttlMs).toBe(604_800_000);
    expect((await service.create(alice, { ttlMs: 9e15 })).ttlMs).toBe(604_800_000);
    const open = serviceWith({ maxTtlMs: null }).service;
    expect((await open.create(alice, { ttlMs: null })).ttlMs).toBeNull();
    const capped = serviceWith({ maxTtlMs: 60_000, defaultTtlMs: 30_000 }).service;
    expect((await capped.create(alice)).ttlMs).toBe(30_000);
    expect((await capped.create(alice, { ttlMs: 120_000 })).ttlMs).toBe(60_000);
    expect((await capped.create(alice, { ttlMs: null })).ttlMs).toBe(60_000);
    expect((await serviceWith({ defaultTtlMs: null }).service.create(alice)).ttlMs).toBe(
      604_800_000,
    );
    const none = serviceWith({ maxTtlMs: null, defaultTtlMs: null }).service;
    expect((await none.create(alice)).ttlMs).toBeNull();
  });

  it('TTL: maxTtlMs alone caps the built-in default and an unlimited request', async () => {
    const { service } = serviceWith({ maxTtlMs: 1000 });
    expect((await service.create(alice)).ttlMs).toBe(1000);
    expect((await service.create(alice, { ttlMs: null })).ttlMs).toBe(1000);
    expect((await service.create(alice, { ttlMs: 500 })).ttlMs).toBe(500);
    expect((await service.create(alice, { ttlMs: 5000 })).ttlMs).toBe(1000);
    const roomy = serviceWith({ maxTtlMs: 86_400_000 }).service;
    expect((await roomy.create(alice)).ttlMs).toBe(3_600_000);
    const unlimited = serviceWith({ maxTtlMs: 60_000, defaultTtlMs: null }).service;
    expect((await unlimited.create(alice)).ttlMs).toBe(60_000);
  });

  it('refuses malformed parameters with invalid-params errors', async () => {
    const { service } = serviceWith();
    for (const params of [
      { ttlMs: -1 },
      { ttlMs: 1.5 },
      { pollIntervalMs: 0 },
      { statusMessage: 7 },
    ]) {
      const error = await rejection(service.create(alice, params as never));
      expect(error).toBeInstanceOf(InvalidTaskParamsError);
      expect(error.code).toBe(-32602);
    }
  });

  it('maxRows: a create beyond it is refused with a clear "store full" error', async () => {
    const { service } = serviceWith({ maxRows: 2 });
    await service.create(alice);
    await service.create(alice);
    const error = await rejection(service.create(alice));
    expect(error).toBeInstanceOf(TaskStoreFullError);
    expect(error.message).toBe('Task store is full (maxRows 2)');
    expect(error.code).toBe(-32603);
  });

  it('announces the created task', async () => {
    const { service, notifier } = serviceWith();
    const task = await service.create(alice);
    expect(notifier.for(task.taskId)).toEqual([task]);
  });
});

describe('TasksService: owner scoping', () => {
  it('a foreign owner gets the same error as a missing id, for get, update and cancel', async () => {
    const { service } = serviceWith();
    const task = await service.create(alice);
    const missing = 'A'.repeat(43);
    const errors = [
      await rejection(service.get(task.taskId, bob)),
      await rejection(service.get(missing, alice)),
      await rejection(service.update(task.taskId, bob, {})),
      await rejection(service.update(missing, alice, {})),
      await rejection(service.cancel(task.taskId, bob)),
      await rejection(service.cancel(missing, alice)),
      await rejection(service.get(task.taskId, { principal: 'alice', tenant: 'other' })),
      await rejection(service.get(task.taskId, { principal: null })),
    ];
    for (const error of errors) {
      expect(error).toBeInstanceOf(TaskNotFoundError);
      expect(error.toJsonRpcError()).toEqual({ code: -32602, message: 'Task not found' });
    }
    expect((await service.get(task.taskId, alice)).status).toBe('working');
  });

  it('an expired task gives the same not-found error as a missing one', async () => {
    const { service } = serviceWith();
    const task = await service.create(alice, { ttlMs: 20 });
    await sleep(40);
    const error = await rejection(service.get(task.taskId, alice));
    expect(error.toJsonRpcError()).toEqual({ code: -32602, message: 'Task not found' });
    await expect(service.status(task.taskId)).rejects.toBeInstanceOf(TaskNotFoundError);
    await expect(service.complete(task.taskId, text('late'))).rejects.toBeInstanceOf(
      TaskNotFoundError,
    );
  });

  it('a foreign cancel changes nothing', async () => {
    const { service, notifier } = serviceWith();
    const task = await service.create(alice);
    await rejection(service.cancel(task.taskId, bob));
    expect((await service.status(task.taskId)).status).toBe('working');
    expect(notifier.for(task.taskId)).toHaveLength(1);
  });

  it('tenants separate owners with the same principal', async () => {
    const { service } = serviceWith();
    const task = await service.create({ principal: 'alice', tenant: 'acme' });
    await expect(
      service.get(task.taskId, { principal: 'alice', tenant: 'acme' }),
    ).resolves.toBeTruthy();
    await expect(service.get(task.taskId, alice)).rejects.toBeInstanceOf(TaskNotFoundError);
  });
});

describe('TasksService: worker lifecycle', () => {
  it('complete stores the result with resultType "complete" and announces it', async () => {
    const { service, notifier } = serviceWith();
    const task = await service.create(alice);
    const done = await service.complete(task.taskId, {
      ...text('3'),
      structuredContent: { sum: 3 },
    });
    expect(done.status).toBe('completed');
    expect(done.result).toEqual({
      ...text('3'),
      structuredContent: { sum: 3 },
      resultType: 'complete',
    });
    expect((await service.get(task.taskId, alice)).result?.resultType).toBe('complete');
    expect(notifier.for(task.taskId).map((r) => r.status)).toEqual(['working', 'completed']);
  });

  it('fail takes an error object, [code, message] or an Error; the message becomes the status message', async () => {
    const { service } = serviceWith();
    const a = await service.create(alice);
    const b = await service.create(alice);
    const c = await service.create(alice);
    expect((await service.fail(a.taskId, [-32001, 'Quota exceeded'])).error).toEqual({
      code: -32001,
      message: 'Quota exceeded',
    });
    expect((await service.status(a.taskId)).statusMessage).toBe('Quota exceeded');
    const failed = await service.fail(
      b.taskId,
      { code: -32002, message: 'm', data: { retry: true } },
      {
        statusMessage: 'Gave up',
      },
    );
    expect(failed).toMatchObject({
      status: 'failed',
      statusMessage: 'Gave up',
      error: { data: { retry: true } },
    });
    expect((await service.fail(c.taskId, new Error('disk'))).error).toEqual({
      code: -32603,
      message: 'disk',
    });
  });

  it('terminal is final: later complete, fail, progress and requireInput are refused', async () => {
    const { service, notifier } = serviceWith();
    const task = await service.create(alice);
    await service.complete(task.taskId, text('ok'));
    for (const late of [
      service.complete(task.taskId, text('again')),
      service.fail(task.taskId, [1, 'x']),
      service.progress(task.taskId, 'late'),
      service.requireInput(task.taskId, { k: elicit('k') }),
    ]) {
      const error = await rejection(late);
      expect(error).toBeInstanceOf(TaskTerminalError);
      expect(error.message).toBe('Task is already completed');
    }
    expect(notifier.for(task.taskId)).toHaveLength(2);
  });

  it('progress sets the status message; the same message again is a no-op without notification', async () => {
    const { service, notifier } = serviceWith();
    const task = await service.create(alice);
    await service.progress(task.taskId, '10%');
    const same = await service.progress(task.taskId, '10%');
    expect(same.statusMessage).toBe('10%');
    expect(notifier.for(task.taskId)).toHaveLength(2);
    await expect(service.progress(task.taskId, 5 as never)).rejects.toBeInstanceOf(
      InvalidTaskParamsError,
    );
  });

  it('progress(null) clears the status message; with none set it writes and notifies nothing', async () => {
    const { service, notifier, store } = serviceWith();
    const task = await service.create(alice, { statusMessage: 'Queued' });
    const cleared = await service.progress(task.taskId, null);
    expect(cleared).not.toHaveProperty('statusMessage');
    expect(cleared.version).toBeGreaterThan(task.version);
    expect(await store.get(task.taskId)).not.toHaveProperty('statusMessage');
    expect(notifier.for(task.taskId)).toHaveLength(2);
    expect(notifier.for(task.taskId)[1]).not.toHaveProperty('statusMessage');

    const again = await service.progress(task.taskId, null);
    expect(again.version).toBe(cleared.version);
    expect((await store.get(task.taskId))!.version).toBe(cleared.version);
    expect(notifier.for(task.taskId)).toHaveLength(2);

    await service.complete(task.taskId, text('done'));
    await expect(service.progress(task.taskId, null)).rejects.toBeInstanceOf(TaskTerminalError);
    await expect(service.progress(task.taskId, undefined as never)).rejects.toBeInstanceOf(
      InvalidTaskParamsError,
    );
  });

  it("TaskContext.progress(null) clears the task's status message", async () => {
    const { service } = serviceWith();
    const task = await service.create(alice);
    const context = new RunningTaskContext(
      service,
      new WaiterFeed(),
      task.taskId,
      { principal: 'alice', tenant: null },
      { signal: new AbortController().signal, outage: new CallOutage(0, () => undefined) },
      false,
      1000,
    );
    await context.progress('Half way');
    expect((await service.status(task.taskId)).statusMessage).toBe('Half way');
    await context.progress(null);
    expect(await service.status(task.taskId)).not.toHaveProperty('statusMessage');
  });

  it('the input round trip: requireInput → update → takeInputResponses', async () => {
    const { service, notifier } = serviceWith();
    const task = await service.create(alice);
    const asked = await service.requireInput(
      task.taskId,
      { name: elicit('Your name?') },
      { statusMessage: 'Waiting' },
    );
    expect(asked).toMatchObject({ status: 'input_required', statusMessage: 'Waiting' });
    expect(Object.keys(asked.inputRequests ?? {})).toEqual(['name']);

    const answered = await service.update(task.taskId, alice, {
      name: accept('Luca'),
      other: accept('x'),
    });
    expect(answered.status).toBe('working');
    expect((await service.status(task.taskId)).inputResponses).toEqual({ name: accept('Luca') });

    expect(await service.takeInputResponses(task.taskId)).toEqual({ name: accept('Luca') });
    expect(await service.takeInputResponses(task.taskId)).toEqual({});
    expect((await service.status(task.taskId)).inputResponses).toBeUndefined();
    expect(notifier.for(task.taskId).map((r) => r.status)).toEqual([
      'working',
      'input_required',
      'working',
    ]);
  });

  it('a reused input key is refused, naming the key', async () => {
    const { service } = serviceWith();
    const task = await service.create(alice);
    await service.requireInput(task.taskId, { name: elicit('a') });
    await service.update(task.taskId, alice, { name: accept('x') });
    const error = await rejection(
      service.requireInput(task.taskId, { name: elicit('b'), age: elicit('c') }),
    );
    expect(error).toBeInstanceOf(DuplicateInputKeyError);
    expect(error.message).toContain('name');
    expect(error.message).not.toContain('age');
    expect((await service.status(task.taskId)).status).toBe('working');
  });

  it('malformed input requests are refused before anything changes', async () => {
    const { service, notifier } = serviceWith();
    const task = await service.create(alice);
    await expect(
      service.requireInput(task.taskId, { k: { method: 'nope' } } as never),
    ).rejects.toBeInstanceOf(InvalidTaskParamsError);
    await expect(service.requireInput(task.taskId, {})).rejects.toBeInstanceOf(
      InvalidTaskParamsError,
    );
    expect(notifier.for(task.taskId)).toHaveLength(1);
  });

  it('a partial answer keeps input_required; unknown keys are ignored; update is idempotent', async () => {
    const { service, notifier } = serviceWith();
    const task = await service.create(alice);
    await service.requireInput(task.taskId, { a: elicit('a'), b: elicit('b') });
    const partial = await service.update(task.taskId, alice, { a: accept('1'), zzz: accept('?') });
    expect(partial.status).toBe('input_required');
    expect(Object.keys(partial.inputRequests ?? {})).toEqual(['b']);
    const again = await service.update(task.taskId, alice, { a: accept('1') });
    expect(again.version).toBe(partial.version);
    const unknownOnly = await service.update(task.taskId, alice, { zzz: accept('?') });
    expect(unknownOnly.version).toBe(partial.version);
    expect(notifier.for(task.taskId)).toHaveLength(3);
    expect((await service.update(task.taskId, alice, { b: accept('2') })).status).toBe('working');
  });

  it('update on a working task changes nothing; malformed responses are refused', async () => {
    const { service } = serviceWith();
    const task = await service.create(alice);
    expect((await service.update(task.taskId, alice, { a: accept('1') })).version).toBe(
      task.version,
    );
    await expect(service.update(task.taskId, alice, [] as never)).rejects.toBeInstanceOf(
      InvalidTaskParamsError,
    );
    await expect(service.update(task.taskId, alice, null as never)).rejects.toBeInstanceOf(
      InvalidTaskParamsError,
    );
  });

  it('status and isCancelled of an unknown id are not-found errors', async () => {
    const { service } = serviceWith();
    await expect(service.status('nope')).rejects.toBeInstanceOf(TaskNotFoundError);
    await expect(service.isCancelled('nope')).rejects.toBeInstanceOf(TaskNotFoundError);
  });

  it('an id that is not a string is invalid params, as on the wire', async () => {
    const { service } = serviceWith();
    await expect(service.get(42 as never, alice)).rejects.toBeInstanceOf(InvalidTaskParamsError);
    await expect(service.get(42 as never, alice)).rejects.toThrow(
      'Invalid params: taskId must be a string',
    );
  });

  it('isCancelled of a task that is gone (deleted, expired) throws, neither true nor false', async () => {
    const { service, store } = serviceWith();
    const task = await service.create(alice);
    expect(await service.isCancelled(task.taskId)).toBe(false);
    await store.delete(task.taskId);
    await expect(service.isCancelled(task.taskId)).rejects.toBeInstanceOf(TaskNotFoundError);

    const short = await service.create(alice, { ttlMs: 1 });
    await sleep(5);
    await expect(service.isCancelled(short.taskId)).rejects.toBeInstanceOf(TaskNotFoundError);
  });
});

describe('TasksService: cancellation', () => {
  it("'immediate' (default): a live task is cancelled at once and later complete/fail are refused", async () => {
    const { service, notifier } = serviceWith();
    const task = await service.create(alice);
    await service.requireInput(task.taskId, { a: elicit('a') });
    const cancelled = await service.cancel(task.taskId, alice);
    expect(cancelled.status).toBe('cancelled');
    expect(await service.isCancelled(task.taskId)).toBe(true);
    await expect(service.complete(task.taskId, text('x'))).rejects.toBeInstanceOf(
      TaskTerminalError,
    );
    await expect(service.fail(task.taskId, [1, 'x'])).rejects.toBeInstanceOf(TaskTerminalError);
    expect((await service.markCancelled(task.taskId)).version).toBe(cancelled.version);
    expect(notifier.for(task.taskId).map((r) => r.status)).toEqual([
      'working',
      'input_required',
      'cancelled',
    ]);
  });

  it("'cooperative': cancel records the request, the worker sees it and marks the task cancelled", async () => {
    const { service, notifier } = serviceWith({ cancellation: 'cooperative' });
    const task = await service.create(alice);
    expect(await service.isCancelled(task.taskId)).toBe(false);
    const requested = await service.cancel(task.taskId, alice);
    expect(requested.status).toBe('working');
    expect(await service.isCancelled(task.taskId)).toBe(true);
    expect((await service.cancel(task.taskId, alice)).version).toBe(requested.version);
    expect((await service.markCancelled(task.taskId)).status).toBe('cancelled');
    expect(notifier.for(task.taskId).map((r) => r.status)).toEqual([
      'working',
      'working',
      'cancelled',
    ]);
  });

  it("'cooperative': a task may still complete after the cancel request", async () => {
    const { service } = serviceWith({ cancellation: 'cooperative' });
    const task = await service.create(alice);
    await service.cancel(task.taskId, alice);
    expect((await service.complete(task.taskId, text('finished anyway'))).status).toBe('completed');
    expect(await service.isCancelled(task.taskId)).toBe(false);
  });

  it('cancel on a terminal task changes nothing and announces nothing', async () => {
    for (const cancellation of ['immediate', 'cooperative'] as const) {
      const { service, notifier } = serviceWith({ cancellation });
      const task = await service.create(alice);
      const done = await service.complete(task.taskId, text('ok'));
      expect(await service.cancel(task.taskId, alice)).toEqual(done);
      expect(notifier.for(task.taskId)).toHaveLength(2);
    }
  });
});

describe('TasksService: faults', () => {
  it('a notifier that throws or rejects never breaks the transition', async () => {
    const store = new InMemoryTaskStore();
    const config = resolveTasksConfig({});
    for (const notify of [
      () => {
        throw new Error('sync boom');
      },
      () => Promise.reject(new Error('async boom')),
    ]) {
      const service = new TasksService(store, { notify }, config);
      const task = await service.create(alice);
      expect((await service.complete(task.taskId, text('ok'))).status).toBe('completed');
    }
  });

  it('with notifications off (null) everything still works', async () => {
    const service = new TasksService(new InMemoryTaskStore(), null, resolveTasksConfig({}));
    const task = await service.create(alice);
    expect((await service.cancel(task.taskId, alice)).status).toBe('cancelled');
  });

  it('a store fault becomes one internal error with a safe message', async () => {
    const broken: TaskStore = {
      create: () => Promise.reject(new Error('ECONNREFUSED 10.0.0.1:6379')),
      get: () => Promise.reject(new Error('ECONNREFUSED 10.0.0.1:6379')),
      compareAndSet: () => Promise.resolve(false),
      delete: () => Promise.resolve(false),
      cleanup: () => Promise.resolve(0),
    };
    const service = new TasksService(broken, null, resolveTasksConfig({}));
    for (const attempt of [
      service.create(alice),
      service.get('x', alice),
      service.complete('x', text('x')),
    ]) {
      const error = await rejection(attempt);
      expect(error).toBeInstanceOf(TaskInternalError);
      expect(error.toJsonRpcError()).toEqual({ code: -32603, message: 'Task store unavailable' });
    }
  });
});
