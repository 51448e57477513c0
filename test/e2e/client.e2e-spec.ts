import { JsonRpcResponseError, type TaskView } from '@modelcontextprotocol/ext-tasks/client';
import type { JsonValue, TaskId } from '@modelcontextprotocol/ext-tasks/core';
import { DemoModule } from '../../examples/demo.module.js';
import { ADAPTERS, type RunningApp, startApp } from '../support/app.js';
import {
  connectOfficialClient,
  createRawDispatch,
  elicitationHandler,
  PROTOCOL_VERSION,
  type OfficialClient,
  type OfficialClientOptions,
  TASKS_EXTENSION_ID,
  textOf,
} from '../support/official-client.js';
import { rejection, sleep } from '../support/helpers.js';

/** Polls `read` until `until` holds (or fails the test after `timeoutMs`). */
async function eventually<T>(
  read: () => Promise<T>,
  until: (value: T) => boolean,
  timeoutMs = 5_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (until(value)) return value;
    if (Date.now() > deadline)
      throw new Error(`Condition not met; last value ${JSON.stringify(value)}`);
    await sleep(25);
  }
}

describe.each(ADAPTERS)('official client and Tasks session (%s)', (adapter) => {
  let app: RunningApp | undefined;
  const clients: OfficialClient[] = [];

  const connect = async (options: OfficialClientOptions = {}): Promise<OfficialClient> => {
    const connected = await connectOfficialClient(app!.url, options);
    clients.push(connected);
    return connected;
  };

  beforeEach(async () => {
    app = await startApp(DemoModule, adapter);
  });

  afterEach(async () => {
    for (const connected of clients.splice(0)) await connected.close();
    await app?.close();
    app = undefined;
  });

  it('add_slowly settles to a completed result: "5" and {sum: 5}', async () => {
    const { session } = await connect({ principal: 'alice' });
    const execution = await session.callTool('add_slowly', { a: 2, b: 3, delayMs: 100 });
    expect(execution.kind).toBe('task');

    const seen: TaskView[] = [];
    const { outcome, lastTask } = await execution.settle({
      onEvent: (event) => {
        if (event.type === 'task') seen.push(event.task);
      },
    });

    expect(outcome.status).toBe('completed');
    if (outcome.status !== 'completed') return;
    expect(textOf(outcome.result)).toBe('5');
    expect(outcome.result).toMatchObject({
      content: [{ type: 'text', text: '5' }],
      structuredContent: { sum: 5 },
    });
    expect(outcome.result.isError).not.toBe(true);
    expect(lastTask).toMatchObject({ taskId: execution.handle!.taskId, status: 'completed' });
    expect(seen.length).toBeGreaterThan(0);
    expect(seen.every((task) => task.taskId === execution.handle!.taskId)).toBe(true);
  });

  it('greet asks for a name through the input handler and answers "Hello, Luca!"', async () => {
    const questions: Readonly<Record<string, JsonValue>>[] = [];
    const { session } = await connect({
      principal: 'alice',
      onInputRequest: elicitationHandler((params) => {
        questions.push(params);
        return { action: 'accept', content: { name: 'Luca' } };
      }),
    });
    const execution = await session.callTool('greet', {});
    expect(execution.kind).toBe('task');

    const statuses: string[] = [];
    const { outcome } = await execution.settle({
      onEvent: (event) => {
        if (event.type === 'task') statuses.push(event.task.status);
      },
    });

    expect(outcome.status).toBe('completed');
    if (outcome.status !== 'completed') return;
    expect(outcome.result.content).toEqual([{ type: 'text', text: 'Hello, Luca!' }]);
    expect(questions).toHaveLength(1);
    expect(questions[0]).toMatchObject({
      mode: 'form',
      message: 'What is your name?',
      requestedSchema: { type: 'object', required: ['name'] },
    });
    expect(statuses).toContain('input_required');
  });

  it('wait_for_cancel ends cancelled after the execution is cancelled', async () => {
    const { session } = await connect({ principal: 'alice' });
    const execution = await session.callTool('wait_for_cancel', {});
    if (execution.kind !== 'task') throw new Error('expected a task');
    const taskId = execution.handle.taskId;
    const controller = session.task(taskId);

    const working = await eventually(
      () => controller.snapshot(),
      (task) => task.statusMessage === 'Working until cancelled',
    );
    expect(working.status).toBe('working');

    await execution.cancel();
    const outcome = await execution.result();
    expect(outcome.status).toBe('cancelled');

    const onServer = await controller.snapshot();
    expect(onServer.status).toBe('cancelled');
    // Terminal is final: a second cancel changes nothing.
    await controller.cancel();
    expect((await controller.snapshot()).status).toBe('cancelled');
  });

  it('fail_with ends failed with the JSON-RPC error it names', async () => {
    const { session } = await connect({ principal: 'alice' });
    const execution = await session.callTool('fail_with', { code: -32042, message: 'Nope' });
    expect(execution.kind).toBe('task');

    const { outcome, lastTask } = await execution.settle();

    expect(outcome.status).toBe('failed');
    if (outcome.status !== 'failed') return;
    expect(outcome.error.code).toBe(-32042);
    expect(outcome.error.message).toBe('Nope');
    expect(lastTask?.status).toBe('failed');
    expect(lastTask?.raw.error).toEqual({ code: -32042, message: 'Nope' });
  });

  it('echo (a plain SDK tool) answers at once', async () => {
    const { client, session } = await connect({ principal: 'alice' });

    const direct = await client.callTool({ name: 'echo', arguments: { text: 'hi' } });
    expect(direct.content).toEqual([{ type: 'text', text: 'hi' }]);
    expect(direct.isError).not.toBe(true);

    const execution = await session.callTool('echo', { text: 'hi' });
    expect(execution.kind).toBe('immediate');
    const outcome = await execution.result();
    expect(outcome.status).toBe('completed');
    if (outcome.status !== 'completed') return;
    expect(textOf(outcome.result)).toBe('hi');
  });

  it('server/discover advertises the tasks extension as exactly {}', async () => {
    const { client, session } = await connect();
    expect(client.getProtocolEra()).toBe('modern');
    expect(client.getNegotiatedProtocolVersion()).toBe('2026-07-28');

    const discovered = await client.discover();
    expect(discovered.capabilities.extensions?.[TASKS_EXTENSION_ID]).toStrictEqual({});
    expect(session.capabilities).toMatchObject({ execution: true, cancellation: true });
  });

  it('tools/list lists the five tools with the DTO-derived input schemas', async () => {
    const { client } = await connect();
    const { tools } = await client.listTools();

    expect(tools.map((tool) => tool.name).sort()).toEqual([
      'add_slowly',
      'echo',
      'fail_with',
      'greet',
      'wait_for_cancel',
    ]);
    const byName = new Map(tools.map((tool) => [tool.name, tool]));
    const add = byName.get('add_slowly')!;
    expect(add).toMatchObject({
      title: 'Add slowly',
      description: 'Adds two numbers, reporting progress on the way.',
    });
    expect(add.inputSchema.type).toBe('object');
    expect([...(add.inputSchema.required ?? [])].sort()).toEqual(['a', 'b']);
    expect(add.inputSchema.properties).toMatchObject({
      a: { type: 'number' },
      b: { type: 'number' },
      delayMs: { type: 'integer', minimum: 0, maximum: 60_000 },
    });
    const fail = byName.get('fail_with')!;
    expect([...(fail.inputSchema.required ?? [])].sort()).toEqual(['code', 'message']);
    expect(fail.inputSchema.properties).toMatchObject({
      code: { type: 'integer' },
      message: { type: 'string' },
    });
    expect(byName.get('greet')!.inputSchema.type).toBe('object');
    expect(byName.get('echo')!.inputSchema.required).toEqual(['text']);
  });

  it('the raw path frames tasks/get with the standard headers and the declared extension', async () => {
    const { session } = await connect({ principal: 'alice' });
    const execution = await session.callTool('wait_for_cancel', {});
    if (execution.kind !== 'task') throw new Error('expected a task');
    const taskId = execution.handle.taskId;

    const sent: { headers: Headers; body: unknown }[] = [];
    const dispatch = createRawDispatch(app!.url, { Authorization: 'Bearer alice' }, (url, init) => {
      sent.push({ headers: new Headers(init?.headers), body: JSON.parse(String(init?.body)) });
      return fetch(url, init);
    });
    const meta = {
      'io.modelcontextprotocol/protocolVersion': PROTOCOL_VERSION,
      'io.modelcontextprotocol/clientInfo': { name: 'e2e', version: '1' },
      'io.modelcontextprotocol/clientCapabilities': { extensions: { [TASKS_EXTENSION_ID]: {} } },
    };
    const response = await dispatch({ method: 'tasks/get', params: { taskId, _meta: meta } });

    expect(response.kind).toBe('result');
    if (response.kind !== 'result') return;
    expect(response.result).toMatchObject({ taskId, status: 'working', resultType: 'complete' });
    expect(sent).toHaveLength(1);
    const [{ headers, body }] = sent as [(typeof sent)[number]];
    expect(Object.fromEntries(headers)).toMatchObject({
      'content-type': 'application/json',
      'mcp-protocol-version': '2026-07-28',
      'mcp-method': 'tasks/get',
      'mcp-name': taskId,
      authorization: 'Bearer alice',
    });
    expect(body).toMatchObject({ jsonrpc: '2.0', method: 'tasks/get', params: { taskId } });
    await execution.cancel();
  });

  it("another principal cannot read or cancel a task: bob's tasks/get is -32602 Task not found", async () => {
    const alice = await connect({ principal: 'alice' });
    const bob = await connect({ principal: 'bob' });
    const execution = await alice.session.callTool('wait_for_cancel', {});
    if (execution.kind !== 'task') throw new Error('expected a task');
    const taskId = execution.handle.taskId;
    expect((await alice.session.task(taskId).snapshot()).taskId).toBe(taskId);

    const read = await rejection(bob.session.task(taskId).snapshot());
    expect(read).toBeInstanceOf(JsonRpcResponseError);
    expect(read).toMatchObject({ code: -32602, message: 'Task not found' });

    const cancel = await rejection(bob.session.task(taskId).cancel());
    expect(cancel).toBeInstanceOf(JsonRpcResponseError);
    expect(cancel).toMatchObject({ code: -32602, message: 'Task not found' });

    // An unknown id answers exactly the same.
    const unknown = await rejection(bob.session.task('no-such-task' as TaskId).snapshot());
    expect(unknown).toMatchObject({ code: -32602, message: 'Task not found' });

    // Bob's cancel did not reach alice's task.
    const still = await alice.session.task(taskId).snapshot();
    expect(still.status).toBe('working');
    await execution.cancel();
    expect((await alice.session.task(taskId).snapshot()).status).toBe('cancelled');
  });
});
