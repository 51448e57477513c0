/**
 * Tasks in a @rekog/mcp-nest app (issue 24), end to end: the rekog demo (examples/rekog, on the
 * real @rekog/mcp-nest 2.0.5 of node_modules) runs as a child process, and the official clients
 * of both protocol eras talk to its one endpoint, rekog's `/mcp`: the v2 client with the Tasks
 * extension (2026-07-28) and the v1 SDK 1.32 client (2025-11-25) each run the demo's task tools
 * to their end and call rekog's own `echo` on the same URL.
 *
 * Why a child process: @rekog/mcp-nest is CommonJS and `require()`s @nestjs/common, which ships
 * as ES modules only. Node (20.19 and later) loads that; Jest's module system on Node 20 does
 * not. So nothing here imports rekog: the example, its plain twin and the suite's fixture (the
 * example plus a rekog tool that changes rekog's tool list at run time) are compiled once for the
 * rekog specs (./harness.ts), and the tests start them with `node`.
 */
import { join } from 'node:path';
import type { TaskView } from '@modelcontextprotocol/ext-tasks/client';
import type { FetchLike } from '@modelcontextprotocol/client';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import {
  CallToolResultSchema,
  CreateTaskResultSchema,
  ListToolsResultSchema,
  McpError,
  RELATED_TASK_META_KEY,
} from '@modelcontextprotocol/sdk/types.js';
import { connectTasksClient, type TasksClient } from '../../src/client/index.js';
import {
  connectOfficialClient,
  elicitationHandler,
  type OfficialClient,
  type OfficialClientOptions,
  TASKS_EXTENSION_ID,
  testContextFetch,
  textOf,
} from '../support/official-client.js';
import { mcpRequest, post, type RawRequest } from '../support/raw.js';
import { openListen, rpc, type SseReader } from '../support/sse.js';
import { v1Client, v1Transport } from '../support/v1-client.js';
import { legacyHeaders } from '../support/wire.js';
import { type ServerProcess, startServer } from '../hostile/server.js';
import { rejection, sleep } from '../support/helpers.js';
import {
  buildRekogApps,
  eventually,
  EXAMPLE_ENTRY,
  FIXTURES,
  followTask,
  legacyRequest,
  messageOf,
  PLAIN_ENTRY,
  postWithHost,
} from './harness.js';

/** The suite's fixture: the rekog demo plus `add_tool` (test/rekog/fixture/main.ts). */
const FIXTURE_ENTRY = join(FIXTURES, 'main.js');
/** What the suite starts: its fixture, the demo as `npm run demo:rekog` runs it, its plain twin. */
const ENTRIES = [FIXTURE_ENTRY, EXAMPLE_ENTRY, PLAIN_ENTRY];

/** The demo's task tools, and every tool the demo app lists. */
const TASK_TOOLS = ['add_slowly', 'fail_with', 'greet', 'wait_for_cancel'];
const DEMO_TOOLS = ['add_slowly', 'echo', 'fail_with', 'greet', 'wait_for_cancel'];

type V1Message = { type: string; task?: { taskId: string; statusMessage?: string } } & Record<
  string,
  unknown
>;

async function collect(stream: AsyncGenerator<unknown>): Promise<V1Message[]> {
  const seen: V1Message[] = [];
  for await (const message of stream) seen.push(message as V1Message);
  return seen;
}

/** Counts requests by `Mcp-Method` on both HTTP paths of this package's client. */
function countingFetch(counts: Map<string, number>): FetchLike {
  return async (input, init) => {
    const method = new Headers(init?.headers).get('mcp-method') ?? '(none)';
    counts.set(method, (counts.get(method) ?? 0) + 1);
    return testContextFetch(input, init);
  };
}

