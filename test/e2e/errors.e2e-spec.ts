import { randomBytes } from 'node:crypto';
import { DemoModule } from '../../examples/demo.module.js';
import { type InMemoryTaskStore, TaskStore } from '../../src/entries/store.js';
import { ADAPTERS, type RunningApp, startApp } from '../support/app.js';
import {
  leak,
  mcpRequest,
  type McpRequestOptions,
  post,
  postRaw,
  type RawRequest,
  type RawResponse,
} from '../support/raw.js';
import { standardHeaders, TASKS_EXTENSION } from '../support/wire.js';

/**
 * What the endpoint answers to requests that are wrong in every way a client (or an attacker) can
 * make them wrong, over raw HTTP: the HTTP status, the JSON-RPC error code, the echoed id, a JSON
 * body without server internals, and a server that keeps serving afterwards.
 */

const MISSING_CAPABILITY = -32021;
const HEADER_MISMATCH = -32020;
const PARSE_ERROR = -32700;
const INVALID_REQUEST = -32600;
const METHOD_NOT_FOUND = -32601;
const INVALID_PARAMS = -32602;

const TASK_METHODS = ['tasks/get', 'tasks/update', 'tasks/cancel'] as const;
type TaskMethod = (typeof TASK_METHODS)[number];

/** The params of a task method for `taskId` (an update that answers no input request). */
const taskParams = (method: TaskMethod, taskId: unknown): Record<string, unknown> =>
  method === 'tasks/update' ? { taskId, inputResponses: {} } : { taskId };

/** A task id no one was ever given, in the shape of a real one. */
const unknownTaskId = (): string => randomBytes(32).toString('base64url');

interface ExpectedError {
  status: number;
  code: number;
  id: string | number | null;
  message?: string | RegExp;
}

