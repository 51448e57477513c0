/**
 * `@TaskTool({ requireInputFirst })`: input before the task. Over 2026-07-28 a multi round-trip
 * `tools/call` (synchronous `input_required` rounds, the task minted on the retry that completes
 * the answers); over 2025-11-25 the task is created at once and asks them first.
 */
import { Injectable, Module } from '@nestjs/common';
import * as z from 'zod/v4';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema, ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { TaskTool, TasksModule, type TaskContext } from '../../src/index.js';
import type { InputRequest } from '../../src/entries/store.js';
import { ADAPTERS, type RunningApp, startApp } from '../support/app.js';
import { mcpRequest, post } from '../support/raw.js';
import { type JsonRpcMessage, parseMessage } from '../support/wire.js';

const ask = (message: string, field: string): InputRequest => ({
  method: 'elicitation/create',
  params: {
    message,
    requestedSchema: { type: 'object', properties: { [field]: { type: 'string' } } },
  },
});
const accept = (field: string, value: string) => ({
  action: 'accept',
  content: { [field]: value },
});

@Injectable()
class FirstTools {
  /** Asks who and where before the task; the task's result names both. */
  @TaskTool({
    name: 'book',
    pollIntervalMs: 50,
    requireInputFirst: { who: ask('Who?', 'who'), where: ask('Where?', 'where') },
  })
  async book(_input: unknown, task: TaskContext) {
    const { who, where } = task.firstInput;
    const field = (answer: unknown, name: string) =>
      String((answer as { content?: Record<string, unknown> } | undefined)?.content?.[name]);
    return `Booked ${field(who, 'who')} in ${field(where, 'where')} (task ${task.taskId.length > 0})`;
  }

  /** Asks only when the input says so. */
  @TaskTool({
    name: 'maybe_ask',
    input: z.object({ confirm: z.boolean().optional() }),
    requireInputFirst: (input: { confirm?: boolean }) =>
      input.confirm ? { ok: ask('Sure?', 'ok') } : undefined,
  })
  async maybeAsk(_input: { confirm?: boolean }, task: TaskContext) {
    return `asked: ${Object.keys(task.firstInput).join(',') || 'nothing'}`;
  }
}

@Module({
  imports: [TasksModule.forRoot({ principal: () => 'alice' })],
  providers: [FirstTools],
})
class FirstModule {}

async function call(url: string, params: Record<string, unknown>): Promise<JsonRpcMessage> {
  const answer = await post(url, mcpRequest('tools/call', params));
  expect(answer.status).toBe(200);
  return parseMessage(answer.text)!;
}