describe('a @rekog/mcp-nest 2.0.5 app with tasks (examples/rekog, a real process)', () => {
  let server: ServerProcess | undefined;
  const url = (): string => server!.url;

  beforeAll(async () => {
    await buildRekogApps(ENTRIES);
    server = await startServer(FIXTURE_ENTRY);
  }, 300_000);

  afterAll(async () => {
    await server?.stop();
  });

  afterEach(() => {
    // A dead server fails every later test the same way: say why once, with its last output.
    if (server && !server.alive()) throw new Error(`The rekog app died:\n${server.output()}`);
  });

  describe('2026-07-28: the official v2 client with ext-tasks', () => {
    const clients: OfficialClient[] = [];
    const streams: SseReader[] = [];
    const connect = async (options: OfficialClientOptions = {}): Promise<OfficialClient> => {
      const connected = await connectOfficialClient(url(), options);
      clients.push(connected);
      return connected;
    };

    afterEach(async () => {
      for (const stream of streams.splice(0)) await stream.close();
      for (const connected of clients.splice(0)) await connected.close();
    });

    it('server/discover on rekog’s route advertises the tasks extension; tools/list shows echo and the task tools', async () => {
      const { client, session } = await connect({ principal: 'alice' });
      expect(client.getNegotiatedProtocolVersion()).toBe('2026-07-28');
      const discovered = await client.discover();
      expect(discovered.capabilities.extensions?.[TASKS_EXTENSION_ID]).toStrictEqual({});
      expect(discovered.capabilities.tools).toBeDefined();
      expect(session.capabilities).toMatchObject({ execution: true, cancellation: true });

      const { tools } = await client.listTools();
      expect(tools.map((tool) => tool.name).sort()).toEqual([...DEMO_TOOLS, 'add_tool'].sort());
      const byName = new Map(tools.map((tool) => [tool.name, tool]));
      expect(byName.get('echo')).toMatchObject({
        description: 'Returns the text.',
        inputSchema: { type: 'object', properties: { text: { type: 'string' } } },
      });
      const add = byName.get('add_slowly')!;
      expect(add.description).toBe('Adds two numbers, reporting progress on the way.');
      expect([...(add.inputSchema.required ?? [])].sort()).toEqual(['a', 'b']);
      expect(add.inputSchema.properties).toMatchObject({
        a: { type: 'number' },
        b: { type: 'number' },
        delayMs: { type: 'integer', minimum: 0, maximum: 60_000 },
      });
    });

    it('a task tool keeps its @TaskTool title in rekog’s tools/list, on both eras', async () => {
      // The default endpoint lists `title` (test/e2e/client.e2e-spec.ts); rekog's tools/list
      // copies its own fields one by one and has no `title`, so the entry must carry it over.
      const titles = { add_slowly: 'Add slowly', greet: 'Greet', fail_with: 'Fail with' };
      const modern = await rpc(url(), 'tools/list', {}, { principal: 'alice' });
      const legacy = await post(url(), legacyRequest('tools/list', {}, 'alice'));
      for (const [era, answer] of [
        ['2026-07-28', modern.body],
        ['2025-11-25', messageOf(legacy)],
      ] as const) {
        const tools = (answer?.result?.tools ?? []) as { name: string; title?: string }[];
        const listed = Object.fromEntries(
          tools.filter((tool) => tool.name in titles).map((tool) => [tool.name, tool.title]),
        );
        expect({ era, titles: listed }).toEqual({ era, titles });
      }
    });

    it('add_slowly: created as a task, its progress on a listen stream through rekog’s route, settled to "5" and {sum: 5}', async () => {
      const { session } = await connect({ principal: 'alice' });
      const execution = await session.callTool('add_slowly', { a: 2, b: 3, delayMs: 2_000 });
      expect(execution.kind).toBe('task');
      if (execution.kind !== 'task') return;
      const taskId = execution.handle.taskId;

      const listen = await openListen(url(), { principal: 'alice', taskIds: [taskId] });
      expect(listen.status).toBe(200);
      expect(listen.stream).toBeDefined();
      streams.push(listen.stream!);
      expect((await listen.stream!.next()).method).toBe('notifications/subscriptions/acknowledged');
      const pushed = await followTask(listen.stream!);

      expect(pushed.every((task) => task.taskId === taskId)).toBe(true);
      expect(pushed.map((task) => task.statusMessage)).toEqual(
        expect.arrayContaining(['Adding: 75%', 'Adding: 100%']),
      );
      expect(pushed.at(-1)).toMatchObject({ status: 'completed' });

      const seen: TaskView[] = [];
      const { outcome } = await execution.settle({
        onEvent: (event) => {
          if (event.type === 'task') seen.push(event.task);
        },
      });
      expect(outcome.status).toBe('completed');
      if (outcome.status !== 'completed') return;
      expect(outcome.result).toMatchObject({
        content: [{ type: 'text', text: '5' }],
        structuredContent: { sum: 5 },
      });
      expect(seen.at(-1)).toMatchObject({ taskId, status: 'completed' });
    });

    it('greet: the input request reaches the session’s handler, the answer goes back, "Hello, Ada!"', async () => {
      const questions: unknown[] = [];
      const { session } = await connect({
        principal: 'alice',
        onInputRequest: elicitationHandler((params) => {
          questions.push(params);
          return { action: 'accept', content: { name: 'Ada' } };
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
      expect(outcome.result.content).toEqual([{ type: 'text', text: 'Hello, Ada!' }]);
      expect(questions).toEqual([
        expect.objectContaining({ mode: 'form', message: 'What is your name?' }),
      ]);
      expect(statuses).toContain('input_required');
    });

    it('wait_for_cancel: cancelled by the client, it ends cancelled on the server', async () => {
      const { session } = await connect({ principal: 'alice' });
      const execution = await session.callTool('wait_for_cancel', {});
      if (execution.kind !== 'task') throw new Error('expected a task');
      const controller = session.task(execution.handle.taskId);
      await eventually(async () => {
        const task = await controller.snapshot();
        return task.statusMessage === 'Working until cancelled' ? task : undefined;
      }, 'wait_for_cancel to report that it works');

      await execution.cancel();
      expect((await execution.result()).status).toBe('cancelled');
      expect((await controller.snapshot()).status).toBe('cancelled');
    });

    it('fail_with: the task fails with the JSON-RPC error the tool names', async () => {
      const { session } = await connect({ principal: 'alice' });
      const execution = await session.callTool('fail_with', { code: -32042, message: 'Nope' });
      expect(execution.kind).toBe('task');

      const { outcome, lastTask } = await execution.settle();

      expect(outcome.status).toBe('failed');
      if (outcome.status !== 'failed') return;
      expect(outcome.error).toMatchObject({ code: -32042, message: 'Nope' });
      expect(lastTask?.raw.error).toEqual({ code: -32042, message: 'Nope' });
    });

    it('rekog’s echo answers at once on the same URL, through the client and the session', async () => {
      const { client, session } = await connect({ principal: 'alice' });
      const direct = await client.callTool({ name: 'echo', arguments: { text: 'hi' } });
      expect(direct.content).toEqual([{ type: 'text', text: 'hi' }]);
      expect(direct.isError).not.toBe(true);

      const execution = await session.callTool('echo', { text: 'again' });
      expect(execution.kind).toBe('immediate');
      const outcome = await execution.result();
      expect(outcome.status).toBe('completed');
      if (outcome.status === 'completed') expect(textOf(outcome.result)).toBe('again');
    });

    it('nestjs-mcp-tasks/client follows add_slowly over its own listen stream and calls echo, one URL', async () => {
      const counts = new Map<string, number>();
      let mcp: TasksClient | undefined;
      try {
        mcp = await connectTasksClient(url(), {
          headers: { Authorization: 'Bearer alice' },
          fetch: countingFetch(counts),
        });
        const call = await mcp.callTool('add_slowly', { a: 20, b: 22, delayMs: 2_000 });
        expect(call.isTask).toBe(true);
        const messages: (string | undefined)[] = [];
        call.onStatus((task) => messages.push(task.statusMessage));
        const result = await call.result();

        expect(textOf(result)).toBe('42');
        expect(messages).toContain('Adding: 100%');
        expect(counts.get('subscriptions/listen')).toBe(1);

        const echo = await mcp.callTool('echo', { text: 'plain' });
        expect(echo.isTask).toBe(false);
        expect(textOf(await echo.result())).toBe('plain');
      } finally {
        await mcp?.close();
      }
    });
  });

  describe('2025-11-25: the v1 SDK 1.32 client', () => {
    const opened: Client[] = [];
    const connect = async (
      principal = 'alice',
      answer?: (message: string) => string | undefined,
    ): Promise<Client> => {
      const client = v1Client(answer);
      await client.connect(v1Transport(url(), principal));
      opened.push(client);
      return client;
    };
    const startWaiting = async (client: Client): Promise<string> =>
      (
        await client.request(
          { method: 'tools/call', params: { name: 'wait_for_cancel', arguments: {}, task: {} } },
          CreateTaskResultSchema,
        )
      ).task.taskId;

    afterEach(async () => {
      for (const client of opened.splice(0)) await client.close();
    });

    it('initialize advertises tasks; tools/list shows echo and the task tools, these with execution.taskSupport', async () => {
      const client = await connect();
      expect(client.getServerCapabilities()?.tasks).toEqual({
        list: {},
        cancel: {},
        requests: { tools: { call: {} } },
      });
      expect(client.getServerCapabilities()?.tools).toBeDefined();

      const { tools } = await client.request({ method: 'tools/list' }, ListToolsResultSchema);
      const byName = new Map(tools.map((tool) => [tool.name, tool]));
      expect([...byName.keys()].sort()).toEqual([...DEMO_TOOLS, 'add_tool'].sort());
      for (const name of TASK_TOOLS) {
        expect({ name, execution: byName.get(name)?.execution }).toEqual({
          name,
          execution: { taskSupport: 'required' },
        });
      }
      expect(byName.get('echo')?.execution?.taskSupport).not.toBe('required');
    });

    it('add_slowly as a task: created, its progress polled, settled to {sum: 5}', async () => {
      const client = await connect();
      const seen = await collect(
        client.experimental.tasks.callToolStream(
          { name: 'add_slowly', arguments: { a: 2, b: 3, delayMs: 2_000 } },
          CallToolResultSchema,
          { task: { ttl: 60_000 } },
        ),
      );

      expect(seen[0]).toMatchObject({ type: 'taskCreated', task: { status: 'working' } });
      const taskId = seen[0]!.task!.taskId;
      const progress = seen
        .filter((message) => message.type === 'taskStatus')
        .map((message) => message.task?.statusMessage);
      expect(progress.some((message) => /^Adding: \d+%$/.test(message ?? ''))).toBe(true);
      const last = seen.at(-1) as {
        type: string;
        result: { structuredContent?: unknown; _meta?: Record<string, unknown> };
      };
      expect(last.type).toBe('result');
      expect(last.result.structuredContent).toEqual({ sum: 5 });
      expect(last.result._meta?.[RELATED_TASK_META_KEY]).toEqual({ taskId });
    });

    it('greet asks through the client’s elicitation handler and settles to "Hello, Grace!"', async () => {
      const asked: string[] = [];
      const client = await connect('alice', (message) => {
        asked.push(message);
        return 'Grace';
      });
      const seen = await collect(
        client.experimental.tasks.callToolStream(
          { name: 'greet', arguments: {} },
          CallToolResultSchema,
          { task: {} },
        ),
      );

      expect(asked).toEqual(['What is your name?']);
      const last = seen.at(-1) as { type: string; result: { content: unknown[] } };
      expect(last).toMatchObject({ type: 'result' });
      expect(last.result.content).toEqual([{ type: 'text', text: 'Hello, Grace!' }]);
    });

    it('wait_for_cancel: tasks/cancel answers the cancelled task; a second cancel is -32602', async () => {
      const client = await connect();
      const taskId = await startWaiting(client);

      expect(await client.experimental.tasks.cancelTask(taskId)).toMatchObject({
        taskId,
        status: 'cancelled',
      });
      expect((await client.experimental.tasks.getTask(taskId)).status).toBe('cancelled');
      const again = await rejection(client.experimental.tasks.cancelTask(taskId));
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
      const taskId = seen[0]!.task!.taskId;

      expect(await client.experimental.tasks.getTask(taskId)).toMatchObject({
        status: 'failed',
        statusMessage: 'No such report',
      });
      const error = await rejection(
        client.experimental.tasks.getTaskResult(taskId, CallToolResultSchema),
      );
      expect(error).toBeInstanceOf(McpError);
      expect((error as McpError).code).toBe(-32042);
    });

    it('tasks/list: the caller’s tasks of both eras, newest first, and none of another’s', async () => {
      const client = await connect('carol');
      const other = await connect('dave');
      const legacy = await startWaiting(client);
      const modern = await rpc(
        url(),
        'tools/call',
        { name: 'wait_for_cancel', arguments: {} },
        { principal: 'carol' },
      );
      const modernId = String(modern.body.result?.taskId);
      const theirs = await startWaiting(other);

      const listed = await client.experimental.tasks.listTasks();
      expect(listed.tasks.map((task) => task.taskId)).toEqual([modernId, legacy]);
      expect(listed.tasks.every((task) => task.status === 'working')).toBe(true);

      for (const taskId of [legacy, modernId]) await client.experimental.tasks.cancelTask(taskId);
      await other.experimental.tasks.cancelTask(theirs);
    });

    it('rekog’s echo answers on the same URL', async () => {
      const client = await connect();
      const result = await client.callTool({ name: 'echo', arguments: { text: 'hi' } });
      expect(result.content).toEqual([{ type: 'text', text: 'hi' }]);
      expect(result.isError).not.toBe(true);
    });
  });

  describe('one endpoint for rekog and the tasks', () => {
    it('another principal’s task is "not found" on both eras, as a made-up id is, and stays untouched', async () => {
      const created = await rpc(
        url(),
        'tools/call',
        { name: 'wait_for_cancel', arguments: {} },
        { principal: 'alice' },
      );
      const taskId = String(created.body.result?.taskId);
      expect(created.body.result).toMatchObject({ resultType: 'task', status: 'working' });

      // 2026-07-28.
      const missing = await rpc(
        url(),
        'tasks/get',
        { taskId: 'no-such-task' },
        { principal: 'bob' },
      );
      expect(missing.body.error).toMatchObject({ code: -32602, message: 'Task not found' });
      for (const method of ['tasks/get', 'tasks/cancel']) {
        const foreign = await rpc(url(), method, { taskId }, { principal: 'bob' });
        expect({ method, error: foreign.body.error }).toEqual({
          method,
          error: missing.body.error,
        });
      }

      // 2025-11-25.
      const legacyMissing = await post(
        url(),
        legacyRequest('tasks/get', { taskId: 'no-such-task' }, 'bob'),
      );
      expect(messageOf(legacyMissing)?.error).toMatchObject({ code: -32602 });
      for (const method of ['tasks/get', 'tasks/cancel', 'tasks/result']) {
        const foreign = await post(url(), legacyRequest(method, { taskId }, 'bob'));
        expect({ method, error: messageOf(foreign)?.error }).toEqual({
          method,
          error: messageOf(legacyMissing)?.error,
        });
      }
      const bobsList = await post(url(), legacyRequest('tasks/list', {}, 'bob'));
      const bobsTasks = (messageOf(bobsList)?.result?.tasks ?? []) as { taskId: string }[];
      expect(bobsTasks.map((task) => task.taskId)).not.toContain(taskId);

      const still = await rpc(url(), 'tasks/get', { taskId }, { principal: 'alice' });
      expect(still.body.result).toMatchObject({ taskId, status: 'working' });
      const cancelled = await rpc(url(), 'tasks/cancel', { taskId }, { principal: 'alice' });
      expect(cancelled.body.error).toBeUndefined();
    });

    it('rekog’s Host check refuses a bad Host on task traffic of both eras as on rekog’s own (403), and creates nothing', async () => {
      const port = server!.port;
      const rekogOwn = await postWithHost(
        port,
        'evil.example',
        mcpRequest('tools/call', { name: 'echo', arguments: { text: 'x' } }),
      );
      expect(rekogOwn.status).toBe(403);
      expect(rekogOwn.json?.error).toMatchObject({ code: -32000 });
      expect(rekogOwn.json?.error?.message).toContain('evil.example');

      const before = await post(url(), legacyRequest('tasks/list', {}, 'erin'));
      expect(messageOf(before)?.result?.tasks).toEqual([]);

      const taskTraffic: [string, RawRequest][] = [
        [
          '2026 tools/call of a task tool',
          mcpRequest(
            'tools/call',
            { name: 'add_slowly', arguments: { a: 1, b: 2 } },
            { principal: 'erin' },
          ),
        ],
        ['2026 tasks/get', mcpRequest('tasks/get', { taskId: 'any' }, { principal: 'erin' })],
        ['2026 tasks/cancel', mcpRequest('tasks/cancel', { taskId: 'any' }, { principal: 'erin' })],
        [
          '2026 tasks/update',
          mcpRequest(
            'tasks/update',
            { taskId: 'any', inputResponses: { name: { action: 'decline' } } },
            { principal: 'erin' },
          ),
        ],
        [
          '2026 subscriptions/listen',
          mcpRequest(
            'subscriptions/listen',
            { notifications: { taskIds: ['any'] } },
            { principal: 'erin' },
          ),
        ],
        [
          '2025 tools/call with a task',
          legacyRequest('tools/call', { name: 'wait_for_cancel', arguments: {}, task: {} }, 'erin'),
        ],
        ['2025 tasks/list', legacyRequest('tasks/list', {}, 'erin')],
        ['2025 tasks/get', legacyRequest('tasks/get', { taskId: 'any' }, 'erin')],
        ['2025 tasks/result', legacyRequest('tasks/result', { taskId: 'any' }, 'erin')],
        [
          '2025 input answer',
          {
            headers: legacyHeaders('erin'),
            body: JSON.stringify({
              jsonrpc: '2.0',
              id: 'nestjs-mcp-tasks/input:any:name',
              result: { action: 'decline' },
            }),
          },
        ],
      ];
      for (const [what, request] of taskTraffic) {
        const answer = await postWithHost(port, 'evil.example', request);
        expect({ what, status: answer.status, body: answer.json }).toEqual({
          what,
          status: 403,
          body: rekogOwn.json,
        });
      }

      const after = await post(url(), legacyRequest('tasks/list', {}, 'erin'));
      expect(messageOf(after)?.result?.tasks).toEqual([]);
      // The same requests with a good Host are served (the refusal was the Host's).
      const good = await postWithHost(
        port,
        `127.0.0.1:${port}`,
        legacyRequest('tasks/list', {}, 'erin'),
      );
      expect(good.status).toBe(200);
      expect(messageOf(good)?.result?.tasks).toEqual([]);
    });

    it('the example checks Origin too: Origin http://evil.example is refused 403 as the package’s own endpoint refuses it, on rekog’s traffic and task traffic; same-origin and no Origin are served', async () => {
      const port = server!.port;
      const self = `127.0.0.1:${port}`;
      const withOrigin = (origin: string | undefined, request: RawRequest) =>
        postWithHost(port, self, {
          headers: { ...request.headers, ...(origin !== undefined && { origin }) },
          body: request.body,
        });
      // McpHostGuard's answer to a foreign Origin (the SDK's validator words the message).
      const refusal = {
        status: 403,
        body: {
          jsonrpc: '2.0',
          id: null,
          error: { code: -32000, message: 'Invalid Origin: evil.example' },
        },
      };
      const requests: [string, RawRequest][] = [
        ['rekog’s echo', mcpRequest('tools/call', { name: 'echo', arguments: { text: 'x' } })],
        [
          '2026 tools/call of a task tool',
          mcpRequest(
            'tools/call',
            { name: 'add_slowly', arguments: { a: 1, b: 2 } },
            { principal: 'oscar' },
          ),
        ],
        ['2026 tasks/get', mcpRequest('tasks/get', { taskId: 'any' }, { principal: 'oscar' })],
        ['2025 tasks/list', legacyRequest('tasks/list', {}, 'oscar')],
      ];
      for (const [what, request] of requests) {
        for (const origin of ['http://evil.example', 'https://evil.example:8443']) {
          const answer = await withOrigin(origin, request);
          expect({ what, origin, status: answer.status, body: answer.json }).toEqual({
            what,
            origin,
            ...refusal,
          });
        }
      }
      const listed = await withOrigin(undefined, legacyRequest('tasks/list', {}, 'oscar'));
      expect(messageOf(listed)?.result?.tasks).toEqual([]);

      // This machine's own pages, and clients that send no Origin, are served.
      for (const origin of [`http://${self}`, 'http://localhost:5173', undefined]) {
        const echo = await withOrigin(
          origin,
          mcpRequest('tools/call', { name: 'echo', arguments: { text: 'here' } }),
        );
        expect({ origin, status: echo.status }).toEqual({ origin, status: 200 });
        expect(messageOf(echo)?.result?.content).toEqual([{ type: 'text', text: 'here' }]);
        const task = await withOrigin(
          origin,
          mcpRequest('tasks/get', { taskId: 'any' }, { principal: 'oscar' }),
        );
        expect(messageOf(task)?.error).toMatchObject({ code: -32602, message: 'Task not found' });
      }
    });

    // Last: it adds a tool to rekog's list, which the tools/list cases above do not expect.
    it('a rekog list change (strategy.registerTool at run time) reaches the listen stream that asked for tool list changes', async () => {
      const tools = await openListen(url(), {
        principal: 'alice',
        notifications: { toolsListChanged: true },
      });
      const tasksOnly = await openListen(url(), { principal: 'alice', taskIds: [] });
      try {
        expect(tools.status).toBe(200);
        expect(tools.stream).toBeDefined();
        expect((await tools.stream!.next()).method).toBe(
          'notifications/subscriptions/acknowledged',
        );
        expect((await tasksOnly.stream!.next()).method).toBe(
          'notifications/subscriptions/acknowledged',
        );

        const added = await rpc(
          url(),
          'tools/call',
          { name: 'add_tool', arguments: { name: 'late_tool' } },
          { principal: 'alice' },
        );
        expect(textOf(added.body.result)).toBe('registered late_tool');

        const change = await tools.stream!.next(10_000);
        expect(change.method).toBe('notifications/tools/list_changed');
        expect(change).not.toHaveProperty('id');

        // The change is real: rekog lists and runs the new tool, on both eras.
        const listed = await rpc(url(), 'tools/list', {}, { principal: 'alice' });
        const names = ((listed.body.result?.tools ?? []) as { name: string }[]).map((t) => t.name);
        expect(names).toEqual(expect.arrayContaining([...DEMO_TOOLS, 'late_tool']));
        const ran = await rpc(
          url(),
          'tools/call',
          { name: 'late_tool', arguments: {} },
          { principal: 'alice' },
        );
        expect(textOf(ran.body.result)).toBe('late_tool ran');

        // A stream that asked for no list changes gets none.
        await sleep(200);
        expect(tasksOnly.stream!.messages.map((message) => message.method)).not.toContain(
          'notifications/tools/list_changed',
        );
      } finally {
        await tools.stream?.close();
        await tasksOnly.stream?.close();
      }
    });
  });
});

describe('the rekog example apps as their scripts run them', () => {
  beforeAll(async () => {
    // The first describe built them; a run of this describe alone builds them here.
    await buildRekogApps([EXAMPLE_ENTRY, PLAIN_ENTRY]);
  }, 300_000);

  it('examples/rekog/main.ts (`npm run demo:rekog`): echo and a task tool on /mcp, on PORT', async () => {
    const example = await startServer(EXAMPLE_ENTRY);
    try {
      expect(example.output()).toContain(`MCP endpoint: http://127.0.0.1:${example.port}/mcp`);
      const { client, session, close } = await connectOfficialClient(example.url, {
        principal: 'alice',
      });
      try {
        const { tools } = await client.listTools();
        expect(tools.map((tool) => tool.name).sort()).toEqual(DEMO_TOOLS);
        const direct = await client.callTool({ name: 'echo', arguments: { text: 'hi' } });
        expect(direct.content).toEqual([{ type: 'text', text: 'hi' }]);
        const execution = await session.callTool('add_slowly', { a: 1, b: 2, delayMs: 0 });
        expect(execution.kind).toBe('task');
        const { outcome } = await execution.settle();
        expect(outcome.status).toBe('completed');
        if (outcome.status === 'completed') expect(textOf(outcome.result)).toBe('3');
      } finally {
        await close();
      }
    } finally {
      await example.stop();
    }
  });

  it('examples/rekog/plain.ts: the same echo without tasks (the bench’s baseline)', async () => {
    const plain = await startServer(PLAIN_ENTRY);
    const opened: Client[] = [];
    try {
      const v1 = v1Client();
      await v1.connect(v1Transport(plain.url, 'alice'));
      opened.push(v1);
      expect(v1.getServerCapabilities()?.tasks).toBeUndefined();
      const { tools } = await v1.request({ method: 'tools/list' }, ListToolsResultSchema);
      expect(tools.map((tool) => tool.name)).toEqual(['echo']);
      const result = await v1.callTool({ name: 'echo', arguments: { text: 'hi' } });
      expect(result.content).toEqual([{ type: 'text', text: 'hi' }]);

      const echo = await rpc(
        plain.url,
        'tools/call',
        { name: 'echo', arguments: { text: 'modern' } },
        { principal: 'alice', declareTasks: false },
      );
      expect(textOf(echo.body.result)).toBe('modern');
      const refused = await postWithHost(
        plain.port,
        'evil.example',
        legacyRequest('tools/list', {}, 'alice'),
      );
      expect(refused.status).toBe(403);
    } finally {
      for (const client of opened) await client.close();
      await plain.stop();
    }
  });
});
