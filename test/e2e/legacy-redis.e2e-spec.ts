/**
 * 2025-11-25 clients (SEP-1686 tasks) against two instances of the demo app sharing one real
 * Redis (RedisTaskStore and the Redis notifier): the v1 TypeScript SDK client
 * (`@modelcontextprotocol/sdk` 1.32) and its experimental tasks API create a task on one instance
 * and follow, answer, cancel and list it on the other.
 */
import { jest } from '@jest/globals';
import { Module } from '@nestjs/common';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type {
  Transport,
  TransportSendOptions,
} from '@modelcontextprotocol/sdk/shared/transport.js';
import {
  CallToolResultSchema,
  CreateTaskResultSchema,
  type JSONRPCMessage,
  McpError,
  RELATED_TASK_META_KEY,
} from '@modelcontextprotocol/sdk/types.js';
import { v1Client, v1Transport } from '../support/v1-client.js';
import { DemoModule } from '../../examples/demo.module.js';
import { TasksService } from '../../src/index.js';
import { TaskNotifier, TaskStore } from '../../src/entries/store.js';
import { LegacyTasksHandler } from '../../src/mcp/legacy-tasks.handler.js';
import { RedisTaskStore, redisNotifier, RedisTaskNotifier } from '../../src/redis/index.js';
import { startTestRedis, type TestRedis } from '../support/redis-server.js';
import { type AdapterName, type RunningApp, startApp } from '../support/app.js';
import { legacyHeaders } from '../support/wire.js';

/** Each run of this file gets its own keys and channel, also on a shared REDIS_URL. */
const PREFIX = `e2e-legacy-redis-${process.pid}-${Date.now()}:`;

const sleep = (ms: number): Promise<void> => new Promise((done) => setTimeout(done, ms));

interface Instance {
  name: 'A' | 'B';
  running: RunningApp;
  url: string;
  handler: LegacyTasksHandler;
  close(): Promise<void>;
}

/** The demo app (its tools and auth) on RedisTaskStore and the Redis notifier. */
async function boot(name: 'A' | 'B', redisUrl: string, adapter: AdapterName): Promise<Instance> {
  const connection = { connection: redisUrl, prefix: PREFIX };
  @Module({
    imports: [
      DemoModule.withStorage({
        store: new RedisTaskStore(connection),
        notifier: redisNotifier(connection),
      }),
    ],
  })
  class DemoOnRedis {}
  const running = await startApp(DemoOnRedis, adapter);
  expect(running.app.get(TaskStore)).toBeInstanceOf(RedisTaskStore);
  const notifier = running.app.get<RedisTaskNotifier>(TaskNotifier);
  expect(notifier).toBeInstanceOf(RedisTaskNotifier);
  await notifier.ready;
  return {
    name,
    running,
    url: running.url,
    handler: running.app.get(LegacyTasksHandler),
    close: () => running.close(),
  };
}

/** What a client POSTed where: the JSON-RPC method, or `response <id>` for an answer. */
interface Posted {
  to: 'A' | 'B';
  what: string;
}

/** `fetch` that notes each POST's message before sending it. */
function recordingFetch(to: 'A' | 'B', log: Posted[]): typeof fetch {
  return (input, init) => {
    if (init?.method === 'POST' && typeof init.body === 'string') {
      const message = JSON.parse(init.body) as { method?: string; id?: unknown };
      log.push({ to, what: message.method ?? `response ${String(message.id)}` });
    }
    return fetch(input, init);
  };
}

/**
 * One client's connection over two instances: requests and notifications go to A, the client's
 * answers to server requests (JSON-RPC responses) to B, as a load balancer may send them.
 */
class SplitTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: Transport['onmessage'];

  constructor(
    private readonly a: StreamableHTTPClientTransport,
    private readonly b: StreamableHTTPClientTransport,
  ) {
    a.onmessage = (message: JSONRPCMessage) => this.onmessage?.(message);
    b.onmessage = (message: JSONRPCMessage) => this.onmessage?.(message);
    a.onerror = (error) => this.onerror?.(error);
    b.onerror = (error) => this.onerror?.(error);
    a.onclose = () => this.onclose?.();
  }

  async start(): Promise<void> {
    await this.a.start();
    await this.b.start();
  }

  send(message: JSONRPCMessage, options?: TransportSendOptions): Promise<void> {
    const response = !('method' in message) && ('result' in message || 'error' in message);
    return response ? this.b.send(message, options) : this.a.send(message, options);
  }

  setProtocolVersion(version: string): void {
    this.a.setProtocolVersion(version);
    this.b.setProtocolVersion(version);
  }

  async close(): Promise<void> {
    await this.b.close();
    await this.a.close();
  }
}

const transport = v1Transport;
const newClient = v1Client;

const errorOf = (promise: Promise<unknown>): Promise<McpError> =>
  promise.then(
    (value) => {
      throw new Error(`expected an error, got ${JSON.stringify(value)}`);
    },
    (error: unknown) => {
      expect(error).toBeInstanceOf(McpError);
      return error as McpError;
    },
  );

