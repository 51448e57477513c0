/**
 * Ids have limits (issue 34): a JSON-RPC id longer than MAX_REQUEST_ID_LENGTH is refused before
 * anything keeps it (-32600, HTTP 400, id null), so a listen stream holds a short id however
 * large the body limit; a task id no task can have (too long, or with a NUL) is an unknown id on
 * every store, answered as one without an ERROR line, and a listen naming one still serves the
 * others. Real HTTP on loopback; memory, a real Redis and a real PostgreSQL.
 */
import { Module, type Type } from '@nestjs/common';
import { TasksModule, TasksService } from '../../src/index.js';
import type { TasksModuleExtras } from '../../src/entries/options.js';
import { InMemoryTaskStore } from '../../src/entries/store.js';
import { MAX_REQUEST_ID_LENGTH, MAX_TASK_ID_LENGTH } from '../../src/tasks.constants.js';
import { type RunningApp, startApp } from '../support/app.js';
import { mcpRequest, post } from '../support/raw.js';
import { openListen, type SseReader } from '../support/sse.js';
import { bearerPrincipal } from '../support/bearer.guard.js';
import { KeptLog } from '../support/kept-log.js';
import { type Storage, STORES } from '../support/stores.js';

function idsModule(storage: TasksModuleExtras): Type<unknown> {
  @Module({
    imports: [TasksModule.forRoot({ principal: bearerPrincipal, janitor: false, ...storage })],
  })
  class IdsModule {}
  return IdsModule;
}

/** `Mcp-Name` for any task id: the Base64 sentinel (a NUL cannot travel in a header). */
const nameOf = (taskId: string): string =>
  `=?base64?${Buffer.from(taskId, 'utf8').toString('base64')}?=`;

const NOT_FOUND = { code: -32602, message: 'Task not found' };
const ID_TOO_LONG = {
  code: -32600,
  message: `Bad Request: the JSON-RPC id is longer than ${MAX_REQUEST_ID_LENGTH} characters`,
};

describe.each(Object.keys(STORES))('ids have limits (%s store)', (name) => {
  let storage: Storage;
  let app: RunningApp;
  let taskId: string;
  const log = new KeptLog();

  beforeAll(async () => {
    storage = await STORES[name]!('ids');
    app = await startApp(idsModule(storage.parts()), 'express', '/mcp', (nest) =>
      nest.useLogger(log),
    );
    const tasks = app.app.get(TasksService);
    taskId = (await tasks.create({ principal: 'alice' })).taskId;
  }, 60_000);
  afterAll(async () => {
    await app?.close();
    await storage?.stop();
  });

  const odd = {
    'too long': 'x'.repeat(MAX_TASK_ID_LENGTH + 1),
    'with a NUL': 'abc\u0000def',
    'a real id with a NUL after it': () => `${taskId}\u0000`,
  };

  it.each(Object.keys(odd))(
    'a task id %s is an unknown id on tasks/get, tasks/update and tasks/cancel, no ERROR line',
    async (kind) => {
      const given = odd[kind as keyof typeof odd];
      const id = typeof given === 'function' ? given() : given;
      for (const [method, params] of [
        ['tasks/get', { taskId: id }],
        ['tasks/cancel', { taskId: id }],
        ['tasks/update', { taskId: id, inputResponses: {} }],
      ] as const) {
        const answer = await post(
          app.url,
          mcpRequest(method, params, { principal: 'alice', name: nameOf(id) }),
        );
        expect({ method, status: answer.status, error: answer.json?.error }).toEqual({
          method,
          status: 200,
          error: NOT_FOUND,
        });
      }
      expect(log.errors).toEqual([]);
    },
  );

  it('a listen naming odd ids with a real one serves the real one', async () => {
    const listen = await openListen(app.url, {
      principal: 'alice',
      taskIds: [odd['too long'], taskId, odd['with a NUL'], `${taskId}\u0000`],
    });
    expect(listen.status).toBe(200);
    const ack = await listen.stream!.next(5_000);
    expect(ack.method).toBe('notifications/subscriptions/acknowledged');
    expect((ack.params as { notifications: unknown }).notifications).toEqual({ taskIds: [taskId] });
    await listen.stream!.close();
    expect(log.errors).toEqual([]);
  });

  it(`a JSON-RPC id over ${MAX_REQUEST_ID_LENGTH} characters is refused before anything keeps it; one at the limit is served`, async () => {
    const long = 'i'.repeat(MAX_REQUEST_ID_LENGTH + 1);
    for (const method of ['tasks/get', 'subscriptions/listen', 'tools/list'] as const) {
      const answer = await post(
        app.url,
        mcpRequest(method, method === 'tasks/get' ? { taskId } : {}, {
          principal: 'alice',
          id: long,
        }),
      );
      expect({ method, status: answer.status, json: answer.json }).toEqual({
        method,
        status: 400,
        json: { jsonrpc: '2.0', id: null, error: ID_TOO_LONG },
      });
    }
    const atLimit = 'i'.repeat(MAX_REQUEST_ID_LENGTH);
    const served = await post(
      app.url,
      mcpRequest('tasks/get', { taskId }, { principal: 'alice', id: atLimit }),
    );
    expect(served.json).toMatchObject({ id: atLimit, result: { taskId } });
  });

  it('a -32020 mismatch names a long task id once, shortened', async () => {
    const long = 'y'.repeat(MAX_TASK_ID_LENGTH);
    const answer = await post(
      app.url,
      mcpRequest('tasks/get', { taskId: long }, { principal: 'alice', name: 'other' }),
    );
    expect(answer.status).toBe(400);
    expect(answer.json?.error?.code).toBe(-32020);
    expect(answer.text.length).toBeLessThan(600);
  });
});

describe('200 listen streams with the longest ids', () => {
  let app: RunningApp;
  const streams: SseReader[] = [];
  beforeAll(async () => {
    app = await startApp(idsModule({ store: new InMemoryTaskStore() }), 'express');
  });
  afterAll(async () => {
    await Promise.all(streams.map((stream) => stream.close()));
    await app?.close();
  });

  it('hold a few MiB at most (900 KB ids held 1.2 MiB each before)', async () => {
    const tasks = app.app.get(TasksService);
    const taskId = (await tasks.create({ principal: 'p0' })).taskId;
    const before = process.memoryUsage().rss;
    for (let i = 0; i < 200; i++) {
      const who = `p${i % 10}`;
      const id = `${i}:`.padEnd(MAX_REQUEST_ID_LENGTH, 'z');
      const listen = await openListen(app.url, {
        principal: who,
        id,
        taskIds: [taskId],
      });
      expect(listen.status).toBe(200);
      streams.push(listen.stream!);
      await listen.stream!.next(5_000);
    }
    const added = (process.memoryUsage().rss - before) / 1_048_576;
    expect(added).toBeLessThan(64);
    // A 900 KB id no longer reaches a stream at all.
    const huge = await openListen(app.url, {
      principal: 'p0',
      id: 'h'.repeat(900_000),
      taskIds: [taskId],
    });
    expect(huge.status).toBe(400);
    expect(huge.json?.error).toEqual(ID_TOO_LONG);
  }, 60_000);
});
