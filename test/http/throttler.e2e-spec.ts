import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { SdkHttpError } from '@modelcontextprotocol/client';
import { StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ADAPTERS, type AdapterName } from '../support/app.js';
import { connectTasksClient } from '../../src/client/index.js';
import { connectOfficialClient, testContextFetch, textOf } from '../support/official-client.js';
import {
  leak,
  mcpRequest,
  type McpRequestOptions,
  post,
  type RawResponse,
} from '../support/raw.js';
import { v1Client, v1Transport } from '../support/v1-client.js';
import { legacyHeaders } from '../support/wire.js';
import { sleep } from '../support/helpers.js';

/**
 * Rate limits the Nest way (docs/rate-limits.md): the ThrottlerGuard of `@nestjs/throttler` in
 * front of the endpoint, keyed by principal, with a per-task `tasks/get` limit of one per poll
 * interval. The app (test/http/throttler-app/main.ts) runs in its own Node process, on Express and
 * on Fastify: the throttler is CommonJS and loads `@nestjs/common` 12 through Node's require(esm),
 * which Jest's module runtime cannot do here. What a client sees: HTTP 429, `Retry-After`, and a
 * JSON-RPC error with its request id; the official clients (v1 and v2) reject the call.
 */

const ROOT = resolve(process.cwd());
const ENTRY = join(ROOT, '.build/throttler/test/http/throttler-app/main.js');
/** The per-principal limit the app is started with (requests per minute). */
const PRINCIPAL_LIMIT = 8;
const SERVER_ERROR = -32000;

/** The app, compiled with the sources it imports (tsc errors in files being edited elsewhere are
 * printed, not fatal: the test judges the app's behaviour, the typecheck is its own step). */
function buildApp(): void {
  rmSync(ENTRY, { force: true });
  try {
    execFileSync(
      process.execPath,
      [
        join(ROOT, 'node_modules/typescript/bin/tsc'),
        '-p',
        'test/http/throttler-app/tsconfig.json',
        // Emit only: the same files in half the time (npm run typecheck checks the types).
        '--noCheck',
      ],
      { cwd: ROOT, stdio: 'inherit' },
    );
  } catch {
    // Reported above; the emitted JavaScript is still run.
  }
  if (!existsSync(ENTRY)) throw new Error(`the throttler app did not build: no ${ENTRY}`);
}

interface AppProcess {
  url: string;
  port: number;
  stop(): Promise<void>;
}

