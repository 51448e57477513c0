import {
  type CanActivate,
  type ExecutionContext,
  Inject,
  Injectable,
  Module,
  type OnApplicationShutdown,
  type OnModuleInit,
  UnauthorizedException,
} from '@nestjs/common';
import type { FetchLike } from '@modelcontextprotocol/client';
import { JsonRpcResponseError } from '@modelcontextprotocol/ext-tasks/client';
import * as z from 'zod/v4';
import { TaskTool, type TaskContext, TasksModule } from '../../src/index.js';
import {
  connectTasksClient,
  InputRefusedError,
  McpUnauthorizedError,
  type TaskCall,
  TaskCancelledError,
  TaskFailedError,
  type TasksClient,
  type TasksClientOptions,
  type TaskSnapshot,
} from '../../src/client/index.js';
import { ADAPTERS, type RunningApp, startApp } from '../support/app.js';
import { testContextFetch, textOf } from '../support/official-client.js';
import { eventually as pollUntil } from '../support/sse.js';
import { rejection, sleep } from '../support/helpers.js';

/** Waits until `check` returns a value (fails after 5 s). */
const eventually = <T>(check: () => T | undefined | Promise<T | undefined>): Promise<T> =>
  pollUntil(check, 5_000);

/** `Authorization: Bearer <name>` makes `<name>` the principal; the token `expired` is a 401. */
@Injectable()
class BearerGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const request = context.switchToHttp().getRequest<{
      headers: Record<string, string | string[] | undefined>;
      user?: { sub: string };
    }>();
    const header = request.headers.authorization;
    const match = typeof header === 'string' ? /^Bearer\s+(\S+)$/i.exec(header) : null;
    if (match?.[1] === 'expired') throw new UnauthorizedException();
    if (match) request.user = { sub: match[1]! };
    return true;
  }
}

/** What the tools saw, for the assertions. */
const seen = { cancelled: [] as string[] };

@Injectable()
class Tools {
  /** Polled once a minute: only a listen stream can make it finish promptly. */
  @TaskTool({ name: 'quick_slow_poll', pollIntervalMs: 60_000 })
  async quick(_input: unknown, task: TaskContext) {
    await task.progress('Starting');
    await sleep(200);
    await task.progress('Halfway');
    await sleep(200);
    return 'quick done';
  }

  /** Finishes before a listen stream can be open; polled once a minute. */
  @TaskTool({ name: 'instant', pollIntervalMs: 60_000 })
  instant() {
    return 'instant done';
  }

  @TaskTool({
    name: 'ask_name',
    pollIntervalMs: 60_000,
    input: z.object({ politely: z.boolean().optional() }),
  })
  async askName(input: { politely?: boolean }, task: TaskContext) {
    await sleep(100);
    const { name } = await task.requireInput(
      {
        name: {
          method: 'elicitation/create',
          params: {
            mode: 'form',
            message: 'What is your name?',
            requestedSchema: {
              type: 'object',
              properties: { name: { type: 'string' } },
              required: ['name'],
            },
          },
        },
      },
      { statusMessage: 'Waiting for a name' },
    );
    if (name.action !== 'accept') return `Greeting ${name.action}`;
    const given = (name.content as { name: string }).name;
    return input.politely === true ? `Good day, ${given}.` : `Hi ${given}`;
  }

  @TaskTool({ name: 'add', pollIntervalMs: 100, input: z.object({ a: z.number(), b: z.number() }) })
  async add(input: { a: number; b: number }, task: TaskContext) {
    await task.progress('Adding');
    await sleep(300);
    return { content: [{ type: 'text', text: String(input.a + input.b) }] };
  }

  @TaskTool({ name: 'wait_for_cancel', pollIntervalMs: 100 })
  async waitForCancel(_input: unknown, task: TaskContext) {
    await task.progress('Working until cancelled');
    await new Promise<never>((_, reject) =>
      task.signal.addEventListener(
        'abort',
        () => {
          seen.cancelled.push(task.taskId);
          reject(task.signal.reason);
        },
        { once: true },
      ),
    );
  }