describe('2025-11-25 tasks with the v1 SDK client across two instances sharing one Redis', () => {
  let redis: TestRedis;
  let a: Instance;
  let b: Instance;
  const opened: Client[] = [];
  let principals = 0;
  /** A principal of its own for each test: the store is shared by the whole file. */
  const fresh = (name: string): string => `${name}-${++principals}`;

  const connect = async (instance: Instance, principal: string): Promise<Client> => {
    const client = newClient();
    await client.connect(transport(instance.url, principal));
    opened.push(client);
    return client;
  };

  const createTask = async (client: Client, name: string, args: Record<string, unknown> = {}) =>
    (
      await client.request(
        { method: 'tools/call', params: { name, arguments: args, task: { ttl: 60_000 } } },
        CreateTaskResultSchema,
      )
    ).task;

  beforeAll(async () => {
    redis = await startTestRedis();
    a = await boot('A', redis.url, 'express');
    b = await boot('B', redis.url, 'fastify');
  });

  afterEach(async () => {
    jest.restoreAllMocks();
    for (const client of opened.splice(0)) await client.close();
  });

  afterAll(async () => {
    await a?.close();
    await b?.close();
    await redis?.stop();
  });

  it('add_slowly created on A settles to {sum} when polled on B', async () => {
    const alice = fresh('alice');
    const onA = await connect(a, alice);
    const onB = await connect(b, alice);
    const task = await createTask(onA, 'add_slowly', { a: 2, b: 3, delayMs: 200 });
    expect(task).toMatchObject({ status: 'working', ttl: 60_000 });

    const seen: string[] = [];
    for (const deadline = Date.now() + 5_000; ;) {
      const now = await onB.experimental.tasks.getTask(task.taskId);
      if (seen.at(-1) !== now.status) seen.push(now.status);
      if (now.status === 'completed') break;
      if (Date.now() > deadline) throw new Error(`still ${now.status} on B`);
      await sleep(50);
    }
    expect(seen).toEqual(['working', 'completed']);
    const result = await onB.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema);
    expect(result.structuredContent).toEqual({ sum: 5 });
    expect(result._meta?.[RELATED_TASK_META_KEY]).toEqual({ taskId: task.taskId });
    // A reads the same.
    expect(await onA.experimental.tasks.getTask(task.taskId)).toMatchObject({
      status: 'completed',
    });
  });

  it('greet: tasks/result runs on A, the client’s elicitation answer is POSTed to B and resumes the task', async () => {
    const alice = fresh('alice');
    const posted: Posted[] = [];
    const asked: string[] = [];
    const client = newClient((message) => {
      asked.push(message);
      return 'Ada';
    });
    const answeredOnA = jest.spyOn(a.handler, 'answer');
    const answeredOnB = jest.spyOn(b.handler, 'answer');
    await client.connect(
      new SplitTransport(
        transport(a.url, alice, recordingFetch('A', posted)),
        transport(b.url, alice, recordingFetch('B', posted)),
      ),
    );
    opened.push(client);

    const stream = client.experimental.tasks.callToolStream(
      { name: 'greet', arguments: {} },
      CallToolResultSchema,
      { task: { ttl: 60_000 } },
    );
    const seen: Array<{ type: string; [key: string]: unknown }> = [];
    for await (const message of stream) seen.push(message as unknown as (typeof seen)[number]);

    expect(asked).toEqual(['What is your name?']);
    const last = seen.at(-1) as { type: string; result: { content: unknown[] } };
    expect(last.type).toBe('result');
    expect(last.result.content).toEqual([{ type: 'text', text: 'Hello, Ada!' }]);
    const taskId = (seen[0] as unknown as { task: { taskId: string } }).task.taskId;

    // Every request went to A; the one answer (to the input request tasks/result carried) to B,
    // where the endpoint took it; A took none.
    const answerId = `nestjs-mcp-tasks/input:${taskId}:name`;
    expect(posted.filter((entry) => entry.to === 'B')).toEqual([
      { to: 'B', what: `response ${answerId}` },
    ]);
    expect(posted).toContainEqual({ to: 'A', what: 'tasks/result' });
    expect(posted.filter((entry) => entry.what.startsWith('response'))).toHaveLength(1);
    expect(answeredOnB).toHaveBeenCalledTimes(1);
    expect(answeredOnA).not.toHaveBeenCalled();
  });

  it('greet, by hand: the elicitation request read from A’s tasks/result stream, answered with fetch to B', async () => {
    const alice = fresh('alice');
    const onA = await connect(a, alice);
    const task = await createTask(onA, 'greet');
    const headers = legacyHeaders(alice);
    const watching = new AbortController();
    const response = await fetch(a.url, {
      method: 'POST',
      headers,
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 7,
        method: 'tasks/result',
        params: { taskId: task.taskId },
      }),
      signal: watching.signal,
    });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = '';
    const nextMessage = async (): Promise<Record<string, unknown>> => {
      for (;;) {
        const end = buffer.indexOf('\n\n');
        if (end >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const data = /^data: ?(.*)$/m.exec(block);
          if (data) return JSON.parse(data[1]!) as Record<string, unknown>;
          continue;
        }
        const { value, done } = await reader.read();
        if (done) throw new Error(`the stream ended: ${buffer}`);
        buffer += value;
      }
    };
    try {
      const question = await nextMessage();
      expect(question).toMatchObject({
        jsonrpc: '2.0',
        id: `nestjs-mcp-tasks/input:${task.taskId}:name`,
        method: 'elicitation/create',
        params: {
          message: 'What is your name?',
          _meta: { [RELATED_TASK_META_KEY]: { taskId: task.taskId } },
        },
      });

      // A stranger's answer to B is taken (202) and changes nothing.
      const foreign = await fetch(b.url, {
        method: 'POST',
        headers: { ...headers, authorization: 'Bearer mallory' },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: question.id,
          result: { action: 'accept', content: { name: 'Eve' } },
        }),
      });
      expect(foreign.status).toBe(202);
      expect(await onA.experimental.tasks.getTask(task.taskId)).toMatchObject({
        status: 'input_required',
      });

      const answered = jest.spyOn(b.handler, 'answer');
      const answer = await fetch(b.url, {
        method: 'POST',
        headers,
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: question.id,
          result: { action: 'accept', content: { name: 'Grace' } },
        }),
      });
      expect(answer.status).toBe(202);
      expect(await answer.text()).toBe('');
      expect(answered).toHaveBeenCalledTimes(1);

      // A's stream ends with the call's result.
      const outcome = await nextMessage();
      expect(outcome).toMatchObject({
        jsonrpc: '2.0',
        id: 7,
        result: {
          content: [{ type: 'text', text: 'Hello, Grace!' }],
          _meta: { [RELATED_TASK_META_KEY]: { taskId: task.taskId } },
        },
      });
    } finally {
      watching.abort();
      await reader.cancel().catch(() => undefined);
    }
  });

  it('wait_for_cancel cancelled from B while watched on A: A’s tasks/result answers the cancellation', async () => {
    const alice = fresh('alice');
    const onA = await connect(a, alice);
    const onB = await connect(b, alice);
    const task = await createTask(onA, 'wait_for_cancel');
    const watched = errorOf(
      onA.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema, {
        timeout: 10_000,
      }),
    );
    await sleep(200);
    const cancelled = await onB.experimental.tasks.cancelTask(task.taskId);
    expect(cancelled).toMatchObject({ taskId: task.taskId, status: 'cancelled' });
    const error = await watched;
    expect(error.code).toBe(-32603);
    expect(error.message).toMatch(/Task cancelled/);
    expect(await onA.experimental.tasks.getTask(task.taskId)).toMatchObject({
      status: 'cancelled',
    });
    // A second cancel, on A: the task is terminal (-32602).
    expect((await errorOf(onA.experimental.tasks.cancelTask(task.taskId))).code).toBe(-32602);
  });

  it('tasks/list on B shows the tasks created on A by the same principal only', async () => {
    const alice = fresh('alice');
    const bob = fresh('bob');
    const aliceOnA = await connect(a, alice);
    const bobOnA = await connect(a, bob);
    const aliceOnB = await connect(b, alice);
    const bobOnB = await connect(b, bob);
    const mine = [];
    for (let i = 0; i < 3; i++) {
      mine.push((await createTask(aliceOnA, 'wait_for_cancel')).taskId);
      await sleep(2);
    }
    const theirs = (await createTask(bobOnA, 'wait_for_cancel')).taskId;

    const listed = await aliceOnB.experimental.tasks.listTasks();
    expect(listed.tasks.map((task) => task.taskId)).toEqual([...mine].reverse());
    expect(listed.tasks.every((task) => task.status === 'working')).toBe(true);
    expect(listed.nextCursor).toBeUndefined();
    expect((await bobOnB.experimental.tasks.listTasks()).tasks.map((t) => t.taskId)).toEqual([
      theirs,
    ]);

    for (const taskId of mine) await aliceOnB.experimental.tasks.cancelTask(taskId);
    await bobOnB.experimental.tasks.cancelTask(theirs);
  });

  it('a foreign id is -32602 "Task not found" on B, exactly like a missing one', async () => {
    const alice = fresh('alice');
    const bob = fresh('bob');
    const aliceOnA = await connect(a, alice);
    const bobOnB = await connect(b, bob);
    const task = await createTask(aliceOnA, 'wait_for_cancel');
    const service = a.running.app.get(TasksService);
    for (let tries = 0; (await service.status(task.taskId)).statusMessage === undefined; tries++) {
      if (tries > 100) throw new Error('wait_for_cancel reported no progress');
      await sleep(20);
    }
    const before = JSON.stringify(await service.status(task.taskId));

    const tasks = bobOnB.experimental.tasks;
    const attempts = (taskId: string) => [
      errorOf(tasks.getTask(taskId)),
      errorOf(tasks.getTaskResult(taskId, CallToolResultSchema, { timeout: 2_000 })),
      errorOf(tasks.cancelTask(taskId)),
    ];
    const foreign = await Promise.all(attempts(task.taskId));
    const missing = await Promise.all(attempts('no-such-task'));
    for (const [i, error] of foreign.entries()) {
      expect(error.code).toBe(-32602);
      expect(error.message).toBe(missing[i]!.message);
      expect(error.data).toEqual(missing[i]!.data);
    }
    expect(foreign[0]!.message).toMatch(/Task not found/);
    // Nothing changed for its owner.
    expect(await aliceOnA.experimental.tasks.getTask(task.taskId)).toMatchObject({
      status: 'working',
    });
    expect(JSON.stringify(await service.status(task.taskId))).toBe(before);
    await aliceOnA.experimental.tasks.cancelTask(task.taskId);
  });
});