/** Starts the app with `env` and resolves once it listens. */
function startApp(env: Record<string, string>): Promise<AppProcess> {
  const child: ChildProcess = spawn(process.execPath, [ENTRY], {
    env: { ...process.env, PRINCIPAL_LIMIT: String(PRINCIPAL_LIMIT), ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const exited = new Promise<void>((done) => child.once('exit', () => done()));
  return new Promise((resolveApp, reject) => {
    let buffered = '';
    child.stdout!.setEncoding('utf8');
    child.stdout!.on('data', (chunk: string) => {
      buffered += chunk;
      const lines = buffered.split('\n');
      buffered = lines.pop()!;
      for (const line of lines) {
        if (!line.startsWith('{')) continue;
        const event = JSON.parse(line) as { event: string; port?: number; error?: string };
        if (event.event === 'crashed') reject(new Error(`the app crashed: ${event.error}`));
        if (event.event === 'ready' && event.port) {
          resolveApp({
            url: `http://127.0.0.1:${event.port}/mcp`,
            port: event.port,
            stop: async () => {
              child.kill('SIGTERM');
              await exited;
            },
          });
        }
      }
    });
    child.once('exit', (code) => reject(new Error(`the app exited (${code}) before it listened`)));
  });
}

/** What every rate-limit answer is, whatever the request: 429, Retry-After, the JSON-RPC error. */
function expectRateLimited(response: RawResponse, id: string | number | null): number {
  expect(response.status).toBe(429);
  expect(response.headers['content-type']).toMatch(/^application\/json\b/);
  const retryAfter = response.headers['retry-after'];
  expect(retryAfter).toMatch(/^[1-9]\d*$/);
  expect(response.json).toEqual({
    jsonrpc: '2.0',
    id,
    error: {
      code: SERVER_ERROR,
      message: 'Too many requests',
      data: { limit: 'rate', retryAfterMs: Number(retryAfter) * 1000 },
    },
  });
  expect(leak(response.text)).toBeUndefined();
  return Number(retryAfter);
}

let nextId = 1;

describe.each(ADAPTERS)('rate limits with @nestjs/throttler (%s)', (adapter: AdapterName) => {
  let app: AppProcess;

  const send = (
    method: string,
    params: Record<string, unknown>,
    options: McpRequestOptions = {},
  ): Promise<RawResponse> =>
    post(app.url, mcpRequest(method, params, { id: nextId++, ...options }));

  /** Spends `principal`'s whole per-minute budget on tools/list (each one served). */
  async function exhaust(principal: string): Promise<void> {
    for (let i = 0; i < PRINCIPAL_LIMIT; i++) {
      const response = await send('tools/list', {}, { principal });
      expect(response.status).toBe(200);
      expect(response.headers['x-ratelimit-remaining-principal']).toBe(
        String(PRINCIPAL_LIMIT - 1 - i),
      );
    }
  }

  beforeAll(async () => {
    if (adapter === ADAPTERS[0]) buildApp();
    app = await startApp({ ADAPTER: adapter });
  }, 120_000);

  afterAll(async () => {
    await app?.stop();
  });

  it('a principal over its limit gets 429 with Retry-After and a JSON-RPC error with its request id', async () => {
    await exhaust('mallory');

    const over = await send('tools/list', {}, { principal: 'mallory', id: 'over-1' });
    const retryAfter = expectRateLimited(over, 'over-1');
    // The throttler names its own header after the throttler that refused; the plain one matches.
    expect(over.headers['retry-after-principal']).toBe(String(retryAfter));
    expect(retryAfter).toBeLessThanOrEqual(60);

    // Every request of that principal, whatever it is: a numeric id, a task method, a 2025 call.
    expectRateLimited(await send('tools/list', {}, { principal: 'mallory', id: 7 }), 7);
    expectRateLimited(
      await send('tasks/get', { taskId: 'any' }, { principal: 'mallory', id: 'g' }),
      'g',
    );
    const legacy = await post(app.url, {
      headers: legacyHeaders('mallory'),
      body: JSON.stringify({ jsonrpc: '2.0', id: 'legacy', method: 'tools/list', params: {} }),
    });
    expectRateLimited(legacy, 'legacy');
    // A body with no id to echo (not JSON at all) gets `id: null`.
    const broken = await post(app.url, {
      headers: { ...legacyHeaders('mallory') },
      body: '{"jsonrpc":',
    });
    expectRateLimited(broken, null);
  });

  it('another principal from the same address is still served', async () => {
    const response = await send('tools/list', {}, { principal: 'bob' });
    expect(response.status).toBe(200);
    expect(response.json?.result?.tools).toEqual(
      expect.arrayContaining([expect.objectContaining({ name: 'wait_for_cancel' })]),
    );
    // Anonymous callers are tracked apart from both (by address).
    expect((await send('tools/list', {})).status).toBe(200);
  });

  it('tasks/get of one task is answered no faster than its pollIntervalMs', async () => {
    const principal = 'poller';
    const started = async (): Promise<{ taskId: string; pollIntervalMs: number }> => {
      const response = await send(
        'tools/call',
        { name: 'wait_for_cancel', arguments: {} },
        { principal },
      );
      expect(response.status).toBe(200);
      return response.json!.result as unknown as { taskId: string; pollIntervalMs: number };
    };
    const first = await started();
    const second = await started();
    expect(first.pollIntervalMs).toBe(3_000);

    const get = (taskId: string, id: string) => send('tasks/get', { taskId }, { principal, id });
    expect((await get(first.taskId, 'a1')).status).toBe(200);
    const early = await get(first.taskId, 'a2');
    const retryAfter = expectRateLimited(early, 'a2');
    expect(early.headers['retry-after-poll']).toBe(String(retryAfter));
    expect(retryAfter * 1000).toBeLessThanOrEqual(first.pollIntervalMs);

    // The limit is per task and per method: another task, and other methods, are served.
    expect((await get(second.taskId, 'b1')).status).toBe(200);
    expect((await send('tools/list', {}, { principal })).status).toBe(200);
    // Another principal polling the same id is not slowed by this one (and finds no task).
    const foreign = await send('tasks/get', { taskId: first.taskId }, { principal: 'bob' });
    expect(foreign.status).toBe(200);
    expect(foreign.json?.error?.message).toBe('Task not found');

    // A client that waits as told is served again.
    await sleep(retryAfter * 1000);
    const again = await get(first.taskId, 'a3');
    expect(again.status).toBe(200);
    expect((again.json?.result as { taskId?: string }).taskId).toBe(first.taskId);
  });

  it.each([true, false])(
    "this package's client follows a task to its end under the poll limit (listen %s)",
    async (listen) => {
      const statuses: number[] = [];
      const mcp = await connectTasksClient(app.url, {
        fetch: async (input, init) => {
          const response = await testContextFetch(input, init);
          statuses.push(response.status);
          return response;
        },
        headers: { Authorization: `Bearer follower-${String(listen)}` },
        listen,
      });
      try {
        const call = await mcp.callTool('finish_soon', {});
        expect(textOf(await call.result())).toBe('done');
        // It polls at the interval the task names, so none of its requests was refused.
        expect(statuses.length).toBeGreaterThan(2);
        expect(statuses).not.toContain(429);
      } finally {
        await mcp.close();
      }
    },
    30_000,
  );

  it('the v1 SDK client rejects the call the limit refuses (no hang)', async () => {
    const client = v1Client();
    await client.connect(v1Transport(app.url, 'carol'));
    try {
      const error = await firstRejection(() => client.listTools());
      expect(error).toBeInstanceOf(StreamableHTTPError);
      expect((error as StreamableHTTPError).code).toBe(429);
      expect((error as Error).message).toContain('Too many requests');
    } finally {
      await client.close();
    }
  });

  it('the official v2 client rejects the call the limit refuses (no hang)', async () => {
    const connected = await connectOfficialClient(app.url, { principal: 'dave' });
    try {
      const error = await firstRejection(() => connected.client.listTools());
      expect(error).toBeInstanceOf(SdkHttpError);
      expect((error as SdkHttpError).status).toBe(429);
      expect((error as Error).message).toContain('Too many requests');
    } finally {
      await connected.close();
    }
  });
});

/** Calls `call` until it rejects (at most PRINCIPAL_LIMIT + 1 times); the rejection. */
async function firstRejection(call: () => Promise<unknown>): Promise<unknown> {
  for (let i = 0; i <= PRINCIPAL_LIMIT; i++) {
    try {
      await call();
    } catch (error) {
      return error;
    }
  }
  throw new Error(`no call was refused in ${PRINCIPAL_LIMIT + 1}`);
}

describe.each(ADAPTERS)('a global ThrottlerGuard (APP_GUARD) (%s)', (adapter: AdapterName) => {
  let app: AppProcess;

  beforeAll(async () => {
    if (!existsSync(ENTRY)) buildApp();
    app = await startApp({ ADAPTER: adapter, MODE: 'global' });
  }, 120_000);

  afterAll(async () => {
    await app?.stop();
  });

  it('refuses at the endpoint with the same JSON-RPC answer, and leaves a REST route its own', async () => {
    for (let i = 0; i < PRINCIPAL_LIMIT; i++) {
      const response = await post(
        app.url,
        mcpRequest('tools/list', {}, { principal: 'mallory', id: i }),
      );
      expect(response.status).toBe(200);
    }
    const over = await post(
      app.url,
      mcpRequest('tools/list', {}, { principal: 'mallory', id: 'x' }),
    );
    expectRateLimited(over, 'x');

    // A REST route has a budget of its own (the throttler's keys name the route) and keeps Nest's
    // answer when it runs out.
    const ping = () =>
      fetch(`http://127.0.0.1:${app.port}/ping`, { headers: { authorization: 'Bearer mallory' } });
    for (let i = 0; i < PRINCIPAL_LIMIT; i++) expect((await ping()).status).toBe(200);
    const refused = await ping();
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after-principal')).toMatch(/^[1-9]\d*$/);
    expect(refused.headers.get('retry-after')).toBeNull();
    expect(await refused.json()).toEqual({
      statusCode: 429,
      message: 'ThrottlerException: Too Many Requests',
    });
    const bob = await fetch(`http://127.0.0.1:${app.port}/ping`, {
      headers: { authorization: 'Bearer bob' },
    });
    expect(bob.status).toBe(200);
  });
});