  @TaskTool({
    name: 'fail_with',
    pollIntervalMs: 100,
    input: z.object({ code: z.number().int(), message: z.string() }),
  })
  failWith(input: { code: number; message: string }) {
    throw Object.assign(new Error(input.message), { code: input.code, data: { hint: 'data' } });
  }

  @TaskTool({ name: 'sample', pollIntervalMs: 100 })
  async sample(_input: unknown, task: TaskContext) {
    const { answer } = await task.requireInput({
      answer: {
        method: 'sampling/createMessage',
        params: {
          messages: [{ role: 'user', content: { type: 'text', text: 'Say hi' } }],
          maxTokens: 10,
        },
      },
    });
    const content = (answer as { content: { text?: string } }).content;
    return `The model said: ${content.text ?? '?'}`;
  }

  @TaskTool({ name: 'count_roots', pollIntervalMs: 100 })
  async countRoots(_input: unknown, task: TaskContext) {
    const { roots } = await task.requireInput({ roots: { method: 'roots/list' } });
    return `${(roots as { roots: unknown[] }).roots.length} roots`;
  }

  @TaskTool({ name: 'whoami', pollIntervalMs: 100 })
  whoami(_input: unknown, task: TaskContext) {
    return `principal: ${task.owner.principal ?? 'anonymous'}`;
  }
}

@Module({
  imports: [
    TasksModule.forRoot({
      serverInfo: { name: 'tasks-client-e2e', version: '1.0.0' },
      guards: [BearerGuard],
      configure: (server) => {
        server.registerTool(
          'echo',
          { inputSchema: z.object({ text: z.string() }) },
          ({ text }) => ({
            content: [{ type: 'text', text }],
          }),
        );
      },
    }),
  ],
  providers: [Tools],
})
class ServerModule {}

/**
 * Counts requests by `Mcp-Method` (on both HTTP paths), and can make some of them fail (HTTP 500:
 * no gateway's 502-504, which the client would try again).
 */
function countingFetch(
  counts: Map<string, number>,
  failing: ReadonlySet<string> = new Set(),
): FetchLike {
  return async (input, init) => {
    const method = new Headers(init?.headers).get('mcp-method') ?? '(none)';
    counts.set(method, (counts.get(method) ?? 0) + 1);
    if (failing.has(method)) {
      return new Response('{"error":"no streams here"}', {
        status: 500,
        headers: { 'content-type': 'application/json' },
      });
    }
    return testContextFetch(input, init);
  };
}

/** Collects every status a call reports (`onStatus`), in order. */
function statusesOf(call: TaskCall): TaskSnapshot[] {
  const statuses: TaskSnapshot[] = [];
  call.onStatus((task) => statuses.push(task));
  return statuses;
}

