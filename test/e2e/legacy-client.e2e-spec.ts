/**
 * 2025-11-25 clients (SEP-1686 tasks), as their users call a task tool: the v1 TypeScript SDK
 * (`@modelcontextprotocol/sdk` 1.32) and its experimental tasks API, over real HTTP, against the
 * demo app on both adapters.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import {
  CallToolResultSchema,
  CreateTaskResultSchema,
  ListToolsResultSchema,
  McpError,
  RELATED_TASK_META_KEY,
} from '@modelcontextprotocol/sdk/types.js';
import { Module } from '@nestjs/common';
import { DemoModule } from '../../examples/demo.module.js';
import { TasksModule } from '../../src/index.js';
import { LegacyTasksHandler } from '../../src/mcp/legacy-tasks.handler.js';
import { TasksService } from '../../src/tasks.service.js';
import { ADAPTERS, type RunningApp, startApp } from '../support/app.js';
import { v1Client, v1Transport } from '../support/v1-client.js';
import { mcpRequest, post } from '../support/raw.js';
import { legacyHeaders, parseMessage } from '../support/wire.js';

type V1Message = { type: string; task?: { taskId: string }; [key: string]: unknown };

interface V1 {
  client: Client;
  close(): Promise<void>;
}

/** A v1 client as its README shows it, acting for `principal` (the demo's bearer stand-in). */
async function connectV1(
  url: string,
  principal: string,
  answerName?: (message: string) => string | undefined,
): Promise<V1> {
  const client = v1Client(answerName);
  const transport = v1Transport(url, principal);
  await client.connect(transport);
  return { client, close: () => client.close() };
}

async function collect(stream: AsyncGenerator<unknown>): Promise<V1Message[]> {
  const seen: V1Message[] = [];
  for await (const message of stream) seen.push(message as V1Message);
  return seen;
}

