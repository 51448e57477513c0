/**
 * The `nestjs-mcp-tasks/rekog` entry where rekog.e2e-spec.ts (the example on Express behind a
 * controller) does not go, each against a real @rekog/mcp-nest 2.0.5 app in a child process and
 * real HTTP on loopback:
 *
 * - a self-mounted route (no controller claims it): the entry fronts the route rekog mounts on the
 *   HTTP adapter, reads its bodies itself with the TasksModule's `maxBodyBytes`, and answers
 *   oversized and broken bodies without dying (test/rekog/fixture/self-mounted.ts);
 * - Fastify instead of Express, the example's shape (test/rekog/fixture/fastify.ts);
 * - rekog's access decorators (`@ToolScopes`, `@ToolRoles`) on `@TaskTool` methods, beside rekog
 *   `@Tool`s with the same ones, on a route without step-up and one with it; and task tools
 *   called by clients that take no tasks (test/rekog/fixture/access.ts).
 *
 * As in rekog.e2e-spec.ts, nothing here imports rekog (Jest on Node 20 cannot load it): the
 * fixtures are compiled once for the rekog specs (./harness.ts) and the tests start them with
 * `node`.
 */
import { join } from 'node:path';
import { Client as V2Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { CallToolResultSchema, CreateTaskResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { connectOfficialClient, testContextFetch, textOf } from '../support/official-client.js';
import {
  exchange,
  leak,
  mcpRequest,
  post,
  type RawRequest,
  type RawResponse,
} from '../support/raw.js';
import { openListen, rpc } from '../support/sse.js';
import { v1Client, v1Transport } from '../support/v1-client.js';
import { type JsonRpcMessage, legacyHeaders, standardHeaders } from '../support/wire.js';
import { type ServerProcess, startServer } from '../hostile/server.js';
import {
  buildRekogApps,
  eventually,
  FIXTURES,
  followTask,
  legacyRequest,
  messageOf,
  postWithHost,
  ROOT,
  TERMINAL,
} from './harness.js';

const SELF_MOUNTED_ENTRY = join(FIXTURES, 'self-mounted.js');
const FASTIFY_ENTRY = join(FIXTURES, 'fastify.js');
const ACCESS_ENTRY = join(FIXTURES, 'access.js');
const STDIO_ENTRY = join(FIXTURES, 'stdio.js');
const ENTRIES = [SELF_MOUNTED_ENTRY, FASTIFY_ENTRY, ACCESS_ENTRY, STDIO_ENTRY];

/** The self-mounted fixture's `maxBodyBytes`. */
const MAX_BODY_BYTES = 16 * 1024;
/** The header the Fastify fixture's guard sets on the reply. */
const GUARD_HEADER = 'x-rekog-guard';

/** `tasks/get` (2026-07-28) until the task is terminal; the last answer. */
function settled(url: string, taskId: string, principal: string): Promise<JsonRpcMessage> {
  return eventually(async () => {
    const got = await rpc(url, 'tasks/get', { taskId }, { principal });
    return TERMINAL.has(String(got.body.result?.status)) ? got.body : undefined;
  }, `task ${taskId} to settle`);
}

/** The ids of the caller's tasks, by a 2025-11-25 `tasks/list` (anonymous without `principal`). */
async function listedTaskIds(url: string, principal?: string): Promise<string[]> {
  const answer = await post(url, legacyRequest('tasks/list', {}, principal));
  const tasks = messageOf(answer)?.result?.tasks;
  if (!Array.isArray(tasks))
    throw new Error(`tasks/list answered ${answer.status}: ${answer.text}`);
  return (tasks as { taskId: string }[]).map((task) => task.taskId);
}

/** A body with a JSON-RPC error, as a test compares two of them. */
function errorAnswer(answer: RawResponse): { status: number; error: unknown; id: unknown } {
  return { status: answer.status, error: messageOf(answer)?.error, id: messageOf(answer)?.id };
}

/** The v1 SDK client (2025-11-25) on `url` as `principal`, closed by the caller. */
async function v1(url: string, principal: string): Promise<Client> {
  const client = v1Client();
  await client.connect(v1Transport(url, principal));
  return client;
}

/**
 * A process of one fixture for a describe: started before its tests, stopped after, and checked
 * after each test (a dead server fails every later test the same way: say why once).
 */
function serverFor(entry: string): () => ServerProcess {
  let server: ServerProcess | undefined;
  beforeAll(async () => {
    server = await startServer(entry);
  }, 60_000);
  afterAll(async () => {
    await server?.stop();
  });
  afterEach(() => {
    if (server && !server.alive()) throw new Error(`The fixture died:\n${server.output()}`);
  });
  return () => server!;
}

beforeAll(async () => {
  await buildRekogApps(ENTRIES);
}, 300_000);

describe('a self-mounted rekog route (no controller: TaskHttpTransport({ endpoint: "mcp" }) on the httpAdapter)', () => {
  const server = serverFor(SELF_MOUNTED_ENTRY);
  const url = (): string => server().url;
  const opened: { close(): Promise<void> }[] = [];
  afterEach(async () => {
    for (const closing of opened.splice(0)) await closing.close();
  });

  it('2026-07-28: a task tool’s call makes a task there, a listen stream gets its status, tasks/get follows it; another principal’s get is not found', async () => {
    const created = await rpc(
      url(),
      'tools/call',
      { name: 'add_slowly', arguments: { a: 2, b: 3, delayMs: 1_000 } },
      { principal: 'alice' },
    );
    expect(created.status).toBe(200);
    expect(created.body.result).toMatchObject({ resultType: 'task', status: 'working' });
    const taskId = String(created.body.result?.taskId);

    const listen = await openListen(url(), { principal: 'alice', taskIds: [taskId] });
    expect(listen.status).toBe(200);
    expect(listen.stream).toBeDefined();
    opened.push(listen.stream!);
    expect((await listen.stream!.next()).method).toBe('notifications/subscriptions/acknowledged');
    const pushed = await followTask(listen.stream!);
    expect(pushed.every((task) => task.taskId === taskId)).toBe(true);
    expect(pushed.map((task) => task.statusMessage)).toContain('Adding: 100%');
    expect(pushed.at(-1)).toMatchObject({ status: 'completed' });

    const got = await rpc(url(), 'tasks/get', { taskId }, { principal: 'alice' });
    expect(got.body.result).toMatchObject({
      taskId,
      status: 'completed',
      result: { structuredContent: { sum: 5 } },
    });
    // The principal is read on the self-mounted route too (the module's `principal` option).
    const foreign = await rpc(url(), 'tasks/get', { taskId }, { principal: 'bob' });
    expect(foreign.body.error).toMatchObject({ code: -32602, message: 'Task not found' });
  });

  it('the official v2 client with ext-tasks runs add_slowly there to its result, and calls rekog’s echo on the same URL', async () => {
    const official = await connectOfficialClient(url(), { principal: 'alice' });
    opened.push(official);
    const execution = await official.session.callTool('add_slowly', { a: 20, b: 22, delayMs: 0 });
    expect(execution.kind).toBe('task');
    const { outcome } = await execution.settle();
    expect(outcome.status).toBe('completed');
    if (outcome.status === 'completed') expect(textOf(outcome.result)).toBe('42');

    const echo = await official.client.callTool({ name: 'echo', arguments: { text: 'mounted' } });
    expect(echo.content).toEqual([{ type: 'text', text: 'mounted' }]);
  });

  it('2025-11-25: the v1 client’s task there; tasks/list shows the caller’s tasks of both eras and not another’s; rekog’s echo answers', async () => {
    const carol = await v1(url(), 'carol');
    opened.push(carol);
    const legacy = await carol.request(
      { method: 'tools/call', params: { name: 'wait_for_cancel', arguments: {}, task: {} } },
      CreateTaskResultSchema,
    );
    const modern = await rpc(
      url(),
      'tools/call',
      { name: 'wait_for_cancel', arguments: {} },
      { principal: 'carol' },
    );
    const modernId = String(modern.body.result?.taskId);
    const dave = await v1(url(), 'dave');
    opened.push(dave);
    const theirs = await dave.request(
      { method: 'tools/call', params: { name: 'wait_for_cancel', arguments: {}, task: {} } },
      CreateTaskResultSchema,
    );

    const listed = await carol.experimental.tasks.listTasks();
    expect(listed.tasks.map((task) => task.taskId)).toEqual([modernId, legacy.task.taskId]);

    const echo = await carol.callTool({ name: 'echo', arguments: { text: 'legacy' } });
    expect(echo.content).toEqual([{ type: 'text', text: 'legacy' }]);

    for (const taskId of [legacy.task.taskId, modernId]) {
      await carol.experimental.tasks.cancelTask(taskId);
    }
    await dave.experimental.tasks.cancelTask(theirs.task.taskId);
  });

  it('a body over maxBodyBytes (16 KiB) is HTTP 413 with a JSON-RPC error, for rekog’s traffic and task traffic alike; one under it is served', async () => {
    const over = 'x'.repeat(MAX_BODY_BYTES + 1_024);
    const tooLarge = { status: 413, error: { code: -32600, message: 'Request body too large' } };
    const requests: [string, RawRequest][] = [
      ['rekog’s echo', mcpRequest('tools/call', { name: 'echo', arguments: { text: over } })],
      [
        'a task tool’s call',
        mcpRequest(
          'tools/call',
          { name: 'add_slowly', arguments: { a: 1, b: 2, note: over } },
          { principal: 'erin' },
        ),
      ],
      ['2025 tasks/list', legacyRequest('tasks/list', { cursor: over }, 'erin')],
    ];
    for (const [what, request] of requests) {
      const answer = await post(url(), request);
      expect({ what, status: answer.status, error: answer.json?.error }).toEqual({
        what,
        ...tooLarge,
      });
      expect(leak(answer.text)).toBeUndefined();
    }
    // A body sent in chunks, with no Content-Length to go by, is counted as it comes.
    const chunked = mcpRequest('tools/call', { name: 'echo', arguments: { text: over } });
    const streamed = await fetch(url(), {
      method: 'POST',
      headers: chunked.headers,
      body: new Blob([chunked.body]).stream(),
      duplex: 'half',
    } as RequestInit);
    expect(streamed.status).toBe(413);
    expect(JSON.parse(await streamed.text())).toMatchObject({ error: tooLarge.error });
    expect(await listedTaskIds(url(), 'erin')).toEqual([]);

    const under = 'y'.repeat(MAX_BODY_BYTES - 2_048);
    const served = await rpc(url(), 'tools/call', { name: 'echo', arguments: { text: under } });
    expect(textOf(served.body.result)).toBe(under);
  });

  it('broken JSON is HTTP 400 -32700 (empty, cut short, not JSON at all); the process lives on and serves the next request', async () => {
    for (const body of ['{"jsonrpc":"2.0","id":1,"method":', '', 'not json', '{"a":1}}']) {
      const answer = await exchange(server().port, {
        method: 'POST',
        target: '/mcp',
        headers: [
          ['Host', `127.0.0.1:${server().port}`],
          ...Object.entries(standardHeaders('tools/call', 'echo')),
        ],
        body,
      });
      expect({ body, status: answer.status, error: answer.json?.error }).toEqual({
        body,
        status: 400,
        error: { code: -32700, message: expect.stringMatching(/^Parse error/) },
      });
      expect(leak(answer.text)).toBeUndefined();
    }
    expect(server().alive()).toBe(true);
    const echo = await rpc(url(), 'tools/call', { name: 'echo', arguments: { text: 'alive' } });
    expect(textOf(echo.body.result)).toBe('alive');
    const task = await rpc(
      url(),
      'tools/call',
      { name: 'add_slowly', arguments: { a: 1, b: 1, delayMs: 0 } },
      { principal: 'alice' },
    );
    expect(task.body.result).toMatchObject({ resultType: 'task' });
  });

  it('a task answer names the server rekog names (one endpoint, one serverInfo: rekog’s echo and a task tool’s call carry the same)', async () => {
    // The fixture names its server in McpStrategy only, as docs/rekog.md's few lines do.
    const echo = await rpc(url(), 'tools/call', { name: 'echo', arguments: { text: 'who' } });
    const task = await rpc(
      url(),
      'tools/call',
      { name: 'add_slowly', arguments: { a: 1, b: 1, delayMs: 0 } },
      { principal: 'alice' },
    );
    const key = 'io.modelcontextprotocol/serverInfo';
    expect(echo.body.result?._meta?.[key]).toEqual({
      name: 'rekog-self-mounted',
      version: '0.1.0',
    });
    expect(task.body.result?._meta?.[key]).toEqual(echo.body.result?._meta?.[key]);
  });
});

describe('Fastify: the example’s shape (a guarded McpHttpControllerFor(TaskHttpTransport)) on FastifyAdapter', () => {
  const server = serverFor(FASTIFY_ENTRY);
  const url = (): string => server().url;

  it('a task tool’s call, a listen stream that receives its status, tasks/get; the header the guard set on the reply is on each', async () => {
    const created = await rpc(
      url(),
      'tools/call',
      { name: 'add_slowly', arguments: { a: 4, b: 5, delayMs: 1_000 } },
      { principal: 'alice' },
    );
    expect(created.status).toBe(200);
    expect(created.body.result).toMatchObject({ resultType: 'task', status: 'working' });
    expect(created.headers.get(GUARD_HEADER)).toBe('ran');
    const taskId = String(created.body.result?.taskId);

    const listen = await openListen(url(), { principal: 'alice', taskIds: [taskId] });
    try {
      expect(listen.status).toBe(200);
      expect(listen.headers.get('content-type')).toMatch(/^text\/event-stream/);
      expect(listen.headers.get(GUARD_HEADER)).toBe('ran');
      expect((await listen.stream!.next()).method).toBe('notifications/subscriptions/acknowledged');
      const pushed = await followTask(listen.stream!);
      expect(pushed.every((task) => task.taskId === taskId)).toBe(true);
      expect(pushed.map((task) => task.statusMessage)).toContain('Adding: 100%');
      expect(pushed.at(-1)).toMatchObject({ status: 'completed' });
    } finally {
      await listen.stream?.close();
    }

    const got = await rpc(url(), 'tasks/get', { taskId }, { principal: 'alice' });
    expect(got.headers.get(GUARD_HEADER)).toBe('ran');
    expect(got.body.result).toMatchObject({
      taskId,
      status: 'completed',
      result: { content: [{ type: 'text', text: '9' }] },
    });
  });

  it('the guard’s principal owns the task: another principal’s tasks/get and 2025 tasks/result are not found', async () => {
    const created = await rpc(
      url(),
      'tools/call',
      { name: 'wait_for_cancel', arguments: {} },
      { principal: 'alice' },
    );
    const taskId = String(created.body.result?.taskId);
    const foreign = await rpc(url(), 'tasks/get', { taskId }, { principal: 'bob' });
    expect(foreign.body.error).toMatchObject({ code: -32602, message: 'Task not found' });
    const legacy = await post(url(), legacyRequest('tasks/result', { taskId }, 'bob'));
    expect(messageOf(legacy)?.error).toMatchObject({ code: -32602 });
    const notCancelled = await rpc(url(), 'tasks/cancel', { taskId }, { principal: 'bob' });
    expect(notCancelled.body.error).toEqual(foreign.body.error);
    const cancelled = await rpc(url(), 'tasks/cancel', { taskId }, { principal: 'alice' });
    expect(cancelled.body.error).toBeUndefined();
    const got = await rpc(url(), 'tasks/get', { taskId }, { principal: 'alice' });
    expect(got.body.result).toMatchObject({ taskId, status: 'cancelled' });
  });

  it('the official v2 client runs add_slowly to its result and calls rekog’s echo; the v1 client does both on 2025-11-25', async () => {
    const official = await connectOfficialClient(url(), { principal: 'alice' });
    try {
      const execution = await official.session.callTool('add_slowly', { a: 1, b: 2, delayMs: 0 });
      expect(execution.kind).toBe('task');
      const { outcome } = await execution.settle();
      expect(outcome.status).toBe('completed');
      if (outcome.status === 'completed') expect(textOf(outcome.result)).toBe('3');
      const echo = await official.client.callTool({ name: 'echo', arguments: { text: 'fast' } });
      expect(echo.content).toEqual([{ type: 'text', text: 'fast' }]);
    } finally {
      await official.close();
    }

    const legacy = await v1(url(), 'alice');
    try {
      const result = await legacy.experimental.tasks.callToolStream(
        { name: 'add_slowly', arguments: { a: 3, b: 4, delayMs: 0 } },
        CallToolResultSchema,
        { task: {} },
      );
      let last: { type: string; result?: { structuredContent?: unknown } } | undefined;
      for await (const message of result) last = message as typeof last;
      expect(last).toMatchObject({ type: 'result', result: { structuredContent: { sum: 7 } } });
      const echo = await legacy.callTool({ name: 'echo', arguments: { text: 'legacy' } });
      expect(echo.content).toEqual([{ type: 'text', text: 'legacy' }]);
    } finally {
      await legacy.close();
    }
  });

  it('rekog’s Host check refuses a bad Host on task traffic as on rekog’s own (403), on Fastify too', async () => {
    const port = server().port;
    const withHost = (request: RawRequest) => postWithHost(port, 'evil.example', request);
    const rekogOwn = await withHost(
      mcpRequest('tools/call', { name: 'echo', arguments: { text: 'x' } }),
    );
    expect(rekogOwn.status).toBe(403);
    expect(rekogOwn.json?.error).toMatchObject({ code: -32000 });
    const taskCall = await withHost(
      mcpRequest(
        'tools/call',
        { name: 'add_slowly', arguments: { a: 1, b: 2 } },
        { principal: 'zed' },
      ),
    );
    expect({ status: taskCall.status, body: taskCall.json }).toEqual({
      status: 403,
      body: rekogOwn.json,
    });
    expect(await listedTaskIds(url(), 'zed')).toEqual([]);
  });
});

describe('rekog’s access decorators on a @TaskTool, beside rekog @Tools with the same ones', () => {
  const server = serverFor(ACCESS_ENTRY);
  const url = (): string => server().url;
  const stepUpUrl = (): string => `http://127.0.0.1:${server().port}/mcp-step-up`;

  /** Each task tool, the rekog tool with the same requirement, and callers who lack it. */
  const pairs = [
    {
      requirement: "@ToolScopes(['reports:write'])",
      task: 'write_report',
      rekog: 'write_note',
      lacking: ['bob', 'bob,reports:read', 'bob,role:admin'],
      holding: 'carol,reports:write',
    },
    {
      requirement: "@ToolRoles(['admin'])",
      task: 'approve_report',
      rekog: 'approve_note',
      lacking: ['bob', 'bob,role:editor', 'bob,reports:write'],
      holding: 'carol,role:admin',
    },
  ];
  /** What two denials look like once their tool names are the same. */
  const sameTool = (value: unknown, from: string, to: string): unknown =>
    JSON.parse(JSON.stringify(value).replaceAll(`'${from}'`, `'${to}'`));

  it('a caller without the scope or role gets rekog’s JSON-RPC denial, worded as for rekog’s own tool, on both eras and anonymous too; no task is made', async () => {
    for (const { requirement, task, rekog, lacking } of pairs) {
      for (const caller of [...lacking, undefined]) {
        const who = caller ?? '(anonymous)';
        const modern = (name: string) =>
          post(
            url(),
            mcpRequest('tools/call', { name, arguments: {} }, { principal: caller, id: 'call-1' }),
          );
        const legacy = (name: string) =>
          post(
            url(),
            legacyRequest('tools/call', { name, arguments: {}, task: {} }, caller, 'call-2'),
          );
        for (const [era, send] of [
          ['2026-07-28', modern],
          ['2025-11-25', legacy],
        ] as const) {
          const ours = messageOf(await send(task));
          const theirs = messageOf(await send(rekog));
          expect(theirs?.error?.code).toBe(-32600);
          expect(theirs?.error?.message).toMatch(new RegExp(`^Tool '${rekog}' requires `));
          expect({ requirement, who, era, id: ours?.id, error: ours?.error }).toEqual({
            requirement,
            who,
            era,
            id: theirs?.id,
            error: sameTool(theirs?.error, rekog, task),
          });
          expect(ours?.result).toBeUndefined();
        }
      }
    }
    // Every caller above is the principal bob, or anonymous.
    expect(await listedTaskIds(url(), 'bob')).toEqual([]);
    expect(await listedTaskIds(url())).toEqual([]);
  });

  it('the denial of a task tool has the HTTP status of rekog’s denial of its own tool, on both eras', async () => {
    const answers: Record<string, unknown>[] = [];
    for (const { task, rekog } of pairs) {
      for (const [era, request] of [
        [
          '2026-07-28',
          (name: string) => mcpRequest('tools/call', { name, arguments: {} }, { principal: 'bob' }),
        ],
        [
          '2025-11-25',
          (name: string) => legacyRequest('tools/call', { name, arguments: {}, task: {} }, 'bob'),
        ],
      ] as const) {
        const ours = await post(url(), request(task));
        const theirs = await post(url(), request(rekog));
        answers.push({ era, task, status: ours.status, rekogStatus: theirs.status });
      }
    }
    expect(answers).toEqual(answers.map((answer) => ({ ...answer, status: answer.rekogStatus })));
  });

  it('stepUpAuthorization: a scope shortfall is 403 with the Bearer insufficient_scope challenge naming reports:write, as rekog answers for write_note; no task is made', async () => {
    for (const caller of ['bob', 'bob,reports:read']) {
      for (const [era, request] of [
        [
          '2026-07-28',
          (name: string) =>
            mcpRequest('tools/call', { name, arguments: {} }, { principal: caller, id: 7 }),
        ],
        [
          '2025-11-25',
          (name: string) =>
            legacyRequest('tools/call', { name, arguments: {}, task: {} }, caller, 7),
        ],
      ] as const) {
        const ours = await post(stepUpUrl(), request('write_report'));
        const theirs = await post(stepUpUrl(), request('write_note'));
        expect(ours.status).toBe(403);
        const challenge = ours.headers['www-authenticate'];
        expect(challenge).toMatch(/^Bearer error="insufficient_scope", /);
        expect(challenge).toContain('scope="reports:write"');
        expect(challenge).toContain(
          `error_description="Tool 'write_report' requires scopes: reports:write"`,
        );
        expect({ caller, era, ...errorAnswer(ours), challenge }).toEqual({
          caller,
          era,
          ...(sameTool(errorAnswer(theirs), 'write_note', 'write_report') as object),
          challenge: sameTool(theirs.headers['www-authenticate'], 'write_note', 'write_report'),
        });
        expect(ours.json?.id).toBe(7);
      }
      expect(await listedTaskIds(url(), caller)).toEqual([]);
    }
  });

  it('stepUpAuthorization: a role shortfall and an anonymous caller keep the JSON-RPC denial (no challenge), as for rekog’s tools', async () => {
    for (const [caller, task, rekog] of [
      ['bob', 'approve_report', 'approve_note'],
      [undefined, 'write_report', 'write_note'],
    ] as const) {
      const request = (name: string) =>
        mcpRequest('tools/call', { name, arguments: {} }, { principal: caller });
      const ours = await post(stepUpUrl(), request(task));
      const theirs = await post(stepUpUrl(), request(rekog));
      expect(theirs.status).not.toBe(403);
      expect(ours.status).not.toBe(403);
      expect(ours.headers['www-authenticate']).toBeUndefined();
      expect(ours.json?.error).toEqual(sameTool(theirs.json?.error, rekog, task));
    }
  });

  it('a caller with the scope or role gets a task, on both routes and both eras, and it settles for that caller', async () => {
    for (const { task, holding } of pairs) {
      const principal = holding.split(',')[0]!;
      for (const at of [url(), stepUpUrl()]) {
        const created = await rpc(
          at,
          'tools/call',
          { name: task, arguments: {} },
          { principal: holding },
        );
        expect({ task, at, result: created.body.result }).toMatchObject({
          task,
          at,
          result: { resultType: 'task' },
        });
        const done = await settled(at, String(created.body.result?.taskId), holding);
        expect(textOf(done.result?.result)).toMatch(new RegExp(` by ${principal}$`));
      }
      const legacy = await v1(url(), holding);
      try {
        const created = await legacy.request(
          { method: 'tools/call', params: { name: task, arguments: {}, task: {} } },
          CreateTaskResultSchema,
        );
        const result = await legacy.experimental.tasks.getTaskResult(
          created.task.taskId,
          CallToolResultSchema,
        );
        expect(textOf(result)).toMatch(new RegExp(` by ${principal}$`));
      } finally {
        await legacy.close();
      }
    }
  });

  it('tools/list shows a task tool to whom rekog shows its tool beside it, with the same securitySchemes', async () => {
    const names = async (principal?: string) => {
      const answer = await post(url(), mcpRequest('tools/list', {}, { principal }));
      const tools = (answer.json?.result?.tools ?? []) as {
        name: string;
        _meta?: Record<string, unknown>;
      }[];
      return new Map(tools.map((tool) => [tool.name, tool._meta?.securitySchemes]));
    };
    const everyone = ['sum_as_task', 'sum_inline', 'sum_runs'];
    expect([...(await names('bob')).keys()].sort()).toEqual(everyone);
    expect([...(await names()).keys()].sort()).toEqual(everyone);
    const writer = await names('carol,reports:write');
    expect([...writer.keys()].sort()).toEqual([...everyone, 'write_note', 'write_report'].sort());
    expect(writer.get('write_report')).toEqual(writer.get('write_note'));
    const admin = await names('carol,role:admin');
    expect([...admin.keys()].sort()).toEqual(
      [...everyone, 'approve_note', 'approve_report'].sort(),
    );
    expect(admin.get('approve_report')).toEqual(admin.get('approve_note'));
  });
});

describe('task tools for a client that takes no tasks (rekog’s inline path)', () => {
  const server = serverFor(ACCESS_ENTRY);
  const url = (): string => server().url;
  /** Which of the sum tools' methods have run in the fixture so far (its rekog tool `sum_runs`). */
  const runs = async (): Promise<string[]> => {
    const answer = await rpc(url(), 'tools/call', { name: 'sum_runs', arguments: {} });
    return textOf(answer.body.result).split(',').filter(Boolean);
  };

  it('2026-07-28 without the extension: a task-only tool is -32021 (HTTP 400) and makes no task; an inline tool runs inline through rekog and answers its result', async () => {
    const taskOnly = await post(
      url(),
      mcpRequest(
        'tools/call',
        { name: 'sum_as_task', arguments: { a: 1, b: 2 } },
        { principal: 'dan', tasks: false },
      ),
    );
    expect(taskOnly.status).toBe(400);
    expect(taskOnly.json?.error).toMatchObject({
      code: -32021,
      data: { requiredCapabilities: { extensions: { 'io.modelcontextprotocol/tasks': {} } } },
    });
    expect(await listedTaskIds(url(), 'dan')).toEqual([]);
    expect(await runs()).not.toContain('sum_as_task');

    const inline = await post(
      url(),
      mcpRequest(
        'tools/call',
        { name: 'sum_inline', arguments: { a: 1, b: 2 } },
        { principal: 'dan', tasks: false },
      ),
    );
    expect(inline.status).toBe(200);
    expect(messageOf(inline)?.result).toMatchObject({
      resultType: 'complete',
      content: [{ type: 'text', text: '3' }],
      structuredContent: { sum: 3, inline: true, principal: 'dan' },
    });
    // The same tool with the extension declared is a task.
    const asTask = await rpc(
      url(),
      'tools/call',
      { name: 'sum_inline', arguments: { a: 1, b: 2 } },
      { principal: 'dan' },
    );
    expect(asTask.body.result).toMatchObject({ resultType: 'task' });
    const done = await settled(url(), String(asTask.body.result?.taskId), 'dan');
    expect(done.result?.result).toMatchObject({ structuredContent: { sum: 3, inline: false } });
  });

  it('the official v2 client on 2026-07-28 without ext-tasks: the inline tool answers its result, the task-only tool is refused with -32021', async () => {
    const client = new V2Client(
      { name: 'no-tasks-client', version: '1.0.0' },
      { versionNegotiation: { mode: { pin: '2026-07-28' } } },
    );
    await client.connect(
      new StreamableHTTPClientTransport(new URL(url()), {
        fetch: testContextFetch,
        requestInit: { headers: { Authorization: 'Bearer erin' } },
      }),
    );
    try {
      expect(client.getNegotiatedProtocolVersion()).toBe('2026-07-28');
      const inline = await client.callTool({ name: 'sum_inline', arguments: { a: 5, b: 6 } });
      expect(inline.content).toEqual([{ type: 'text', text: '11' }]);
      expect(inline.structuredContent).toEqual({ sum: 11, inline: true, principal: 'erin' });
      const refused = await client
        .callTool({ name: 'sum_as_task', arguments: { a: 5, b: 6 } })
        .then(
          () => undefined,
          (error: unknown) => error,
        );
      expect(refused).toMatchObject({ code: -32021 });
    } finally {
      await client.close();
    }
  });

  it('2025-11-25 without params.task: the task-only tool is -32601 (HTTP 200); the inline tool runs inline through rekog, for the v1 client too', async () => {
    const taskOnly = await post(
      url(),
      legacyRequest('tools/call', { name: 'sum_as_task', arguments: { a: 2, b: 5 } }, 'fay', 3),
    );
    expect(taskOnly.status).toBe(200);
    expect(messageOf(taskOnly)).toMatchObject({
      id: 3,
      error: {
        code: -32601,
        message: 'Tool sum_as_task must be called as a task (execution.taskSupport "required")',
      },
    });
    expect(await listedTaskIds(url(), 'fay')).toEqual([]);
    expect(await runs()).not.toContain('sum_as_task');

    const client = await v1(url(), 'fay');
    try {
      const inline = await client.callTool({ name: 'sum_inline', arguments: { a: 2, b: 5 } });
      expect(inline.content).toEqual([{ type: 'text', text: '7' }]);
      expect(inline.structuredContent).toEqual({ sum: 7, inline: true, principal: 'fay' });
      expect(inline._meta?.['io.modelcontextprotocol/related-task']).toBeUndefined();
    } finally {
      await client.close();
    }
  });

  it('a 2025 JSON-RPC batch, which the front leaves to rekog: the task-only tool answers rekog’s tool error and does not run (with params.task too), the inline tool runs inline, rekog’s access rules hold', async () => {
    const call = (id: number, name: string, extra: Record<string, unknown> = {}) => ({
      jsonrpc: '2.0',
      id,
      method: 'tools/call',
      params: { name, arguments: { a: 2, b: 3 }, ...extra },
    });
    const batch = [
      call(1, 'sum_as_task'),
      call(2, 'sum_as_task', { task: {} }),
      call(3, 'sum_inline'),
      call(4, 'write_report', { arguments: {} }),
    ];
    const answer = await post(url(), {
      headers: legacyHeaders('gus'),
      body: JSON.stringify(batch),
    });
    expect(answer.status).toBe(200);
    const byId = new Map(
      ((JSON.parse(answer.text) as JsonRpcMessage[]) ?? []).map((message) => [message.id, message]),
    );
    const mustBeTask = {
      content: [
        {
          type: 'text',
          text: 'Tool sum_as_task must be called as a task (execution.taskSupport "required")',
        },
      ],
      isError: true,
    };
    expect(byId.get(1)?.result).toEqual(mustBeTask);
    expect(byId.get(2)?.result).toEqual(mustBeTask);
    expect(byId.get(3)?.result).toMatchObject({
      content: [{ type: 'text', text: '5' }],
      structuredContent: { sum: 5, inline: true, principal: 'gus' },
    });
    expect(byId.get(4)?.error).toEqual({
      code: -32600,
      message: "Tool 'write_report' requires scopes: reports:write",
    });
    // (No tasks/list check here: an inline run is stored as a task, and lists as one.)
    expect(await runs()).not.toContain('sum_as_task');
  });
});

describe('STDIO beside the HTTP route (rekog’s StdioTransport in the same strategy)', () => {
  it('rekog lists the task tools there and runs the inline one inline; the task-only one answers a tool error and does not run', async () => {
    const client = v1Client();
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [STDIO_ENTRY],
      cwd: ROOT,
      stderr: 'pipe',
    });
    let stderr = '';
    transport.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    try {
      await client.connect(transport);
      // No task traffic goes over STDIO, so nothing there says the tools make tasks.
      expect(client.getServerCapabilities()?.tasks).toBeUndefined();
      const { tools } = await client.listTools();
      expect(tools.map((tool) => tool.name).sort()).toEqual([
        'sum_as_task',
        'sum_inline',
        'sum_runs',
      ]);

      const inline = await client.callTool({ name: 'sum_inline', arguments: { a: 1, b: 2 } });
      expect(inline).toMatchObject({
        content: [{ type: 'text', text: '3' }],
        structuredContent: { sum: 3, inline: true, principal: null },
      });
      expect(inline.isError).not.toBe(true);

      const taskOnly = await client.callTool({ name: 'sum_as_task', arguments: { a: 1, b: 2 } });
      expect(taskOnly).toEqual({
        content: [
          {
            type: 'text',
            text: 'Tool sum_as_task must be called as a task (execution.taskSupport "required")',
          },
        ],
        isError: true,
      });
      const ran = await client.callTool({ name: 'sum_runs', arguments: {} });
      expect(textOf(ran)).toBe('sum_inline');
    } catch (error) {
      throw new Error(`${String(error)}\nThe STDIO fixture wrote:\n${stderr}`, { cause: error });
    } finally {
      await client.close();
    }
  });
});