describe.each(ADAPTERS)('nestjs-mcp-tasks/client against a live app (%s)', (adapter) => {
  let app: RunningApp;
  const clients: TasksClient[] = [];

  const connect = async (options: TasksClientOptions = {}): Promise<TasksClient> => {
    const mcp = await connectTasksClient(app.url, { fetch: testContextFetch, ...options });
    clients.push(mcp);
    return mcp;
  };

  beforeAll(async () => {
    app = await startApp(ServerModule, adapter);
  });

  afterEach(async () => {
    for (const mcp of clients.splice(0)) await mcp.close();
  });

  afterAll(async () => {
    await app.close();
  });

  it('a task tool that asks for input: onInput answers it, and the result arrives', async () => {
    const questions: unknown[] = [];
    const mcp = await connect({
      headers: { Authorization: 'Bearer alice' },
      onInput: {
        elicitation: async (params, context) => {
          questions.push({ params, taskId: context.taskId, inputKey: context.inputKey });
          return { action: 'accept', content: { name: 'Ada' } };
        },
      },
    });
    const call = await mcp.callTool('ask_name', { politely: true });
    expect(call.isTask).toBe(true);
    expect(typeof call.taskId).toBe('string');
    const statuses = statusesOf(call);

    const result = await call.result();

    expect(result.content).toEqual([{ type: 'text', text: 'Good day, Ada.' }]);
    expect(result.isError).not.toBe(true);
    expect(questions).toEqual([
      {
        params: expect.objectContaining({ message: 'What is your name?', mode: 'form' }),
        taskId: call.taskId,
        inputKey: 'name',
      },
    ]);
    expect(statuses.map((task) => task.status)).toEqual([
      'working',
      'input_required',
      'working',
      'completed',
    ]);
    expect(statuses[1]).toMatchObject({ statusMessage: 'Waiting for a name', taskId: call.taskId });
    expect(statuses.at(-1)!.raw.result).toMatchObject({ content: result.content });
    expect(call.status?.status).toBe('completed');
    expect(await call.outcome()).toEqual({ status: 'completed', result });
  });

  it('follows a task over a listen stream: a tool polled once a minute finishes promptly', async () => {
    const counts = new Map<string, number>();
    const mcp = await connect({
      headers: { Authorization: 'Bearer alice' },
      fetch: countingFetch(counts),
    });
    const began = Date.now();
    const call = await mcp.callTool('quick_slow_poll');
    const messages: (string | undefined)[] = [];
    for await (const task of call) messages.push(task.statusMessage);
    const result = await call.result();
    const took = Date.now() - began;

    expect(textOf(result)).toBe('quick done');
    expect(took).toBeLessThan(5_000);
    expect(messages).toContain('Halfway');
    expect(counts.get('subscriptions/listen')).toBe(1);
    // Only the catch-up read after the acknowledgement: every change came over the stream.
    expect(counts.get('tasks/get') ?? 0).toBeLessThanOrEqual(1);
  });

  it('a task that ends before its stream is open is caught up by one tasks/get', async () => {
    const counts = new Map<string, number>();
    const mcp = await connect({
      headers: { Authorization: 'Bearer alice' },
      fetch: countingFetch(counts),
    });
    const began = Date.now();
    const result = await (await mcp.callTool('instant')).result();

    expect(textOf(result)).toBe('instant done');
    expect(Date.now() - began).toBeLessThan(5_000);
    expect(counts.get('subscriptions/listen')).toBe(1);
    expect(counts.get('tasks/get')).toBe(1);
  });

  it('input requests arrive over the listen stream too (pollIntervalMs 60 s)', async () => {
    const counts = new Map<string, number>();
    const mcp = await connect({
      headers: { Authorization: 'Bearer alice' },
      fetch: countingFetch(counts),
      onInput: { elicitation: () => ({ action: 'accept', content: { name: 'Grace' } }) },
    });
    const began = Date.now();
    const result = await (await mcp.callTool('ask_name')).result();

    expect(textOf(result)).toBe('Hi Grace');
    expect(Date.now() - began).toBeLessThan(5_000);
    expect(counts.get('tasks/update')).toBe(1);
    expect(counts.get('tasks/get') ?? 0).toBeLessThanOrEqual(1);
  });

  it('falls back to polling when the listen request fails', async () => {
    const counts = new Map<string, number>();
    const errors: Error[] = [];
    const mcp = await connect({
      headers: { Authorization: 'Bearer alice' },
      fetch: countingFetch(counts, new Set(['subscriptions/listen'])),
      onError: (error) => errors.push(error),
    });
    const call = await mcp.callTool('add', { a: 2, b: 3 });
    const statuses = statusesOf(call);
    const result = await call.result();

    expect(textOf(result)).toBe('5');
    expect(counts.get('subscriptions/listen')).toBe(1);
    expect(counts.get('tasks/get')).toBeGreaterThanOrEqual(2);
    expect(statuses.at(-1)?.status).toBe('completed');
    expect(errors).toEqual([]);
  });

  it('listen: false polls only', async () => {
    const counts = new Map<string, number>();
    const mcp = await connect({
      headers: { Authorization: 'Bearer alice' },
      fetch: countingFetch(counts),
      listen: false,
    });
    const result = await (await mcp.callTool('add', { a: 1, b: 1 })).result();
    expect(textOf(result)).toBe('2');
    expect(counts.get('subscriptions/listen')).toBeUndefined();
    expect(counts.get('tasks/get')).toBeGreaterThanOrEqual(2);
  });

  it('cancel(): the task ends cancelled on the server and result() throws TaskCancelledError', async () => {
    const mcp = await connect({ headers: { Authorization: 'Bearer alice' } });
    const call = await mcp.callTool('wait_for_cancel');
    await eventually(() =>
      call.status?.statusMessage === 'Working until cancelled' ? true : undefined,
    );

    await call.cancel();
    const error = await rejection(call.result());

    expect(error).toBeInstanceOf(TaskCancelledError);
    expect(await call.outcome()).toMatchObject({ status: 'cancelled' });
    const onServer = await eventually(async () => {
      const task = await call.snapshot();
      return task.status === 'cancelled' ? task : undefined;
    });
    expect(onServer.taskId).toBe(call.taskId);
    await eventually(() => (seen.cancelled.includes(call.taskId!) ? true : undefined));
  });

  it('signal: cancels the task, as an aborted SDK request is; result() rejects at once with the reason', async () => {
    const mcp = await connect({ headers: { Authorization: 'Bearer alice' } });
    const controller = new AbortController();
    const call = await mcp.callTool('wait_for_cancel', {}, { signal: controller.signal });
    await eventually(() => (call.status?.status === 'working' ? true : undefined));

    const reason = new Error('no longer needed');
    controller.abort(reason);

    expect(await rejection(call.result())).toBe(reason);
    const outcome = await call.outcome();
    expect(outcome.status).toBe('cancelled');
    expect((await mcp.getTask(call.taskId!)).status).toBe('cancelled');
    await eventually(() => (seen.cancelled.includes(call.taskId!) ? true : undefined));
  });

  it('a failing tool: result() throws TaskFailedError with the JSON-RPC code; outcome() does not throw', async () => {
    const mcp = await connect({ headers: { Authorization: 'Bearer alice' } });
    const call = await mcp.callTool('fail_with', { code: -32042, message: 'Nope' });

    const error = await rejection(call.result());

    expect(error).toBeInstanceOf(TaskFailedError);
    expect(error).toMatchObject({ code: -32042, message: 'Nope', data: { hint: 'data' } });
    const outcome = await call.outcome();
    expect(outcome.status).toBe('failed');
    if (outcome.status === 'failed') expect(outcome.error.code).toBe(-32042);
    expect(call.status).toMatchObject({ status: 'failed' });
  });

  it('a plain tool answers at once: no task id, no status, the result', async () => {
    const mcp = await connect({ headers: { Authorization: 'Bearer alice' } });
    const call = await mcp.callTool('echo', { text: 'hi' });

    expect(call.taskId).toBeUndefined();
    expect(call.isTask).toBe(false);
    expect((await call.result()).content).toEqual([{ type: 'text', text: 'hi' }]);
    expect(call.status).toBeUndefined();
    const iterated: TaskSnapshot[] = [];
    for await (const task of call) iterated.push(task);
    expect(iterated).toEqual([]);
    await call.cancel(); // nothing to cancel; does not throw
  });

  it('exposes the SDK client and listTools()', async () => {
    const mcp = await connect();
    const names = (await mcp.listTools()).map((tool) => tool.name).sort();
    expect(names).toEqual([
      'add',
      'ask_name',
      'count_roots',
      'echo',
      'fail_with',
      'instant',
      'quick_slow_poll',
      'sample',
      'wait_for_cancel',
      'whoami',
    ]);
    expect(mcp.client.getNegotiatedProtocolVersion()).toBe('2026-07-28');
    expect(mcp.protocolVersion).toBe('2026-07-28');
    const direct = await mcp.client.callTool({ name: 'echo', arguments: { text: 'plain' } });
    expect(direct.content).toEqual([{ type: 'text', text: 'plain' }]);
  });

  it('an elicitation without a handler is declined; roots without a handler are empty', async () => {
    const mcp = await connect({ headers: { Authorization: 'Bearer alice' } });
    expect(textOf(await (await mcp.callTool('ask_name')).result())).toBe('Greeting decline');
    expect(textOf(await (await mcp.callTool('count_roots')).result())).toBe('0 roots');
  });

  it('sampling and roots are answered by their handlers', async () => {
    const mcp = await connect({
      headers: { Authorization: 'Bearer alice' },
      onInput: {
        sampling: (params) => ({
          role: 'assistant',
          model: 'test-model',
          content: { type: 'text', text: `hi (max ${String(params.maxTokens)})` },
        }),
        roots: () => ({ roots: [{ uri: 'file:///a' }, { uri: 'file:///b' }] }),
      },
    });
    expect(textOf(await (await mcp.callTool('sample')).result())).toBe(
      'The model said: hi (max 10)',
    );
    expect(textOf(await (await mcp.callTool('count_roots')).result())).toBe('2 roots');
  });

  it('sampling without a handler cancels the task: InputRefusedError, not a hang', async () => {
    const errors: Error[] = [];
    const mcp = await connect({
      headers: { Authorization: 'Bearer alice' },
      onError: (error) => errors.push(error),
    });
    const call = await mcp.callTool('sample');

    const error = await rejection(call.result());

    expect(error).toBeInstanceOf(InputRefusedError);
    expect(error).toBeInstanceOf(TaskCancelledError);
    expect((error as Error).message).toMatch(/sampling input.*no onInput\.sampling handler/);
    expect(error).toMatchObject({ kind: 'sampling', taskId: call.taskId });
    const onServer = await eventually(async () => {
      const task = await call.snapshot();
      return task.status === 'cancelled' ? task : undefined;
    });
    expect(onServer.status).toBe('cancelled');
    expect(errors.some((reported) => reported instanceof InputRefusedError)).toBe(true);
  });

  it('headers: the Bearer token is the principal; another principal cannot read the task', async () => {
    const alice = await connect({ headers: { Authorization: 'Bearer alice' } });
    const bob = await connect({ headers: { Authorization: 'Bearer bob' } });
    expect(textOf(await (await alice.callTool('whoami')).result())).toBe('principal: alice');

    const call = await alice.callTool('wait_for_cancel');
    const taskId = call.taskId!;
    expect((await alice.getTask(taskId)).taskId).toBe(taskId);

    const read = await rejection(bob.getTask(taskId));
    expect(read).toBeInstanceOf(JsonRpcResponseError);
    expect(read).toMatchObject({ code: -32602, message: 'Task not found' });
    const cancel = await rejection(bob.cancelTask(taskId));
    expect(cancel).toMatchObject({ code: -32602 });
    expect((await alice.getTask(taskId)).status).toBe('working');

    await alice.cancelTask(taskId);
    expect(await call.outcome()).toMatchObject({ status: 'cancelled' });
  });

  it('per-call headers override the connection headers', async () => {
    const mcp = await connect({ headers: { Authorization: 'Bearer alice' } });
    const call = await mcp.callTool('whoami', {}, { headers: { Authorization: 'Bearer dora' } });
    expect(textOf(await call.result())).toBe('principal: dora');
  });

  it('authProvider: token() on every request of both paths; 401 → onUnauthorized once, retried', async () => {
    let token = 'expired';
    let asked = 0;
    let unauthorized = 0;
    const mcp = await connect({
      headers: { Authorization: 'Bearer ignored' },
      authProvider: {
        token: async () => {
          asked += 1;
          return token;
        },
        onUnauthorized: async () => {
          unauthorized += 1;
          token = 'carol';
        },
      },
    });
    // The SDK transport met the 401 while connecting.
    expect(unauthorized).toBe(1);
    expect(textOf(await (await mcp.callTool('whoami')).result())).toBe('principal: carol');

    // The token expires: the raw path (tools/call, tasks/get) meets the 401 and retries once.
    token = 'expired';
    const askedBefore = asked;
    const call = await mcp.callTool('whoami', {}, {});
    expect(unauthorized).toBe(2);
    expect(textOf(await call.result())).toBe('principal: carol');
    expect(asked).toBeGreaterThan(askedBefore + 1);

    // A token alone works; without onUnauthorized, a 401 is an error naming the URL.
    const plain = await connect({ authProvider: { token: async () => 'dave' } });
    expect(textOf(await (await plain.callTool('whoami')).result())).toBe('principal: dave');
    const refused = await rejection(
      connectTasksClient(app.url, {
        fetch: testContextFetch,
        authProvider: { token: async () => 'expired' },
      }),
    );
    expect(refused).toBeInstanceOf(McpUnauthorizedError);
    expect((refused as Error).message).toContain(`POST ${app.url} answered 401`);
  });
});