describe.each(ADAPTERS)('2025-11-25 tasks with the v1 SDK client (%s)', (adapter) => {
  let app: RunningApp;
  const opened: V1[] = [];
  const connect = async (principal = 'alice', answer?: (m: string) => string | undefined) => {
    const v1 = await connectV1(app.url, principal, answer);
    opened.push(v1);
    return v1.client;
  };

  beforeEach(async () => {
    app = await startApp(DemoModule, adapter);
  });
  afterEach(async () => {
    for (const v1 of opened.splice(0)) await v1.close();
    await app.close();
  });

  it('initialize advertises the tasks capability; tools/list carries execution.taskSupport', async () => {
    const client = await connect();
    expect(client.getServerCapabilities()?.tasks).toEqual({
      list: {},
      cancel: {},
      requests: { tools: { call: {} } },
    });
    expect(client.getServerCapabilities()?.extensions).toBeUndefined();
    const { tools } = await client.request({ method: 'tools/list' }, ListToolsResultSchema);
    const byName = new Map(tools.map((tool) => [tool.name, tool]));
    expect(byName.get('add_slowly')?.execution).toEqual({ taskSupport: 'required' });
    expect(byName.get('greet')?.execution).toEqual({ taskSupport: 'required' });
  });

  it('add_slowly as a task settles to {sum}', async () => {
    const client = await connect();
    const seen = await collect(
      client.experimental.tasks.callToolStream(
        { name: 'add_slowly', arguments: { a: 2, b: 3, delayMs: 100 } },
        CallToolResultSchema,
        { task: { ttl: 60_000 } },
      ),
    );
    expect(seen[0]).toMatchObject({
      type: 'taskCreated',
      task: { status: 'working', ttl: 60_000 },
    });
    const last = seen.at(-1) as {
      type: string;
      result: { structuredContent?: unknown; _meta?: Record<string, unknown> };
    };
    expect(last.type).toBe('result');
    expect(last.result.structuredContent).toEqual({ sum: 5 });
    const taskId = (seen[0] as { task: { taskId: string } }).task.taskId;
    expect(last.result._meta?.[RELATED_TASK_META_KEY]).toEqual({ taskId });
  });

  it('greet asks through the client’s elicitation handler and settles to "Hello, <name>!"', async () => {
    const asked: string[] = [];
    const client = await connect('alice', (message) => {
      asked.push(message);
      return 'Ada';
    });
    const seen = await collect(
      client.experimental.tasks.callToolStream(
        { name: 'greet', arguments: {} },
        CallToolResultSchema,
        {
          task: {},
        },
      ),
    );
    expect(asked).toEqual(['What is your name?']);
    const last = seen.at(-1) as { type: string; result: { content: unknown[] } };
    expect(last).toMatchObject({ type: 'result' });
    expect(last.result.content).toEqual([{ type: 'text', text: 'Hello, Ada!' }]);
  });

  it('wait_for_cancel is cancelled: tasks/cancel answers the cancelled task; a second cancel is -32602', async () => {
    const client = await connect();
    const created = await client.request(
      { method: 'tools/call', params: { name: 'wait_for_cancel', arguments: {}, task: {} } },
      CreateTaskResultSchema,
    );
    const { taskId } = created.task;
    const cancelled = await client.experimental.tasks.cancelTask(taskId);
    expect(cancelled).toMatchObject({ taskId, status: 'cancelled' });
    expect((await client.experimental.tasks.getTask(taskId)).status).toBe('cancelled');
    const again = await client.experimental.tasks
      .cancelTask(taskId)
      .catch((error: unknown) => error);
    expect(again).toBeInstanceOf(McpError);
    expect((again as McpError).code).toBe(-32602);
  });

  it('fail_with ends failed; tasks/result answers its JSON-RPC error', async () => {
    const client = await connect();
    const seen = await collect(
      client.experimental.tasks.callToolStream(
        { name: 'fail_with', arguments: { code: -32042, message: 'No such report' } },
        CallToolResultSchema,
        { task: {} },
      ),
    );
    const taskId = (seen[0] as { task: { taskId: string } }).task.taskId;
    const task = await client.experimental.tasks.getTask(taskId);
    expect(task).toMatchObject({ status: 'failed', statusMessage: 'No such report' });
    const error = await client.experimental.tasks
      .getTaskResult(taskId, CallToolResultSchema)
      .catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(McpError);
    expect((error as McpError).code).toBe(-32042);
  });

  it('tasks/list shows only the caller’s tasks; a foreign id answers like a missing one', async () => {
    const alice = await connect('alice');
    const bob = await connect('bob');
    const call = (client: Client) =>
      client.request(
        { method: 'tools/call', params: { name: 'wait_for_cancel', arguments: {}, task: {} } },
        CreateTaskResultSchema,
      );
    const mine = [await call(alice), await call(alice)].map((result) => result.task.taskId);
    const theirs = (await call(bob)).task.taskId;
    const listed = await alice.experimental.tasks.listTasks();
    expect(listed.tasks.map((task) => task.taskId)).toEqual([...mine].reverse());
    const foreign = await alice.experimental.tasks.getTask(theirs).catch((error: unknown) => error);
    const missing = await alice.experimental.tasks
      .getTask('no-such-task')
      .catch((error: unknown) => error);
    expect((foreign as McpError).code).toBe(-32602);
    expect((foreign as McpError).message).toBe((missing as McpError).message);
    for (const taskId of mine) await alice.experimental.tasks.cancelTask(taskId);
    await bob.experimental.tasks.cancelTask(theirs);
  });

  it('a task-only tool called without a task is a JSON-RPC error the client reads as the call’s (-32601)', async () => {
    const client = await connect();
    const error = await client
      .callTool({ name: 'add_slowly', arguments: { a: 1, b: 2 } })
      .catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(McpError);
    expect((error as McpError).code).toBe(-32601);
  });

  it('one task, two eras: each sees it with the same status (isError aside, see docs/legacy-2025.md)', async () => {
    const client = await connect('alice');
    const modernGet = async (taskId: string) =>
      parseMessage(
        (await post(app.url, mcpRequest('tasks/get', { taskId }, { principal: 'alice' }))).text,
      )?.result;

    // Created over 2025-11-25, read over 2026-07-28.
    const legacyTask = (
      await client.request(
        { method: 'tools/call', params: { name: 'wait_for_cancel', arguments: {}, task: {} } },
        CreateTaskResultSchema,
      )
    ).task;
    expect(await modernGet(legacyTask.taskId)).toMatchObject({
      taskId: legacyTask.taskId,
      status: 'working',
      ttlMs: legacyTask.ttl,
    });

    // Created over 2026-07-28, read (and listed, and cancelled) over 2025-11-25.
    const created = parseMessage(
      (
        await post(
          app.url,
          mcpRequest(
            'tools/call',
            { name: 'wait_for_cancel', arguments: {} },
            { principal: 'alice' },
          ),
        )
      ).text,
    )?.result as { taskId: string; status: string; createdAt: string };
    const seen = await client.experimental.tasks.getTask(created.taskId);
    expect(seen).toMatchObject({
      taskId: created.taskId,
      status: created.status,
      createdAt: created.createdAt,
    });
    const listed = await client.experimental.tasks.listTasks();
    expect(listed.tasks.map((task) => task.taskId)).toEqual([created.taskId, legacyTask.taskId]);
    await client.experimental.tasks.cancelTask(created.taskId);
    expect(await modernGet(created.taskId)).toMatchObject({ status: 'cancelled' });
    await client.experimental.tasks.cancelTask(legacyTask.taskId);
  });

  it('a waiting tasks/result ends at shutdown (plain: -32603; SSE: the stream closes) and leaves nothing behind', async () => {
    const legacyPost = (body: unknown, accept: string) =>
      fetch(app.url, {
        method: 'POST',
        headers: legacyHeaders('alice', accept),
        body: JSON.stringify({ jsonrpc: '2.0', id: 7, ...(body as object) }),
      });
    // A task no method runs (a handed-off one, say), so shutdown waits for no tool call.
    const { taskId } = await app.app.get(TasksService).create({ principal: 'alice' });
    const handler = app.app.get(LegacyTasksHandler);
    const plain = legacyPost({ method: 'tasks/result', params: { taskId } }, 'application/json');
    const sse = await legacyPost(
      { method: 'tasks/result', params: { taskId } },
      'application/json, text/event-stream',
    );
    expect(sse.headers.get('content-type')).toContain('text/event-stream');
    const sseText = sse.text();
    for (let i = 0; i < 100 && handler.size < 2; i++) await new Promise((r) => setTimeout(r, 10));
    expect(handler.size).toBe(2);
    const closing = app.close();
    const answer = (await (await plain).json()) as { error?: { code: number; message: string } };
    expect(answer.error).toEqual({ code: -32603, message: 'The server is shutting down' });
    expect(await sseText).not.toContain('"result"');
    await closing;
    expect(handler.size).toBe(0);
    app = await startApp(DemoModule, adapter); // afterEach closes it
  });

  it('an answer POST for a key the task never asked (prototype names included) changes nothing', async () => {
    const service = app.app.get(TasksService);
    const { taskId } = await service.create({ principal: 'alice' });
    await service.requireInput(taskId, {
      name: {
        method: 'elicitation/create',
        params: { message: 'Name?', requestedSchema: { type: 'object', properties: {} } },
      },
    });
    const before = await service.get(taskId, { principal: 'alice' });
    for (const key of ['__proto__', 'constructor', 'toString', 'nope']) {
      const answer = await fetch(app.url, {
        method: 'POST',
        headers: legacyHeaders('alice'),
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: `nestjs-mcp-tasks/input:${taskId}:${key}`,
          error: { code: -1, message: 'x' },
        }),
      });
      expect(answer.status).toBe(202);
    }
    expect(await service.get(taskId, { principal: 'alice' })).toEqual(before);
  });
});

describe('serverOptions reach the SDK server of both eras', () => {
  @Module({ imports: [TasksModule.forRoot({ serverOptions: { instructions: 'Ask for tasks.' } })] })
  class InstructedModule {}

  it('instructions: in the 2025-11-25 initialize result and in 2026-07-28 server/discover', async () => {
    const running = await startApp(InstructedModule, 'express');
    try {
      const v1 = await connectV1(running.url, 'alice');
      expect(v1.client.getInstructions()).toBe('Ask for tasks.');
      await v1.close();
      const discover = parseMessage(
        (await post(running.url, mcpRequest('server/discover', {}))).text,
      );
      expect(discover?.result?.instructions).toBe('Ask for tasks.');
    } finally {
      await running.close();
    }
  });
});