describe.each(ADAPTERS)('MCP endpoint errors (%s)', (adapter) => {
  let running: RunningApp;
  /** Alice's `wait_for_cancel` tasks: working for the whole file unless a bug ends them. */
  let aliceTask: string;
  let aliceOther: string;
  /** Every response of this file, for the final sweep. */
  const seen: Array<{ what: string; response: RawResponse }> = [];
  let nextId = 100;

  const storeSize = (): number => running.app.get<InMemoryTaskStore>(TaskStore).size;

  async function send(
    method: string,
    params: Record<string, unknown>,
    options: McpRequestOptions = {},
  ): Promise<RawResponse> {
    const response = await post(running.url, mcpRequest(method, params, options));
    seen.push({ what: `${method} ${JSON.stringify(params)}`, response });
    return response;
  }

  async function sendBody(headers: Record<string, string>, body: string): Promise<RawResponse> {
    const response = await post(running.url, { headers, body });
    seen.push({ what: `body ${body.slice(0, 60)}`, response });
    return response;
  }

  async function sendRaw(request: RawRequest): Promise<RawResponse> {
    const response = await postRaw(running.url, request);
    seen.push({ what: `raw ${JSON.stringify(request.headers)}`, response });
    return response;
  }

  async function startTask(principal: string, tool: string): Promise<string> {
    const response = await send('tools/call', { name: tool, arguments: {} }, { principal });
    expect(response.status).toBe(200);
    const taskId = response.json?.result?.taskId;
    expect(typeof taskId).toBe('string');
    return taskId as string;
  }

  /** Status, content type, and a JSON-RPC error body with that code and id, nothing more. */
  function expectError(response: RawResponse, expected: ExpectedError): void {
    expect(leak(response.text)).toBeUndefined();
    expect({ status: response.status, body: response.json }).toMatchObject({
      status: expected.status,
      body: { jsonrpc: '2.0', id: expected.id, error: { code: expected.code } },
    });
    expect(response.headers['content-type']).toMatch(/^application\/json\b/);
    expect(response.json).not.toHaveProperty('result');
    expect(typeof response.json?.error?.message).toBe('string');
    if (expected.message !== undefined) {
      expect(response.json?.error?.message).toMatch(expected.message);
    }
  }

  async function isWorking(taskId: string): Promise<boolean> {
    const response = await send('tasks/get', { taskId }, { principal: 'alice', id: nextId++ });
    return response.json?.result?.status === 'working';
  }

  async function expectWorking(taskId: string): Promise<void> {
    const response = await send('tasks/get', { taskId }, { principal: 'alice', id: nextId++ });
    expect({ status: response.status, body: response.json }).toMatchObject({
      status: 200,
      body: { result: { taskId, status: 'working', resultType: 'complete' } },
    });
  }

  /** A plain tool through the SDK and a task read through the lean path both still answer. */
  async function expectStillServing(): Promise<void> {
    const id = nextId++;
    const echo = await send(
      'tools/call',
      { name: 'echo', arguments: { text: 'still here' } },
      { id, tasks: false },
    );
    expect({ status: echo.status, body: echo.json }).toMatchObject({
      status: 200,
      body: { id, result: { content: [{ type: 'text', text: 'still here' }] } },
    });
    await expectWorking(aliceTask);
  }

  beforeAll(async () => {
    running = await startApp(DemoModule, adapter);
    aliceTask = await startTask('alice', 'wait_for_cancel');
    aliceOther = await startTask('alice', 'wait_for_cancel');
  });

  // A test that (wrongly) ends one of Alice's tasks fails by itself; the next ones get a new task.
  beforeEach(async () => {
    if (!(await isWorking(aliceTask))) aliceTask = await startTask('alice', 'wait_for_cancel');
    if (!(await isWorking(aliceOther))) aliceOther = await startTask('alice', 'wait_for_cancel');
  });

  afterAll(async () => {
    await running?.close();
  });

  describe('missing tasks capability: -32021, HTTP 400', () => {
    it.each([
      ['no client capabilities', {}],
      ['no extensions', { elicitation: {} }],
      ['another extension only', { extensions: { 'example.com/other': {} } }],
    ])('tools/call of a task tool, %s: refused before any task exists', async (_, caps) => {
      const before = storeSize();
      const id = nextId++;
      const response = await send(
        'tools/call',
        { name: 'add_slowly', arguments: { a: 1, b: 2, delayMs: 0 } },
        { id, capabilities: caps, principal: 'alice' },
      );
      expectError(response, { status: 400, code: MISSING_CAPABILITY, id });
      expect(response.json?.error?.data).toEqual({
        requiredCapabilities: { extensions: { [TASKS_EXTENSION]: {} } },
      });
      // The tool's method only ever runs on a stored task: no new task, no run.
      expect(storeSize()).toBe(before);
      await expectStillServing();
    });

    it.each(TASK_METHODS)('%s on an own task: refused, the task unchanged', async (method) => {
      const id = `no-caps-${method}`;
      const response = await send(method, taskParams(method, aliceTask), {
        id,
        tasks: false,
        principal: 'alice',
      });
      expectError(response, { status: 400, code: MISSING_CAPABILITY, id });
      expect(response.json?.error?.data).toEqual({
        requiredCapabilities: { extensions: { [TASKS_EXTENSION]: {} } },
      });
      await expectStillServing();
    });
  });

  describe('Task not found: -32602, HTTP 200, one answer for unknown and foreign ids', () => {
    it.each(TASK_METHODS)(
      '%s: unknown id, Bob on Alice’s task and anonymous on it answer the same bytes',
      async (method) => {
        const id = `not-found-${method}`;
        const answers = {
          unknownForBob: await send(method, taskParams(method, unknownTaskId()), {
            id,
            principal: 'bob',
          }),
          unknownForAnonymous: await send(method, taskParams(method, unknownTaskId()), { id }),
          aliceTaskForBob: await send(method, taskParams(method, aliceTask), {
            id,
            principal: 'bob',
          }),
          aliceTaskForAnonymous: await send(method, taskParams(method, aliceTask), { id }),
        };
        for (const response of Object.values(answers)) {
          expectError(response, {
            status: 200,
            code: INVALID_PARAMS,
            id,
            message: /^Task not found$/,
          });
        }
        const reference = answers.unknownForBob.text;
        expect(answers.unknownForAnonymous.text).toBe(reference);
        expect(answers.aliceTaskForBob.text).toBe(reference);
        expect(answers.aliceTaskForAnonymous.text).toBe(reference);
        // Neither Bob nor an anonymous caller changed Alice's task.
        await expectStillServing();
      },
    );
  });

  describe('standard headers: -32020, HTTP 400', () => {
    // Functions: the task ids exist only once beforeAll has run.
    const cases: Array<[string, string, () => Record<string, unknown>, () => McpRequestOptions]> = [
      [
        'tasks/get without Mcp-Name',
        'tasks/get',
        () => ({ taskId: aliceTask }),
        () => ({ name: null }),
      ],
      [
        'tasks/get with Mcp-Name naming another task of the caller',
        'tasks/get',
        () => ({ taskId: aliceTask }),
        () => ({ name: aliceOther }),
      ],
      [
        'tasks/get with Mcp-Name naming an unknown task',
        'tasks/get',
        () => ({ taskId: aliceTask }),
        () => ({ name: unknownTaskId() }),
      ],
      [
        'tasks/update with Mcp-Name naming another task',
        'tasks/update',
        () => ({ taskId: aliceTask, inputResponses: {} }),
        () => ({ name: aliceOther }),
      ],
      [
        'tasks/cancel with Mcp-Name naming another task',
        'tasks/cancel',
        () => ({ taskId: aliceTask }),
        () => ({ name: aliceOther }),
      ],
      [
        'tasks/cancel without Mcp-Name',
        'tasks/cancel',
        () => ({ taskId: aliceTask }),
        () => ({ name: null }),
      ],
      [
        'tasks/get without Mcp-Method',
        'tasks/get',
        () => ({ taskId: aliceTask }),
        () => ({ methodHeader: null }),
      ],
      [
        'tasks/cancel under Mcp-Method: tasks/get',
        'tasks/cancel',
        () => ({ taskId: aliceTask }),
        () => ({ methodHeader: 'tasks/get' }),
      ],
      [
        'tasks/get without MCP-Protocol-Version',
        'tasks/get',
        () => ({ taskId: aliceTask }),
        () => ({ protocolVersion: null }),
      ],
      [
        'tasks/cancel with MCP-Protocol-Version naming another revision',
        'tasks/cancel',
        () => ({ taskId: aliceTask }),
        () => ({ protocolVersion: '2025-11-25' }),
      ],
      [
        'tools/call with Mcp-Name naming another tool',
        'tools/call',
        () => ({ name: 'add_slowly', arguments: { a: 1, b: 2, delayMs: 0 } }),
        () => ({ name: 'echo' }),
      ],
      [
        'tools/call without Mcp-Name',
        'tools/call',
        () => ({ name: 'add_slowly', arguments: { a: 1, b: 2, delayMs: 0 } }),
        () => ({ name: null }),
      ],
      [
        'tools/call without Mcp-Method',
        'tools/call',
        () => ({ name: 'add_slowly', arguments: { a: 1, b: 2, delayMs: 0 } }),
        () => ({ methodHeader: null }),
      ],
      [
        'tools/call without MCP-Protocol-Version',
        'tools/call',
        () => ({ name: 'add_slowly', arguments: { a: 1, b: 2, delayMs: 0 } }),
        () => ({ protocolVersion: null }),
      ],
    ];

    it.each(cases)('%s', async (_, method, params, options) => {
      const before = storeSize();
      const id = nextId++;
      const response = await send(method, params(), { ...options(), id, principal: 'alice' });
      expectError(response, { status: 400, code: HEADER_MISMATCH, id });
      expect(storeSize()).toBe(before);
      await expectWorking(aliceOther);
      await expectStillServing();
    });
  });

  describe('bodies that are not JSON-RPC requests', () => {
    it('malformed JSON: -32700, HTTP 400, a JSON-RPC body without server internals', async () => {
      const response = await sendBody(standardHeaders('tasks/get', aliceTask), '{"jsonrpc":');
      expectError(response, { status: 400, code: PARSE_ERROR, id: null });
      await expectStillServing();
    });

    it('an empty body: a JSON-RPC error, HTTP 400', async () => {
      const response = await sendBody(standardHeaders('tasks/get', aliceTask), '');
      expect([PARSE_ERROR, INVALID_REQUEST]).toContain(response.json?.error?.code);
      expectError(response, { status: 400, code: response.json!.error!.code, id: null });
      await expectStillServing();
    });

    it('a body over maxBodyBytes (default 1 MiB): -32600, HTTP 413', async () => {
      const text = 'x'.repeat(1_100_000);
      const request = mcpRequest('tools/call', { name: 'echo', arguments: { text } }, { id: 8 });
      const response = await sendBody(request.headers, request.body);
      expectError(response, { status: 413, code: INVALID_REQUEST, id: null });
      await expectStillServing();
    });

    it('a body under maxBodyBytes (512 KiB) is served', async () => {
      const text = 'x'.repeat(512 * 1024);
      const request = mcpRequest('tools/call', { name: 'echo', arguments: { text } }, { id: 8 });
      const response = await sendBody(request.headers, request.body);
      expect(response.status).toBe(200);
      expect(response.json).toMatchObject({ id: 8, result: { content: [{ type: 'text', text }] } });
    });

    it('Content-Type text/plain: -32600, HTTP 415', async () => {
      const { headers, body } = mcpRequest('tasks/get', { taskId: aliceTask }, { id: 5 });
      const response = await sendBody({ ...headers, 'content-type': 'text/plain' }, body);
      // The body is not read, so there is no id to echo.
      expectError(response, { status: 415, code: INVALID_REQUEST, id: null });
      await expectStillServing();
    });

    it.each(['application/x-www-form-urlencoded', 'text/plain', 'application/octet-stream'])(
      "a 900 kB body of type %s: -32600, HTTP 415 (not the app parser's limit)",
      async (type) => {
        const { headers } = mcpRequest('tasks/get', { taskId: aliceTask }, { id: 5 });
        const body = `a=${'x'.repeat(900_000)}`;
        const response = await sendBody({ ...headers, 'content-type': type }, body);
        expectError(response, { status: 415, code: INVALID_REQUEST, id: null });
        await expectStillServing();
      },
    );

    it.each([
      ['an array of numbers', '[1,2]', null],
      ['a string', '"x"', null],
      ['a number', '42', null],
      ['null', 'null', null],
      ['an empty object', '{}', null],
      [
        'a request whose params are a number',
        '{"jsonrpc":"2.0","id":3,"method":"tasks/get","params":5}',
        3,
      ],
      ['a request without jsonrpc', '{"id":"v","method":"tasks/get","params":{}}', 'v'],
    ])('%s (%s): -32600, HTTP 400', async (_, body, id) => {
      const response = await sendBody(standardHeaders('tasks/get'), body);
      expectError(response, { status: 400, code: INVALID_REQUEST, id });
      await expectStillServing();
    });
  });

  describe('params of the wrong type: -32602, HTTP 200', () => {
    const cases: Array<[string, string, () => Record<string, unknown>]> = [
      ['tasks/get, taskId: 42', 'tasks/get', () => ({ taskId: 42 })],
      ['tasks/update, taskId: 42', 'tasks/update', () => ({ taskId: 42, inputResponses: {} })],
      ['tasks/cancel, taskId: 42', 'tasks/cancel', () => ({ taskId: 42 })],
      ['tasks/get, no taskId', 'tasks/get', () => ({})],
      ['tasks/cancel, taskId: {}', 'tasks/cancel', () => ({ taskId: {} })],
      [
        'tasks/update, inputResponses: "x"',
        'tasks/update',
        () => ({ taskId: aliceTask, inputResponses: 'x' }),
      ],
      [
        'tasks/update, inputResponses: []',
        'tasks/update',
        () => ({ taskId: aliceTask, inputResponses: [] }),
      ],
      ['tasks/update, no inputResponses', 'tasks/update', () => ({ taskId: aliceTask })],
      [
        'tools/call of a task tool, arguments: "x"',
        'tools/call',
        () => ({ name: 'add_slowly', arguments: 'x' }),
      ],
    ];

    it.each(cases)('%s', async (_, method, params) => {
      const before = storeSize();
      const id = `types-${nextId++}`;
      const response = await send(method, params(), { id, principal: 'alice' });
      expectError(response, { status: 200, code: INVALID_PARAMS, id });
      expect(storeSize()).toBe(before);
      await expectStillServing();
    });
  });

  describe('unknown methods: -32601, HTTP 404 (as the SDK answers)', () => {
    it.each([
      ['foo/bar', {}],
      ['tasks/list', {}],
      ['tasks/result', { taskId: 'x' }],
    ])('%s', async (method, params) => {
      const id = nextId++;
      const response = await send(method, params, { id, principal: 'alice' });
      expectError(response, { status: 404, code: METHOD_NOT_FOUND, id });
      await expectStillServing();
    });
  });

  describe('tool arguments that fail validation: a tool error result, no task', () => {
    it.each([
      ['add_slowly (class-validator DTO), a: "x"', 'add_slowly', { a: 'x', b: 2 }],
      ['add_slowly, b missing', 'add_slowly', { a: 1 }],
      ['add_slowly, an unknown key', 'add_slowly', { a: 1, b: 2, c: 3 }],
      ['fail_with, code: "x"', 'fail_with', { code: 'x', message: 'm' }],
      ['echo (zod), text: 5', 'echo', { text: 5 }],
    ])('%s', async (_, name, args) => {
      const before = storeSize();
      const id = nextId++;
      const response = await send(
        'tools/call',
        { name, arguments: args },
        { id, principal: 'alice' },
      );
      expect(leak(response.text)).toBeUndefined();
      expect(response.status).toBe(200);
      expect(response.json).toMatchObject({
        jsonrpc: '2.0',
        id,
        result: {
          resultType: 'complete',
          isError: true,
          content: [{ type: 'text', text: expect.stringMatching(/^Input validation error: /) }],
        },
      });
      expect(response.json?.result).not.toHaveProperty('taskId');
      expect(storeSize()).toBe(before);
      await expectStillServing();
    });

    it('an unknown tool: -32602, HTTP 200', async () => {
      const id = nextId++;
      const response = await send(
        'tools/call',
        { name: 'no_such_tool', arguments: {} },
        { id, principal: 'alice' },
      );
      expectError(response, { status: 200, code: INVALID_PARAMS, id });
      await expectStillServing();
    });
  });

  describe('DNS rebinding protection on a loopback server', () => {
    const port = (): string => new URL(running.url).port;
    const taskCall = (extra: Record<string, string>): RawRequest => {
      const request = mcpRequest(
        'tools/call',
        { name: 'add_slowly', arguments: { a: 1, b: 2, delayMs: 0 } },
        { id: 9, principal: 'alice' },
      );
      return { ...request, headers: { ...request.headers, ...extra } };
    };

    it.each([
      ['Host: evil.example', () => ({ host: 'evil.example' })],
      ['Host: evil.example:<port>', () => ({ host: `evil.example:${port()}` })],
      ['Origin: http://evil.example', () => ({ origin: 'http://evil.example' })],
      ['Origin: http://evil.example:<port>', () => ({ origin: `http://evil.example:${port()}` })],
    ])('%s: HTTP 403 with a JSON-RPC error, nothing runs', async (_, headers) => {
      const before = storeSize();
      const response = await sendRaw(taskCall(headers()));
      // The SDK's own host and origin checks answer -32000 with id null; so does this one.
      expectError(response, { status: 403, code: -32000, id: null });
      expect(storeSize()).toBe(before);
      await expectStillServing();
    });

    it.each([
      ['Host: localhost:<port>', () => ({ host: `localhost:${port()}` })],
      ['Host: 127.0.0.1:<port>', () => ({ host: `127.0.0.1:${port()}` })],
      ['Origin: http://localhost:<port>', () => ({ origin: `http://localhost:${port()}` })],
    ])('%s: served', async (_, headers) => {
      const response = await sendRaw(taskCall(headers()));
      expect(leak(response.text)).toBeUndefined();
      expect({ status: response.status, body: response.json }).toMatchObject({
        status: 200,
        body: { jsonrpc: '2.0', id: 9, result: { resultType: 'task', status: 'working' } },
      });
    });
  });

  it('no response of this file was a 5xx, non-JSON, or carried a stack trace or a path', () => {
    expect(seen.length).toBeGreaterThan(50);
    const bad = seen
      .filter(
        ({ response }) =>
          response.status >= 500 ||
          response.json === undefined ||
          leak(response.text) !== undefined,
      )
      .map(({ what, response }) => `${what} → ${response.status} ${response.text.slice(0, 200)}`);
    expect(bad).toEqual([]);
  });
});