// ----- a Nest app that calls task tools on another MCP server ----------------------------------

const REMOTE_URL = Symbol('REMOTE_URL');

/** The plain client entry in a provider: connect on init, close on shutdown. */
@Injectable()
class RemoteMath implements OnModuleInit, OnApplicationShutdown {
  mcp: TasksClient | undefined;
  closed = false;

  constructor(@Inject(REMOTE_URL) private readonly url: string) {}

  async onModuleInit(): Promise<void> {
    // No `fetch` option: the entry copes with Jest's VM context on its own.
    this.mcp = await connectTasksClient(this.url, { headers: { Authorization: 'Bearer relay' } });
  }

  async onApplicationShutdown(): Promise<void> {
    await this.mcp?.close();
    this.closed = true;
  }

  /** Adds on the remote server, reporting each of its status messages. */
  async add(a: number, b: number, onProgress: (message: string) => Promise<void>) {
    const call = await this.mcp!.callTool('add', { a, b });
    call.onStatus((task) => {
      if (task.statusMessage !== undefined) void onProgress(`remote: ${task.statusMessage}`);
    });
    return call.result();
  }
}

@Injectable()
class RelayTools {
  constructor(private readonly remote: RemoteMath) {}

  @TaskTool({
    name: 'relay_add',
    pollIntervalMs: 100,
    input: z.object({ a: z.number(), b: z.number() }),
  })
  async relayAdd(input: { a: number; b: number }, task: TaskContext) {
    const result = await this.remote.add(input.a, input.b, (message) => task.progress(message));
    return { content: [{ type: 'text', text: `remote sum: ${textOf(result)}` }] };
  }
}

