/**
 * Issue 15, items 1 and 2: the status filter of `TasksService.list` (on both stores, and on a
 * store that does not filter itself), and what a task records of the call that made it (the
 * tool's name, and the arguments a tool chooses to keep), which listing shows and the wire never
 * carries.
 */
import { jest } from '@jest/globals';
import { Global, Injectable, Module, type Type } from '@nestjs/common';
import * as z from 'zod/v4';
import {
  InvalidTaskParamsError,
  type ListAllTasksOptions,
  type QueuedCall,
  type TaskContext,
  TaskQueue,
  type TaskRecord,
  type TaskState,
  TaskTool,
  TasksConfigError,
  TasksModule,
  TasksService,
} from '../src/index.js';
import {
  InMemoryTaskStore,
  TaskInternalError,
  type TaskListPage,
  type TaskStore,
  toWire,
  toWireTask,
} from '../src/entries/store.js';
import { RedisTaskStore } from '../src/redis/redis.task-store.js';
import { toTask2025 } from '../src/task.js';
import { MAX_KEPT_ARGUMENTS_BYTES } from '../src/task/rules.js';
import { startTestRedis, type TestRedis } from './support/redis-server.js';
import { serviceWith } from './support/helpers.js';
import { startApp } from './support/app.js';
import { openListen, rpc } from './support/sse.js';

const alice = { principal: 'alice' };
const bob = { principal: 'bob' };

let redis: TestRedis;
let prefixes = 0;

beforeAll(async () => {
  redis = await startTestRedis();
});
afterAll(async () => {
  await redis.stop();
});

/** The in-memory store's listing without `listsByStatus`: a store written before the filter. */
class UnfilteredStore extends InMemoryTaskStore {
  override readonly listsByStatus = false;
  /** The options of every `list` call, to check what the service asks. */
  readonly asked: { limit: number; status?: unknown }[] = [];
  override list(...args: Parameters<InMemoryTaskStore['list']>) {
    this.asked.push(args[1]);
    return super.list(...args);
  }
  override listAll(...args: Parameters<InMemoryTaskStore['listAll']>) {
    this.asked.push(args[0]);
    return super.listAll(...args);
  }
}

const STORES: [string, () => TaskStore][] = [
  ['InMemoryTaskStore', () => new InMemoryTaskStore()],
  [
    'RedisTaskStore',
    () => new RedisTaskStore({ connection: redis.url, prefix: `listing-${++prefixes}:` }),
  ],
  ['a store without listsByStatus', () => new UnfilteredStore()],
];

/**
 * Every page of a listing that `read` reads (`list` of alice, or `listAll`), with the number of
 * pages it took; no page holds more than `limit` tasks.
 */
async function walk(
  read: (cursor: string | undefined) => Promise<TaskListPage>,
  limit: number,
): Promise<{ ids: string[]; pages: number }> {
  const ids: string[] = [];
  let cursor: string | undefined;
  for (let count = 1; count < 1000; count++) {
    const page = await read(cursor);
    expect(page.tasks.length).toBeLessThanOrEqual(limit);
    ids.push(...page.tasks.map((task) => task.taskId));
    cursor = page.nextCursor;
    if (cursor === undefined) return { ids, pages: count };
  }
  throw new Error('still a nextCursor after 1,000 pages');
}

/** Every page of alice's listing. */
const pages = (
  service: TasksService,
  options: { limit: number; status?: TaskState | TaskState[] },
) =>
  walk(
    (cursor) => service.list(alice, { ...options, ...(cursor !== undefined && { cursor }) }),
    options.limit,
  );

