import {
  createServer,
  type IncomingMessage,
  request as httpRequest,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo } from 'node:net';
import { type INestApplication, Injectable, Module, type Type } from '@nestjs/common';
import { ExpressAdapter } from '@nestjs/platform-express';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { Test } from '@nestjs/testing';
import type { FetchLike } from '@modelcontextprotocol/client';
import { CallToolResultSchema as V1CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import * as z from 'zod/v4';
import { TaskTool, type TaskContext, TasksModule, TasksService } from '../../src/index.js';
import { InMemoryTaskStore } from '../../src/store/in-memory.task-store.js';
import type { TaskStore } from '../../src/store/task-store.js';
import {
  type TaskCall,
  connectTasksClient,
  JsonRpcResponseError,
  TaskFailedError,
  TaskServerUnreachableError,
  type TasksClient,
  type TasksClientOptions,
} from '../../src/client/index.js';
import { type AdapterName, ADAPTERS } from '../support/app.js';
import { testContextFetch, textOf } from '../support/official-client.js';
import { v1Client, v1Transport } from '../support/v1-client.js';
import { eventually } from '../support/sse.js';
import { rejection, sleep, textResult } from '../support/helpers.js';

/**
 * The client entry across a server that goes away: a restart (two apps built one after the other
 * on one port, over one task store), a server that never comes back, and a gateway answering 502,
 * 503 or 504. Real HTTP on loopback; the gateway is a small forwarding proxy written here. Last,
 * what the v1 SDK client does across a restart (docs/clients.md says so).
 */

/** What the tools saw, for the assertions. */
const seen = { counted: 0 };

@Injectable()
class Tools {
  /** Runs until the app shuts down; finished by TasksService. Polled once a minute. */
  @TaskTool({ name: 'hold', pollIntervalMs: 60_000 })
  async hold(_input: unknown, task: TaskContext) {
    await task.progress('Holding');
    await new Promise((resolve) => task.signal.addEventListener('abort', resolve, { once: true }));
    return 'not reached';
  }

  /** The same, polled every 200 ms. */
  @TaskTool({ name: 'hold_polled', pollIntervalMs: 200 })
  async holdPolled(_input: unknown, task: TaskContext) {
    return this.hold(_input, task);
  }

  @TaskTool({ name: 'counted', pollIntervalMs: 100 })
  counted() {
    seen.counted += 1;
    return `counted ${seen.counted}`;
  }

  @TaskTool({
    name: 'fail_with',
    pollIntervalMs: 100,
    input: z.object({ code: z.number().int(), message: z.string() }),
  })
  failWith(input: { code: number; message: string }) {
    throw Object.assign(new Error(input.message), { code: input.code });
  }
}

/**
 * A module over `store` that leaves running tasks at shutdown, at once (no drain), for the next
 * instance.
 */
function restartModule(store: TaskStore): Type<unknown> {
  @Module({
    imports: [
      TasksModule.forRoot({ store, runningTasksOnShutdown: 'leave', shutdown: { drainMs: 0 } }),
    ],
    providers: [Tools],
  })
  class RestartModule {}
  return RestartModule;
}

interface Instance {
  app: INestApplication;
  url: string;
  port: number;
  service: TasksService;
}

/** Boots the module over `store` on loopback, on `port` (0: a free one). */
async function boot(store: TaskStore, adapter: AdapterName, port = 0): Promise<Instance> {
  const moduleRef = await Test.createTestingModule({ imports: [restartModule(store)] }).compile();
  const app = moduleRef.createNestApplication(
    adapter === 'express' ? new ExpressAdapter() : new FastifyAdapter(),
    { forceCloseConnections: true, logger: false },
  );
  await app.listen(port, '127.0.0.1');
  const bound = (app.getHttpServer() as Server).address() as AddressInfo;
  return {
    app,
    url: `http://127.0.0.1:${bound.port}/mcp`,
    port: bound.port,
    service: app.get(TasksService),
  };
}

/** Every request the client sent, by `Mcp-Method`: when, and how it went. */
class Wire {
  readonly tries: { method: string; at: number; status?: number; failed?: boolean }[] = [];

  readonly fetch: FetchLike = async (input, init) => {
    const method = new Headers(init?.headers).get('mcp-method') ?? '(none)';
    const entry: Wire['tries'][number] = { method, at: Date.now() };
    this.tries.push(entry);
    try {
      const response = await testContextFetch(input, init);
      entry.status = response.status;
      return response;
    } catch (error) {
      entry.failed = true;
      throw error;
    }
  };

  /** Tries of `method` since `since`, that got `status` (or, with `'failed'`, no answer). */
  count(method: string, outcome: number | 'failed' | 'any' = 'any', since = 0): number {
    return this.tries.filter(
      (entry) =>
        entry.method === method &&
        entry.at >= since &&
        (outcome === 'any' ||
          (outcome === 'failed' ? entry.failed === true : entry.status === outcome)),
    ).length;
  }
}

/** Resolves once the call reports `message` as its status message. */
const holding = (call: TaskCall, message = 'Holding'): Promise<true> =>
  eventually(() => (call.status?.statusMessage === message ? true : undefined), 5_000);

/** Resolves with how the promise settled and when (ms since `from`). */
async function timed<T>(
  promise: Promise<T>,
  from: number,
): Promise<{ value?: T; error?: unknown; at: number }> {
  try {
    const value = await promise;
    return { value, at: Date.now() - from };
  } catch (error) {
    return { error, at: Date.now() - from };
  }
}

describe.each(ADAPTERS)('the client across a 5 s server restart (%s)', (adapter) => {
  const clients: TasksClient[] = [];
  const apps: INestApplication[] = [];

  afterEach(async () => {
    for (const mcp of clients.splice(0)) await mcp.close();
    for (const app of apps.splice(0)) await app.close().catch(() => undefined);
  });

  it('listen streams reopen and read the task once; polling retries tasks/get; results are the real ones', async () => {
    const store = new InMemoryTaskStore();
    const a = await boot(store, adapter);
    apps.push(a.app);
    const streams = new Wire();
    const polls = new Wire();
    const errors: Error[] = [];
    const connect = async (wire: Wire, options: TasksClientOptions = {}) => {
      const mcp = await connectTasksClient(a.url, {
        fetch: wire.fetch,
        onError: (error) => errors.push(error),
        ...options,
      });
      clients.push(mcp);
      return mcp;
    };
    const listening = await connect(streams);
    const polling = await connect(polls, { listen: false });

    // Polled once a minute: only a reopened stream (and the read after it) can tell their end.
    const early = await listening.callTool('hold');
    const late = await listening.callTool('hold');
    const polled = await polling.callTool('hold_polled');
    await Promise.all([holding(early), holding(late), holding(polled)]);
    expect(streams.count('subscriptions/listen', 200)).toBe(2);

    await a.app.close();
    await sleep(5_000);
    const b = await boot(store, adapter, a.port);
    apps.push(b.app);
    const up = Date.now();
    // Finished before any stream is back: the read after reopening tells it.
    await b.service.complete(early.taskId!, textResult('early, finished on B'));
    await b.service.complete(polled.taskId!, textResult('polled, finished on B'));
    const earlyEnd = timed(early.result(), up);
    const polledEnd = timed(polled.result(), up);

    // Both streams are back, each caught up by one tasks/get: the late task's end comes over one.
    await eventually(() => (streams.count('tasks/get', 200, up) >= 2 ? true : undefined), 10_000);
    await sleep(100);
    const reads = streams.count('tasks/get');
    const finished = Date.now();
    await b.service.complete(late.taskId!, textResult('late, finished on B'));
    const lateEnd = await timed(late.result(), finished);

    const [earlyDone, polledDone] = await Promise.all([earlyEnd, polledEnd]);
    expect(earlyDone.error).toBeUndefined();
    expect(textOf(earlyDone.value)).toBe('early, finished on B');
    expect(polledDone.error).toBeUndefined();
    expect(textOf(polledDone.value)).toBe('polled, finished on B');
    expect(lateEnd.error).toBeUndefined();
    expect(textOf(lateEnd.value)).toBe('late, finished on B');
    // Backoff delays stop growing at maxDelayMs (5 s): each wait resumed within one of them.
    expect(earlyDone.at).toBeLessThan(7_000);
    expect(polledDone.at).toBeLessThan(7_000);
    expect(lateEnd.at).toBeLessThan(2_000);
    expect(streams.count('tasks/get')).toBe(reads);

    for (const call of [early, late, polled]) {
      expect((await call.outcome()).status).toBe('completed');
      expect(call.status?.status).toBe('completed');
    }
    // While A was down the streams were reopened and tasks/get was retried, refused each time.
    expect(streams.count('subscriptions/listen', 'failed')).toBeGreaterThanOrEqual(2);
    expect(streams.count('subscriptions/listen', 200, up)).toBeGreaterThanOrEqual(2);
    expect(polls.count('tasks/get', 'failed')).toBeGreaterThanOrEqual(3);
    expect(polls.count('subscriptions/listen')).toBe(0);
    expect(errors).toEqual([]);
  }, 30_000);
});

describe('the client when the server stays away', () => {
  const clients: TasksClient[] = [];
  const closers: (() => Promise<unknown>)[] = [];

  afterEach(async () => {
    for (const mcp of clients.splice(0)) await mcp.close();
    for (const close of closers.splice(0)) await close().catch(() => undefined);
  });

  const connect = async (url: string, options: TasksClientOptions = {}) => {
    const mcp = await connectTasksClient(url, { fetch: testContextFetch, ...options });
    clients.push(mcp);
    return mcp;
  };

  const SHORT = { windowMs: 1_500, initialDelayMs: 100, maxDelayMs: 400 };

  it('past retry.windowMs the wait rejects with TaskServerUnreachableError naming the URL, not TaskFailedError', async () => {
    const a = await boot(new InMemoryTaskStore(), 'express');
    closers.push(() => a.app.close());
    const mcp = await connect(a.url, { retry: SHORT });
    const call = await mcp.callTool('hold_polled');
    await holding(call);

    await a.app.close();
    const down = Date.now();
    const ended = await timed(call.result(), down);

    const error = ended.error as TaskServerUnreachableError;
    expect(error).toBeInstanceOf(TaskServerUnreachableError);
    expect(error).not.toBeInstanceOf(TaskFailedError);
    expect(error).toMatchObject({
      name: 'TaskServerUnreachableError',
      url: a.url,
      method: 'tasks/get',
      taskId: call.taskId,
      errorCode: 'ECONNREFUSED',
      status: undefined,
    });
    expect(error.message).toMatch(
      new RegExp(
        `^tasks/get: the MCP server at ${a.url.replace(/\./g, '\\.')} was unreachable for 1\\.\\d s \\(\\d+ attempts\\); last: .*ECONNREFUSED`,
      ),
    );
    expect(error.attempts).toBeGreaterThanOrEqual(5);
    expect(error.waitedMs).toBeGreaterThanOrEqual(1_500);
    // The window, after at most one poll interval (200 ms) and a little slack.
    expect(ended.at).toBeGreaterThanOrEqual(1_500);
    expect(ended.at).toBeLessThan(2_700);
    expect(await call.outcome()).toEqual({ status: 'unreachable', error });
    expect(call.status?.status).toBe('working');

    const read = await timed(mcp.getTask(call.taskId!), Date.now());
    expect(read.error).toBeInstanceOf(TaskServerUnreachableError);
    expect(read.error).toMatchObject({ method: 'tasks/get', url: a.url });
    expect(read.at).toBeGreaterThanOrEqual(1_500);

    // A connection refused sent nothing: tools/call is tried through the window too.
    const calling = await timed(mcp.callTool('counted'), Date.now());
    expect(calling.error).toBeInstanceOf(TaskServerUnreachableError);
    expect(calling.error).toMatchObject({ method: 'tools/call', errorCode: 'ECONNREFUSED' });
    expect(calling.at).toBeGreaterThanOrEqual(1_500);
  });

  it('retry: false gives up at the first refused connection', async () => {
    const a = await boot(new InMemoryTaskStore(), 'express');
    closers.push(() => a.app.close());
    const mcp = await connect(a.url, { retry: false });
    const call = await mcp.callTool('hold_polled');
    await holding(call);

    await a.app.close();
    const ended = await timed(call.result(), Date.now());

    expect(ended.error).toBeInstanceOf(TaskServerUnreachableError);
    expect(ended.error).toMatchObject({ attempts: 1, waitedMs: 0, errorCode: 'ECONNREFUSED' });
    expect((ended.error as Error).message).toMatch(/was unreachable \(1 attempt\); last: /);
    expect(ended.at).toBeLessThan(1_000);
  });

  it('a task that fails still rejects with TaskFailedError and its JSON-RPC code', async () => {
    const a = await boot(new InMemoryTaskStore(), 'express');
    closers.push(() => a.app.close());
    const mcp = await connect(a.url);
    const call = await mcp.callTool('fail_with', { code: -32042, message: 'Nope' });

    const error = await rejection(call.result());

    expect(error).toBeInstanceOf(TaskFailedError);
    expect(error).not.toBeInstanceOf(TaskServerUnreachableError);
    expect(error).toMatchObject({ code: -32042, message: 'Nope' });
    expect((await call.outcome()).status).toBe('failed');
  });

  it('a server back without the task (its store was lost): the JSON-RPC error, not TaskFailedError', async () => {
    const a = await boot(new InMemoryTaskStore(), 'express');
    closers.push(() => a.app.close());
    const mcp = await connect(a.url, { listen: false });
    const call = await mcp.callTool('hold_polled');
    await holding(call);

    await a.app.close();
    const b = await boot(new InMemoryTaskStore(), 'express', a.port);
    closers.push(() => b.app.close());
    const error = await rejection(call.result());

    expect(error).toBeInstanceOf(JsonRpcResponseError);
    expect(error).not.toBeInstanceOf(TaskFailedError);
    expect(error).toMatchObject({ code: -32602, message: 'Task not found' });
    expect(await call.outcome()).toEqual({ status: 'error', error });
    expect(call.status?.status).toBe('working');
  });

  it('tools/call refused while the server restarts is sent once it is back, and runs once', async () => {
    const store = new InMemoryTaskStore();
    const a = await boot(store, 'express');
    closers.push(() => a.app.close());
    const mcp = await connect(a.url);
    // A client at work: its session has read the tools (it does so once, when it connects).
    await (await mcp.callTool('counted')).result();
    await a.app.close();
    const before = seen.counted;

    const began = Date.now();
    const calling = mcp.callTool('counted');
    await sleep(1_000);
    const b = await boot(store, 'express', a.port);
    closers.push(() => b.app.close());
    const call = await calling;

    expect(Date.now() - began).toBeGreaterThanOrEqual(1_000);
    expect(textOf(await call.result())).toBe(`counted ${before + 1}`);
    expect(seen.counted).toBe(before + 1);
  });

  it('rejects a bad retry option before connecting, naming the key', async () => {
    await expect(
      connectTasksClient('http://127.0.0.1:9/mcp', { retry: { windowMs: -1 } }),
    ).rejects.toThrow('retry.windowMs must be a finite number >= 0, got -1');
    await expect(
      connectTasksClient('http://127.0.0.1:9/mcp', {
        retry: { initialDelayMs: 2_000, maxDelayMs: 1_000 },
      }),
    ).rejects.toThrow('retry.initialDelayMs (2000) must not exceed retry.maxDelayMs (1000)');
  });
});

/**
 * A gateway in front of the app: forwards every request (streams included) until told to answer
 * a status itself, which also drops the streams it was forwarding; counts what it answered.
 */
class Gateway {
  private server: Server | undefined;
  private readonly forwarding = new Set<ServerResponse>();
  /** The status answered in place of the app, while set. */
  private answering: number | undefined;
  /** A method whose request is forwarded, then the client's connection dropped unanswered. */
  dropAfterForwarding: string | undefined;
  /** What the gateway did, by `Mcp-Method`. */
  readonly log: { method: string; answered?: number; forwarded?: boolean }[] = [];
  url = '';

  constructor(private readonly upstream: URL) {}

  async start(): Promise<this> {
    this.server = createServer((req, res) => this.handle(req, res));
    await new Promise<void>((done) => this.server!.listen(0, '127.0.0.1', done));
    const { port } = this.server.address() as AddressInfo;
    this.url = `http://127.0.0.1:${port}${this.upstream.pathname}`;
    return this;
  }

  /** Answers `status` from now on, and drops the streams it forwards. */
  outage(status: number): void {
    this.answering = status;
    for (const res of this.forwarding) res.destroy();
  }

  restore(): void {
    this.answering = undefined;
  }

  count(method: string, what: number | 'forwarded'): number {
    return this.log.filter(
      (entry) =>
        entry.method === method &&
        (what === 'forwarded' ? entry.forwarded === true : entry.answered === what),
    ).length;
  }

  close(): Promise<void> {
    for (const res of this.forwarding) res.destroy();
    return new Promise((done) => (this.server ? this.server.close(() => done()) : done()));
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const header = req.headers['mcp-method'];
    const method = typeof header === 'string' ? header : '(none)';
    if (this.answering !== undefined) {
      this.log.push({ method, answered: this.answering });
      req.resume();
      res.writeHead(this.answering, { 'content-type': 'text/html' });
      res.end(`<h1>${this.answering}</h1>`);
      return;
    }
    this.log.push({ method, forwarded: true });
    const drop = this.dropAfterForwarding === method;
    const upstream = httpRequest(
      {
        host: this.upstream.hostname,
        port: this.upstream.port,
        path: req.url,
        method: req.method,
        headers: req.headers,
      },
      (answer) => {
        if (drop) {
          answer.resume();
          req.socket.destroy();
          return;
        }
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    upstream.on('error', () => res.destroy());
    this.forwarding.add(res);
    res.on('close', () => {
      this.forwarding.delete(res);
      upstream.destroy();
    });
    req.pipe(upstream);
  }
}

describe('the client behind a gateway that answers 502, 503 or 504', () => {
  const clients: TasksClient[] = [];
  const closers: (() => Promise<unknown>)[] = [];
  let app: Instance;
  let gateway: Gateway;

  beforeEach(async () => {
    app = await boot(new InMemoryTaskStore(), 'express');
    gateway = await new Gateway(new URL(app.url)).start();
    closers.push(
      () => gateway.close(),
      () => app.app.close(),
    );
  });

  afterEach(async () => {
    for (const mcp of clients.splice(0)) await mcp.close();
    for (const close of closers.splice(0)) await close().catch(() => undefined);
  });

  const connect = async (options: TasksClientOptions = {}) => {
    const mcp = await connectTasksClient(gateway.url, { fetch: testContextFetch, ...options });
    clients.push(mcp);
    return mcp;
  };

  it('503s for 1.5 s: tasks/get and the listen stream are retried, and the result arrives', async () => {
    const mcp = await connect({ retry: { initialDelayMs: 100, maxDelayMs: 400 } });
    const call = await mcp.callTool('hold_polled');
    await holding(call);
    await eventually(() => (gateway.count('subscriptions/listen', 'forwarded') ? true : undefined));

    gateway.outage(503);
    await sleep(1_000);
    await app.service.complete(call.taskId!, textResult('done behind the gateway'));
    await sleep(500);
    gateway.restore();
    const restored = Date.now();
    const ended = await timed(call.result(), restored);

    expect(ended.error).toBeUndefined();
    expect(textOf(ended.value)).toBe('done behind the gateway');
    expect(ended.at).toBeLessThan(1_500);
    expect(gateway.count('tasks/get', 503)).toBeGreaterThanOrEqual(2);
    expect(gateway.count('subscriptions/listen', 503)).toBeGreaterThanOrEqual(1);
  });

  it.each([502, 504])(
    'a gateway that keeps answering %d: TaskServerUnreachableError with that status',
    async (status) => {
      const mcp = await connect({ retry: { windowMs: 600, initialDelayMs: 50, maxDelayMs: 200 } });
      const call = await mcp.callTool('hold_polled');
      await holding(call);

      gateway.outage(status);
      const error = await rejection(call.result());

      expect(error).toBeInstanceOf(TaskServerUnreachableError);
      expect(error).toMatchObject({ url: gateway.url, status, errorCode: undefined });
      expect((error as Error).message).toContain(
        `the MCP server at ${gateway.url} was unreachable`,
      );
      expect((error as Error).message).toMatch(new RegExp(`; last: HTTP ${status}$`));
      expect(gateway.count('tasks/get', status)).toBeGreaterThanOrEqual(3);
    },
  );

  it('tools/call is never sent twice: a dropped connection or a 503 rejects at once', async () => {
    const mcp = await connect();
    const before = seen.counted;

    gateway.dropAfterForwarding = 'tools/call';
    const dropped = await timed(mcp.callTool('counted'), Date.now());
    gateway.dropAfterForwarding = undefined;
    expect(dropped.error).not.toBeInstanceOf(TaskServerUnreachableError);
    expect((dropped.error as Error).message).toBe(
      `tools/call: the request to ${gateway.url} failed`,
    );
    expect(dropped.at).toBeLessThan(1_000);

    gateway.outage(503);
    const refused = await timed(mcp.callTool('counted'), Date.now());
    gateway.restore();
    expect(refused.error).not.toBeInstanceOf(TaskServerUnreachableError);
    expect((refused.error as Error).message).toMatch(/HTTP 503/);
    expect(refused.at).toBeLessThan(1_000);

    await sleep(500);
    expect(gateway.count('tools/call', 'forwarded')).toBe(1);
    expect(gateway.count('tools/call', 503)).toBe(1);
    // The dropped call reached the app: its task was made and ran, once.
    expect(seen.counted).toBe(before + 1);
  });
});

describe('the v1 SDK client (1.32, 2025-11-25) across a restart, as docs/clients.md tells', () => {
  it('a failed tasks/get ends callToolStream, a waiting tasks/result times out; by id it resumes', async () => {
    const store = new InMemoryTaskStore();
    const a = await boot(store, 'express');
    const client = v1Client();
    client.onerror = () => undefined; // the transport reports each failed request here too
    let b: Instance | undefined;
    try {
      // What the standalone GET stream got: the transport's reconnectionOptions apply to it.
      const gets: number[] = [];
      const recording: typeof fetch = async (input, init) => {
        const response = await fetch(input, init);
        if (init?.method === 'GET') gets.push(response.status);
        return response;
      };
      await client.connect(v1Transport(a.url, 'alice', recording));
      const messages: {
        type: string;
        status?: string;
        error?: { code: number; message: string };
      }[] = [];
      let taskId = '';
      const streaming = (async () => {
        for await (const message of client.experimental.tasks.callToolStream(
          { name: 'hold_polled', arguments: {} },
          V1CallToolResultSchema,
          { task: { ttl: 60_000 } },
        )) {
          if (message.type === 'taskCreated') taskId = message.task.taskId;
          messages.push({
            type: message.type,
            ...('task' in message && { status: message.task.status }),
            ...(message.type === 'error' && {
              error: { code: message.error.code, message: message.error.message },
            }),
          });
        }
      })();
      await eventually(() => (messages.length >= 2 ? true : undefined));
      const waiting = timed(
        client.experimental.tasks.getTaskResult(taskId, V1CallToolResultSchema, { timeout: 1_500 }),
        Date.now(),
      );
      await sleep(100);

      await a.app.close();
      await streaming;
      const waited = await waiting;

      expect(messages.at(-1)).toEqual({
        type: 'error',
        error: { code: -32603, message: 'MCP error -32603: TypeError: fetch failed' },
      });
      expect(messages.slice(0, -1).every((message) => message.status === 'working')).toBe(true);
      expect(waited.error).toMatchObject({
        code: -32001,
        message: 'MCP error -32001: Request timed out',
      });
      expect(waited.at).toBeGreaterThanOrEqual(1_500);
      expect(gets).toEqual([405]);

      // The server is back: the same client reads the task by id, then its result.
      b = await boot(store, 'express', a.port);
      expect((await client.experimental.tasks.getTask(taskId)).status).toBe('working');
      await b.service.complete(taskId, textResult('finished on B'));
      const result = await client.experimental.tasks.getTaskResult(taskId, V1CallToolResultSchema);
      expect(textOf(result)).toBe('finished on B');
    } finally {
      await client.close();
      await b?.app.close();
      await a.app.close().catch(() => undefined);
    }
  });
});