describe('a Nest app calling task tools on another MCP server', () => {
  it('a provider connects on init, relays a task tool, and closes on shutdown', async () => {
    const remote = await startApp(ServerModule, 'express');
    @Module({
      imports: [TasksModule.forRoot({ serverInfo: { name: 'relay', version: '1.0.0' } })],
      providers: [{ provide: REMOTE_URL, useValue: remote.url }, RemoteMath, RelayTools],
    })
    class RelayModule {}
    const relay = await startApp(RelayModule, 'express');
    let mcp: TasksClient | undefined;
    try {
      const math = relay.app.get(RemoteMath);
      expect(math.mcp).toBeDefined();

      mcp = await connectTasksClient(relay.url, {
        headers: { Authorization: 'Bearer alice' },
        fetch: testContextFetch,
      });
      const call = await mcp.callTool('relay_add', { a: 20, b: 22 });
      const messages = statusesOf(call);
      const result = await call.result();

      expect(textOf(result)).toBe('remote sum: 42');
      expect(messages.map((task) => task.statusMessage)).toContain('remote: Adding');

      await relay.close();
      expect(math.closed).toBe(true);
      await expect(math.mcp!.callTool('add', { a: 1, b: 2 })).rejects.toThrow();
    } finally {
      await mcp?.close();
      await relay.close().catch(() => undefined);
      await remote.close();
    }
  });
});