describe.each(STORES)('TasksService.list by status on %s', (_name, makeStore) => {
  let store: TaskStore;
  beforeEach(() => {
    store = makeStore();
  });
  afterEach(async () => {
    if (store instanceof RedisTaskStore) await store.onApplicationShutdown();
  });

  /** Alice's tasks, oldest first: every third completed, every fifth failed, the rest working. */
  async function seed(service: TasksService, count: number): Promise<TaskRecord[]> {
    const tasks: TaskRecord[] = [];
    for (let i = 0; i < count; i++) {
      const task = await service.create(alice, {}, { toolName: `tool_${i % 2}` });
      if (i % 3 === 0) tasks.push(await service.complete(task.taskId, { content: [] }));
      else if (i % 5 === 0) tasks.push(await service.fail(task.taskId, [-32001, 'no']));
      else tasks.push(task);
      // Distinct creation instants keep the expected order independent of random ids.
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
    await service.complete((await service.create(bob)).taskId, { content: [] });
    return tasks;
  }

  const newest = (tasks: TaskRecord[], states: TaskState[]): string[] =>
    tasks
      .filter((task) => states.includes(task.status))
      .map((task) => task.taskId)
      .reverse();

  it('pages one state, several states, and every state, newest first, owner-scoped', async () => {
    const { service } = serviceWith({}, store);
    const tasks = await seed(service, 16);
    expect((await pages(service, { limit: 2, status: 'completed' })).ids).toEqual(
      newest(tasks, ['completed']),
    );
    expect((await pages(service, { limit: 3, status: ['failed', 'working'] })).ids).toEqual(
      newest(tasks, ['failed', 'working']),
    );
    expect((await pages(service, { limit: 100, status: ['cancelled'] })).ids).toEqual([]);
    expect((await pages(service, { limit: 4 })).ids).toEqual(
      tasks.map((task) => task.taskId).reverse(),
    );
    // A page carries whole records, with the tool that made each task.
    const page = await service.list(alice, { limit: 1, status: 'completed' });
    expect(page.tasks[0]).toMatchObject({ status: 'completed', toolName: 'tool_1' });
  });

  it('refuses a status that is not a task state, before the store is asked', async () => {
    const { service } = serviceWith({}, store);
    const list = jest.spyOn(store, 'list' as never);
    for (const status of ['done', ['completed', 'nope'], [], 3, null, ['Working']]) {
      const error = await service.list(alice, { status: status as TaskState }).then(
        () => undefined,
        (reason: unknown) => reason,
      );
      expect(error).toBeInstanceOf(InvalidTaskParamsError);
      expect((error as Error).message).toMatch(
        /^Invalid params: status must be one of "working", "input_required", "completed", "failed", "cancelled" or a non-empty list of them, got /,
      );
    }
    expect(list).not.toHaveBeenCalled();
  });

  it('keeps its cursor while tasks are created and finish between pages', async () => {
    const { service } = serviceWith({}, store);
    const tasks = await seed(service, 10);
    const first = await service.list(alice, { limit: 1, status: 'completed' });
    await Promise.all(
      Array.from({ length: 10 }, async () => {
        const task = await service.create(alice);
        await service.complete(task.taskId, { content: [] });
      }),
    );
    const ids = first.tasks.map((task) => task.taskId);
    let cursor = first.nextCursor;
    while (cursor !== undefined) {
      const page = await service.list(alice, { cursor, limit: 1, status: 'completed' });
      ids.push(...page.tasks.map((task) => task.taskId));
      cursor = page.nextCursor;
    }
    expect(ids).toEqual(newest(tasks, ['completed']));
  });
});

describe('TasksService.list on a store without listsByStatus', () => {
  it('filters in the service, asking the store for no more than the page lacks, at most 4 reads a call', async () => {
    const store = new UnfilteredStore();
    const { service } = serviceWith({}, store);
    for (let i = 0; i < 30; i++) await service.create(alice);
    const done = await service.create(alice);
    await service.complete(done.taskId, { content: [] });
    for (let i = 0; i < 30; i++) await service.create(alice);
    store.asked.length = 0;
    const { ids, pages: count } = await pages(service, { limit: 5, status: 'completed' });
    expect(ids).toEqual([done.taskId]);
    // Never handed a status it would not honour; each read asks what the page still lacks.
    expect(store.asked.every((options) => options.status === undefined)).toBe(true);
    expect(store.asked.every((options) => options.limit >= 1 && options.limit <= 5)).toBe(true);
    expect(store.asked.length).toBeLessThanOrEqual(count * 4);
    expect(count).toBeGreaterThan(1);
  });
});

describe('What a task records of its call', () => {
  it('TasksService.create keeps a tool name and a JSON copy of kept arguments; toWire never shows them', async () => {
    const { service, store } = serviceWith();
    const kept = { city: 'Lyon', nested: { n: 1 } };
    const task = await service.create(alice, {}, { toolName: 'weather', arguments: kept });
    kept.nested.n = 2;
    const stored = await store.get(task.taskId);
    expect(stored).toMatchObject({ toolName: 'weather', arguments: { nested: { n: 1 } } });
    for (const wire of [toWire(stored!), toWireTask(stored!), toTask2025(stored!)]) {
      expect(Object.keys(wire)).not.toContain('toolName');
      expect(Object.keys(wire)).not.toContain('arguments');
      expect(JSON.stringify(wire)).not.toContain('Lyon');
    }
    // Created without them, a task has neither field.
    const bare = await service.create(alice);
    expect(Object.keys(bare)).not.toContain('toolName');
    expect(Object.keys(bare)).not.toContain('arguments');
  });

  it('refuses kept arguments over 4 KiB or not JSON, with a TasksConfigError, storing nothing', async () => {
    const { service, store } = serviceWith();
    const cases: unknown[] = [
      { text: 'x'.repeat(MAX_KEPT_ARGUMENTS_BYTES) },
      { big: 10n },
      () => undefined,
      (() => {
        const cycle: Record<string, unknown> = {};
        cycle.self = cycle;
        return cycle;
      })(),
    ];
    for (const value of cases) {
      await expect(
        service.create(alice, {}, { toolName: 'big', arguments: value }),
      ).rejects.toBeInstanceOf(TasksConfigError);
    }
    await expect(
      service.create(alice, {}, { toolName: 'big', arguments: { text: 'x'.repeat(4000) } }),
    ).resolves.toMatchObject({ toolName: 'big' });
    expect((await store.list!(alice, { limit: 100 })).tasks).toHaveLength(1);
    await expect(service.create(alice, {}, { toolName: '' })).rejects.toBeInstanceOf(
      TasksConfigError,
    );
  });
});

// ----- through the tools ------------------------------------------------------------------------

const enqueued: QueuedCall[] = [];

/** A queue that keeps the calls it is handed (no worker runs them). */
@Global()
@Module({
  providers: [
    {
      provide: TaskQueue,
      useValue: {
        enqueue: async (_queue: unknown, call: QueuedCall) => void enqueued.push(call),
      },
    },
  ],
  exports: [TaskQueue],
})
class KeepingQueueModule {}

@Injectable()
class LabelledTools {
  @TaskTool({
    name: 'sign_in',
    input: z.object({ user: z.string(), password: z.string() }),
    keepArguments: (input: { user: string }) => ({ user: input.user }),
  })
  async signIn(input: { user: string }, task: TaskContext) {
    // Time for the test to listen before the task changes.
    await new Promise((resolve) => setTimeout(resolve, 200));
    await task.progress(`Signing in ${input.user}`);
    return { content: [{ type: 'text', text: 'signed in' }] };
  }

  @TaskTool({ name: 'plain' })
  async plain() {
    return { content: [{ type: 'text', text: 'plain' }] };
  }

  @TaskTool({
    name: 'queued',
    input: z.object({ n: z.number() }),
    queue: 'work',
    keepArguments: (input) => input,
  })
  async queued() {
    return { content: [] };
  }

  @TaskTool({
    name: 'greedy',
    input: z.object({ blob: z.string() }),
    keepArguments: (input) => input,
  })
  async greedy() {
    return { content: [] };
  }

  @TaskTool({
    name: 'throwing',
    keepArguments: () => {
      throw new Error('cannot redact');
    },
  })
  async throwing() {
    return { content: [] };
  }
}

@Module({
  imports: [KeepingQueueModule, TasksModule.forRoot({})],
  providers: [LabelledTools],
})
class LabelledModule {}

describe('@TaskTool calls record the tool and, when it opts in, redacted arguments', () => {
  it('in-process and queue-run alike; listing shows them, tasks/get and notifications do not', async () => {
    const running = await startApp(LabelledModule as Type<unknown>, 'express');
    try {
      const tasks = running.app.get(TasksService);
      const anonymous = { principal: null };
      const call = async (name: string, args: Record<string, unknown>) => {
        const answer = await rpc(running.url, 'tools/call', { name, arguments: args });
        return answer.body as { result?: { taskId: string }; error?: { code: number } };
      };

      const signed = await call('sign_in', { user: 'ada', password: 's3cret-pw' });
      const listen = await openListen(running.url, { taskIds: [signed.result!.taskId] });
      expect(listen.stream).toBeDefined();
      const plain = await call('plain', {});
      const queued = await call('queued', { n: 7 });
      expect(enqueued.map((job) => job.taskId)).toEqual([queued.result!.taskId]);

      const page = await tasks.list(anonymous, { limit: 10 });
      const byId = new Map(page.tasks.map((task) => [task.taskId, task]));
      expect(byId.get(signed.result!.taskId)).toMatchObject({
        toolName: 'sign_in',
        arguments: { user: 'ada' },
      });
      expect(JSON.stringify(byId.get(signed.result!.taskId))).not.toContain('s3cret-pw');
      const plainTask = byId.get(plain.result!.taskId)!;
      expect(plainTask.toolName).toBe('plain');
      expect(Object.keys(plainTask)).not.toContain('arguments');
      expect(byId.get(queued.result!.taskId)).toMatchObject({
        toolName: 'queued',
        arguments: { n: 7 },
      });

      // The wire: the notifications of the task's progress and end, and its tasks/get.
      await listen.stream!.waitForFrame((frame) => frame.raw.includes('"completed"'), 3_000);
      const got = await rpc(running.url, 'tasks/get', { taskId: signed.result!.taskId });
      expect(got.body).toMatchObject({ result: { status: 'completed' } });
      const text = JSON.stringify(got.body);
      expect(text).not.toContain('sign_in');
      expect(text).not.toContain('toolName');
      expect(text).not.toContain('"arguments"');
      const frames = listen.stream!.frames;
      expect(frames.some((frame) => frame.raw.includes('Signing in ada'))).toBe(true);
      for (const frame of frames) {
        expect(frame.raw).not.toContain('toolName');
        expect(frame.raw).not.toContain('sign_in');
        expect(frame.raw).not.toContain('s3cret');
      }
      await listen.stream!.close();

      // Kept arguments over the cap, or a keepArguments that throws: the call fails as an
      // internal error and no task is made.
      const before = (await tasks.list(anonymous, { limit: 100 })).tasks.length;
      const greedy = await call('greedy', { blob: 'y'.repeat(MAX_KEPT_ARGUMENTS_BYTES) });
      expect(greedy.error).toMatchObject({ code: -32603 });
      const throwing = await call('throwing', {});
      expect(throwing.error).toMatchObject({ code: -32603 });
      expect((await tasks.list(anonymous, { limit: 100 })).tasks.length).toBe(before);
    } finally {
      await running.close();
    }
  });

  it('a keepArguments that is not a function fails the boot', async () => {
    @Injectable()
    class BadTools {
      @TaskTool({ name: 'bad', keepArguments: 'user' as never })
      async bad() {
        return { content: [] };
      }
    }
    @Module({ imports: [TasksModule.forRoot({})], providers: [BadTools] })
    class BadModule {}
    await expect(startApp(BadModule, 'express')).rejects.toThrow(
      /keepArguments must be a function/,
    );
  });
});

/** Every page of the listing across owners. */
const pagesOfAll = (service: TasksService, options: ListAllTasksOptions & { limit: number }) =>
  walk(
    (cursor) => service.listAll({ ...options, ...(cursor !== undefined && { cursor }) }),
    options.limit,
  );

describe.each(STORES)('TasksService.listAll (the operator’s listing) on %s', (_name, makeStore) => {
  let store: TaskStore;
  beforeEach(() => {
    store = makeStore();
  });
  afterEach(async () => {
    if (store instanceof RedisTaskStore) await store.onApplicationShutdown();
  });

  /** Tasks of three owners and two tools, oldest first; every third completed. */
  async function seed(service: TasksService, count: number): Promise<TaskRecord[]> {
    const tasks: TaskRecord[] = [];
    const owners = [alice, bob, { principal: 'carol', tenant: 't1' }];
    for (let i = 0; i < count; i++) {
      const toolName = i % 4 === 3 ? undefined : `tool_${i % 2}`;
      const task = await service.create(owners[i % 3]!, {}, toolName ? { toolName } : {});
      tasks.push(i % 3 === 0 ? await service.complete(task.taskId, { content: [] }) : task);
      // Distinct creation instants keep the expected order independent of random ids.
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
    return tasks;
  }

  const newest = (tasks: TaskRecord[], keep: (task: TaskRecord) => boolean): string[] =>
    tasks
      .filter(keep)
      .map((task) => task.taskId)
      .reverse();

  it('pages every owner’s tasks newest first, by status, by tool, and by both', async () => {
    const { service } = serviceWith({}, store);
    expect(service.canListAll).toBe(true);
    const tasks = await seed(service, 16);
    expect((await pagesOfAll(service, { limit: 3 })).ids).toEqual(newest(tasks, () => true));
    expect((await service.listAll()).tasks).toHaveLength(16);
    expect((await pagesOfAll(service, { limit: 2, status: 'completed' })).ids).toEqual(
      newest(tasks, (task) => task.status === 'completed'),
    );
    expect((await pagesOfAll(service, { limit: 2, toolName: 'tool_1' })).ids).toEqual(
      newest(tasks, (task) => task.toolName === 'tool_1'),
    );
    expect(
      (await pagesOfAll(service, { limit: 2, toolName: 'tool_0', status: ['working'] })).ids,
    ).toEqual(newest(tasks, (task) => task.toolName === 'tool_0' && task.status === 'working'));
    expect((await pagesOfAll(service, { limit: 100, toolName: 'no_such_tool' })).ids).toEqual([]);
  });

  it('refuses what list refuses, and an empty or non-string toolName, before the store is asked', async () => {
    const { service } = serviceWith({}, store);
    await service.create(alice);
    const listAll = jest.spyOn(store, 'listAll' as never);
    const bad: ListAllTasksOptions[] = [
      { status: 'done' as TaskState },
      { status: [] },
      { limit: 0 },
      { limit: 101 },
      { limit: 1.5 },
      { cursor: 7 as unknown as string },
      { toolName: '' },
      { toolName: 42 as unknown as string },
    ];
    for (const options of bad) {
      await expect(service.listAll(options)).rejects.toBeInstanceOf(InvalidTaskParamsError);
    }
    expect(listAll).not.toHaveBeenCalled();
    await expect(service.listAll({ cursor: 'not-a-cursor' })).rejects.toMatchObject({
      code: -32602,
    });
  });

  it('keeps its cursor while tasks of any owner are created and finish between pages', async () => {
    const { service } = serviceWith({}, store);
    const tasks = await seed(service, 10);
    const first = await service.listAll({ limit: 1, status: 'completed' });
    await Promise.all(
      Array.from({ length: 10 }, async (_, i) => {
        const task = await service.create(i % 2 ? alice : bob);
        await service.complete(task.taskId, { content: [] });
      }),
    );
    const ids = first.tasks.map((task) => task.taskId);
    let cursor = first.nextCursor;
    while (cursor !== undefined) {
      const page = await service.listAll({ cursor, limit: 1, status: 'completed' });
      ids.push(...page.tasks.map((task) => task.taskId));
      cursor = page.nextCursor;
    }
    expect(ids).toEqual(newest(tasks, (task) => task.status === 'completed'));
  });
});

describe('TasksService.listAll on other stores', () => {
  it('filters by status in the service for a store without listsByStatus, never handing it a status', async () => {
    const store = new UnfilteredStore();
    const { service } = serviceWith({}, store);
    for (let i = 0; i < 20; i++) await service.create(i % 2 ? alice : bob);
    const done = await service.create(bob, {}, { toolName: 'export' });
    await service.complete(done.taskId, { content: [] });
    for (let i = 0; i < 20; i++) await service.create(alice, {}, { toolName: 'export' });
    store.asked.length = 0;
    const { ids, pages: count } = await pagesOfAll(service, {
      limit: 5,
      status: 'completed',
      toolName: 'export',
    });
    expect(ids).toEqual([done.taskId]);
    expect(store.asked.every((options) => options.status === undefined)).toBe(true);
    expect(
      store.asked.every((options) => (options as ListAllTasksOptions).toolName === 'export'),
    ).toBe(true);
    expect(store.asked.length).toBeLessThanOrEqual(count * 4);
  });

  it('a store without listAll: canListAll is false and listAll throws a TaskInternalError naming the fix', async () => {
    const inner = new InMemoryTaskStore();
    const bare: TaskStore = {
      create: (record, options) => inner.create(record, options),
      get: (taskId, owner) => inner.get(taskId, owner),
      compareAndSet: (record, version) => inner.compareAndSet(record, version),
      delete: (taskId) => inner.delete(taskId),
      cleanup: (now, options) => inner.cleanup(now, options),
      list: (owner, options) => inner.list(owner, options),
    };
    const { service } = serviceWith({}, bare);
    expect(service.canList).toBe(true);
    expect(service.canListAll).toBe(false);
    const error = await service.listAll().then(
      () => undefined,
      (reason: unknown) => reason,
    );
    expect(error).toBeInstanceOf(TaskInternalError);
    expect((error as Error).message).toMatch(/no listAll/);
    // Bad options are still reported as such first.
    await expect(service.listAll({ limit: 0 })).rejects.toBeInstanceOf(InvalidTaskParamsError);
  });
});
