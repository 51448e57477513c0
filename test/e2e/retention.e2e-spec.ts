import { Agent, type IncomingMessage, request } from 'node:http';
import { connect } from 'node:net';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { Module } from '@nestjs/common';
import type { McpServer } from '@modelcontextprotocol/server';
import * as z from 'zod/v4';
import { TasksModule } from '../../src/index.js';
import { McpServerNotifier } from '../../src/entries/front.js';
import { ADAPTERS, type RunningApp, startApp } from '../support/app.js';
import { declaredCapabilities, envelope, PROTOCOL_VERSION } from '../support/wire.js';

/**
 * A leak guard, not a memory threshold: after a few hundred malformed requests (bodies over
 * maxBodyBytes with and without Content-Length, broken JSON, deep nesting, wrong headers and
 * envelopes, refused params on the lean path and on the SDK path) and a full GC, no request
 * object may still be reachable, and no McpServer beyond the idle ones the endpoint keeps for the
 * next requests (and none once they are retired). Each is watched with a WeakRef;
 * what the server keeps (a cache, a listener, a buffer held by a closure) keeps its request alive.
 * The memory figures themselves are in bench/malformed.bench.mjs.
 */

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

const MAX_BODY_BYTES = 64 * 1024;
const servers: WeakRef<McpServer>[] = [];
const requests: WeakRef<IncomingMessage>[] = [];

@Module({
  imports: [
    TasksModule.forRoot({
      maxBodyBytes: MAX_BODY_BYTES,
      configure: (server) => {
        servers.push(new WeakRef(server));
        server.registerTool(
          'echo',
          { description: 'Returns the text.', inputSchema: z.object({ text: z.string() }) },
          ({ text }) => ({ content: [{ type: 'text', text }] }),
        );
      },
    }),
  ],
})
class RetentionModule {}

const meta = envelope(declaredCapabilities(true), 'retention');
const rpc = (method: string, params: Record<string, unknown>): Record<string, unknown> => ({
  jsonrpc: '2.0',
  id: 1,
  method,
  params: { ...params, _meta: meta },
});

interface Case {
  method?: string;
  name?: string;
  body: string;
  chunked?: boolean;
  type?: string;
}

function cases(): Case[] {
  const pad = 'x'.repeat(MAX_BODY_BYTES);
  const deep = `${'['.repeat(5_000)}1${']'.repeat(5_000)}`;
  return [
    // Over the limit, with a Content-Length and chunked.
    { method: 'tasks/get', body: JSON.stringify(rpc('tasks/get', { taskId: 5, pad })) },
    {
      method: 'tasks/get',
      body: JSON.stringify(rpc('tasks/get', { taskId: 5, pad })),
      chunked: true,
    },
    // Just under it, on the SDK path (a tool error).
    {
      method: 'tools/call',
      name: 'echo',
      body: JSON.stringify(
        rpc('tools/call', { name: 'echo', arguments: { text: 5, pad: pad.slice(1_000) } }),
      ),
    },
    { method: 'tasks/get', body: '{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{' },
    {
      method: 'tools/call',
      name: 'echo',
      body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":${deep}}`,
    },
    { method: 'tools/list', body: JSON.stringify(rpc('tasks/get', { taskId: 'x' })) },
    {
      method: 'tasks/get',
      body: JSON.stringify({ ...rpc('tasks/get', { taskId: 'x' }), jsonrpc: '1.0' }),
    },
    {
      method: 'tasks/cancel',
      name: 'nope',
      body: JSON.stringify(rpc('tasks/cancel', { taskId: 'nope' })),
    },
    {
      method: 'tools/call',
      name: 'echo',
      body: JSON.stringify(rpc('tools/call', { name: 'echo', arguments: { text: 5 } })),
    },
    { method: 'x/unknown', body: JSON.stringify(rpc('x/unknown', {})) },
    {
      method: 'tasks/get',
      body: JSON.stringify(rpc('tasks/get', { taskId: 'x' })),
      type: 'text/plain',
    },
  ];
}

function send(agent: Agent, url: string, c: Case): Promise<number> {
  const payload = Buffer.from(c.body);
  const headers: Record<string, string> = {
    'content-type': c.type ?? 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': PROTOCOL_VERSION,
    ...(c.method !== undefined && { 'mcp-method': c.method }),
    ...(c.name !== undefined && { 'mcp-name': c.name }),
    ...(!c.chunked && { 'content-length': String(payload.length) }),
  };
  return new Promise((resolve, reject) => {
    const req = request(url, { method: 'POST', headers, agent }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end(payload);
  });
}

/**
 * How many watched objects are still alive after full collections (one task turn apart), stopping
 * as soon as no more than `atMost` are: late in a long in-band run the heap is large and each full
 * collection costs up to a second, so the rounds are spent only while the count is still too high.
 */
async function survivors(refs: WeakRef<object>[], atMost = 0): Promise<number> {
  let alive = refs.length;
  for (let round = 0; round < 10 && alive > atMost; round++) {
    await new Promise((resolve) => setTimeout(resolve, 20));
    gc();
    gc();
    alive = refs.filter((ref) => ref.deref() !== undefined).length;
  }
  return alive;
}

describe.each(ADAPTERS)('nothing kept after malformed requests (%s)', (adapter) => {
  let running: RunningApp;

  beforeAll(async () => {
    running = await startApp(RetentionModule, adapter, '/mcp', (app) => {
      app.use((req: IncomingMessage, _res: unknown, next: () => void) => {
        requests.push(new WeakRef(req));
        next();
      });
    });
  });
  afterAll(() => running.close());

  it('no request, and no McpServer beyond the idle ones, is reachable after a full GC', async () => {
    servers.length = 0;
    requests.length = 0;
    const agent = new Agent({ keepAlive: true, maxSockets: 8 });
    const all = cases();
    const statuses = new Set<number>();
    const work = Array.from({ length: 8 }, async (_, worker) => {
      for (let i = worker; i < 240; i += 8)
        statuses.add(await send(agent, running.url, all[i % all.length]!));
    });
    await Promise.all(work);
    agent.destroy();
    expect(statuses.has(500)).toBe(false);
    expect([...statuses].sort()).toEqual(expect.arrayContaining([200, 400, 413, 415]));
    expect(requests.length).toBeGreaterThanOrEqual(240);
    expect(servers.length).toBeGreaterThan(0);
    // What the endpoint keeps for the next requests: at most one idle server per request that was
    // in flight at once (one owner here), and no request through them.
    expect(await survivors(servers, 8)).toBeLessThanOrEqual(8);
    expect(await survivors(requests)).toBe(0);
    // Retired, they are gone too.
    running.app.get(McpServerNotifier).toolsChanged();
    expect(await survivors(servers)).toBe(0);
  }, 120_000);

  it('a client that leaves in the middle of its body leaves nothing behind either', async () => {
    requests.length = 0;
    const { port } = new URL(running.url);
    for (let i = 0; i < 40; i++) {
      await new Promise<void>((resolve) => {
        const socket = connect(Number(port), '127.0.0.1', () => {
          socket.write(
            `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n` +
              `Content-Length: 1000\r\n\r\n{"jsonrpc":"2.0",`,
          );
          setTimeout(() => socket.destroy(), 20);
        });
        socket.on('close', () => resolve());
        socket.on('error', () => undefined);
      });
    }
    expect(requests.length).toBe(40);
    expect(await survivors(requests)).toBe(0);
    // And the endpoint still answers.
    const echo = cases().find((c) => c.name === 'echo' && c.body.includes('"text":5}'))!;
    expect(await send(new Agent(), running.url, echo)).toBe(200);
  }, 120_000);
});