async function settle(url: string, taskId: string): Promise<Record<string, unknown>> {
  for (let i = 0; i < 200; i++) {
    const task = parseMessage((await post(url, mcpRequest('tasks/get', { taskId }))).text)!
      .result as Record<string, unknown>;
    if (task.status === 'completed' || task.status === 'failed') return task;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error('the task did not finish');
}

describe.each(ADAPTERS)('requireInputFirst (%s)', (adapter) => {
  let app: RunningApp;
  beforeEach(async () => {
    app = await startApp(FirstModule, adapter);
  });
  afterEach(() => app.close());

  it('2026-07-28: input_required rounds without a task, then the task with the answers', async () => {
    const round1 = (await call(app.url, { name: 'book', arguments: {} })).result!;
    expect(round1.resultType).toBe('input_required');
    expect(Object.keys(round1.inputRequests as object).sort()).toEqual(['where', 'who']);
    expect(round1).not.toHaveProperty('taskId');
    expect(round1).not.toHaveProperty('requestState');

    // A partial answer: the other one is asked again, the given one travels in requestState.
    const round2 = (
      await call(app.url, {
        name: 'book',
        arguments: {},
        inputResponses: { who: accept('who', 'Ada') },
      })
    ).result!;
    expect(round2.resultType).toBe('input_required');
    expect(Object.keys(round2.inputRequests as object)).toEqual(['where']);
    expect(typeof round2.requestState).toBe('string');

    const round3 = (
      await call(app.url, {
        name: 'book',
        arguments: {},
        inputResponses: { where: accept('where', 'Paris') },
        requestState: round2.requestState,
      })
    ).result!;
    expect(round3.resultType).toBe('task');
    expect(round3).not.toHaveProperty('requestState');
    expect(round3).not.toHaveProperty('inputRequests');
    const done = await settle(app.url, String(round3.taskId));
    expect(done.result).toMatchObject({
      content: [{ type: 'text', text: 'Booked Ada in Paris (task true)' }],
    });
  });

  it('2026-07-28: a malformed answer or a requestState not ours is -32602, and no task is made', async () => {
    const bad = await call(app.url, {
      name: 'book',
      arguments: {},
      inputResponses: { who: { action: 'maybe' }, where: accept('where', 'Rome') },
    });
    expect(bad.error).toMatchObject({ code: -32602 });
    expect(bad.error?.message).toContain('"who"');
    const forged = await call(app.url, {
      name: 'book',
      arguments: {},
      inputResponses: { where: accept('where', 'Rome') },
      requestState: 'not-ours!',
    });
    expect(forged.error).toMatchObject({ code: -32602 });
    // Answers for keys it did not ask are ignored: still input_required.
    const stray = await call(app.url, {
      name: 'book',
      arguments: {},
      inputResponses: { when: accept('when', 'now') },
    });
    expect(stray.result?.resultType).toBe('input_required');
    // Prototype names are no input keys either (the body is patched: JSON keeps `__proto__` own).
    const request = mcpRequest('tools/call', { name: 'book', arguments: {} });
    const patched = request.body.replace(
      '"arguments":{}',
      '"arguments":{},"inputResponses":{"__proto__":{"action":"accept"},"constructor":{"action":"accept"}}',
    );
    const answer = parseMessage((await post(app.url, { ...request, body: patched })).text)!;
    expect(answer.result?.resultType).toBe('input_required');
    expect(Object.keys(answer.result?.inputRequests as object).sort()).toEqual(['where', 'who']);
  });

  it('2026-07-28: a function of the input decides whether to ask', async () => {
    const noAsk = (await call(app.url, { name: 'maybe_ask', arguments: {} })).result!;
    expect(noAsk.resultType).toBe('task');
    expect((await settle(app.url, String(noAsk.taskId))).result).toMatchObject({
      content: [{ type: 'text', text: 'asked: nothing' }],
    });
    const asks = (await call(app.url, { name: 'maybe_ask', arguments: { confirm: true } })).result!;
    expect(asks.resultType).toBe('input_required');
    expect(Object.keys(asks.inputRequests as object)).toEqual(['ok']);
  });

  it('2025-11-25: the task is made at once and asks first; the v1 client answers', async () => {
    const client = new Client(
      { name: 'v1', version: '1.0.0' },
      { capabilities: { elicitation: { form: {} } } },
    );
    const asked: string[] = [];
    client.setRequestHandler(ElicitRequestSchema, async (request) => {
      const message = String(request.params.message);
      asked.push(message);
      return message === 'Who?'
        ? { action: 'accept' as const, content: { who: 'Grace' } }
        : { action: 'accept' as const, content: { where: 'Oslo' } };
    });
    await client.connect(new StreamableHTTPClientTransport(new URL(app.url)));
    try {
      let last: unknown;
      for await (const message of client.experimental.tasks.callToolStream(
        { name: 'book', arguments: {} },
        CallToolResultSchema,
        { task: {} },
      )) {
        last = message;
      }
      expect(asked.sort()).toEqual(['Where?', 'Who?']);
      expect(last).toMatchObject({
        type: 'result',
        result: { content: [{ type: 'text', text: 'Booked Grace in Oslo (task true)' }] },
      });
    } finally {
      await client.close();
    }
  });
});
