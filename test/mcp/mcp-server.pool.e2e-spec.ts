/**
 * The servers the endpoint reuses for 2026-07-28 requests: built once per instance (not per
 * request), never shared between owners, never reused after a client went away mid-call or after
 * the app's surface changed; 2025-11-25 requests and requests that do not name their client get a
 * new server each time.
 */
import { request } from 'node:http';
import { Module } from '@nestjs/common';
import { McpServer } from '@modelcontextprotocol/server';
import * as z from 'zod/v4';
import { TasksModule } from '../../src/index.js';
import { IDLE_SERVERS, McpServerPool } from '../../src/mcp/mcp-server.pool.js';
import { ADAPTERS, type RunningApp, startApp } from '../support/app.js';
import { Catalogue, CatalogueModule } from './catalogue.js';
import { mcpRequest, post } from '../support/raw.js';
import {
  CLIENT_CAPABILITIES_KEY,
  legacyHeaders,
  PROTOCOL_VERSION,
  PROTOCOL_VERSION_KEY,
  standardHeaders,
} from '../support/wire.js';

/** What the app's `configure` sees: how many servers it built, and the tools to register. */
const surface = {
  built: 0,
  extra: [] as string[],
  /** The instance a `wait` call runs on, and the gate it waits for. */
  waitingOn: 0,
  gate: undefined as (() => void) | undefined,
  started: undefined as (() => void) | undefined,
};

const text = (value: string) => ({ content: [{ type: 'text' as const, text: value }] });

@Module({
  imports: [
    TasksModule.forRoot({
      principal: (req) => {
        const header = (req as { headers: Record<string, string | undefined> }).headers
          .authorization;
        return header?.startsWith('Bearer ') ? header.slice(7) : null;
      },
      configure: (server) => {
        const instance = ++surface.built;
        server.registerTool('instance', { description: 'Which server answers' }, () =>
          text(String(instance)),
        );
        server.registerTool('wait', { description: 'Waits for the test' }, async () => {
          surface.waitingOn = instance;
          await new Promise<void>((resolve) => {
            surface.gate = resolve;
            surface.started?.();
          });
          return text(String(instance));
        });
        for (const name of surface.extra) {
          server.registerTool(name, { inputSchema: z.object({}) }, () => text(name));
        }
      },
    }),
    CatalogueModule,
  ],
})
class AppModule {}

describe.each(ADAPTERS)('the servers the endpoint reuses (%s)', (adapter) => {
  let app: RunningApp;
  beforeEach(async () => {
    surface.built = 0;
    surface.extra = [];
    app = await startApp(AppModule, adapter);
  });
  afterEach(() => app.close());

  const call = async (principal: string, tool: string): Promise<string> => {
    const answer = await post(
      app.url,
      mcpRequest('tools/call', { name: tool, arguments: {} }, { principal, tasks: false }),
    );
    expect(answer.status).toBe(200);
    return (answer.json?.result?.content as { text: string }[])[0]!.text;
  };

  it('builds a server once for many requests of one owner, not once per request', async () => {
    const before = surface.built;
    const answers: string[] = [];
    for (let i = 0; i < 20; i++) answers.push(await call('alice', 'instance'));
    expect(new Set(answers).size).toBe(1);
    expect(surface.built).toBe(before + 1);
  });

  it('never gives one owner a server another owner used', async () => {
    const alice = await call('alice', 'instance');
    const bob = await call('bob', 'instance');
    expect(bob).not.toBe(alice);
    expect(await call('alice', 'instance')).toBe(alice);
    expect(await call('bob', 'instance')).toBe(bob);
  });

  it('serves concurrent requests of one owner on separate servers', async () => {
    const started = new Promise<void>((resolve) => (surface.started = resolve));
    const waiting = call('alice', 'wait');
    await started;
    const other = await call('alice', 'instance');
    expect(other).not.toBe(String(surface.waitingOn));
    surface.gate!();
    expect(await waiting).toBe(String(surface.waitingOn));
  });

  it('does not reuse a server whose client went away mid-call, even once the call ends', async () => {
    const started = new Promise<void>((resolve) => (surface.started = resolve));
    const { headers, body } = mcpRequest(
      'tools/call',
      { name: 'wait', arguments: {} },
      { principal: 'alice', tasks: false },
    );
    const gone = request(app.url, { method: 'POST', headers, agent: false });
    gone.on('error', () => undefined);
    gone.end(body);
    await started;
    const abandoned = String(surface.waitingOn);
    gone.destroy();
    await new Promise((resolve) => setTimeout(resolve, 100));
    surface.gate!();
    await new Promise((resolve) => setTimeout(resolve, 50));
    for (let i = 0; i < 5; i++) expect(await call('alice', 'instance')).not.toBe(abandoned);
  });

  it('builds the servers again after a change of the surface is announced', async () => {
    const first = await call('alice', 'instance');
    surface.extra = ['added'];
    app.app.get(Catalogue).changes.toolsChanged();
    expect(await call('alice', 'instance')).not.toBe(first);
    expect(await call('alice', 'added')).toBe('added');
    const list = await post(app.url, mcpRequest('tools/list', {}, { principal: 'alice' }));
    const names = (list.json?.result?.tools as { name: string }[]).map((tool) => tool.name);
    expect(names).toContain('added');
  });

  it('builds a new server for a request that does not name its client', async () => {
    const anonymousClient = () =>
      post(app.url, {
        headers: { ...standardHeaders('tools/call', 'instance'), authorization: 'Bearer alice' },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 1,
          method: 'tools/call',
          params: {
            name: 'instance',
            arguments: {},
            _meta: { [PROTOCOL_VERSION_KEY]: PROTOCOL_VERSION, [CLIENT_CAPABILITIES_KEY]: {} },
          },
        }),
      });
    const first = await anonymousClient();
    const second = await anonymousClient();
    const textOf = (answer: typeof first) =>
      (answer.json?.result?.content as { text: string }[])[0]!.text;
    expect(first.status).toBe(200);
    expect(textOf(second)).not.toBe(textOf(first));
  });

  it('builds a new server for each 2025-11-25 request', async () => {
    const legacyCall = async () => {
      const answer = await post(app.url, {
        headers: legacyHeaders('alice'),
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 1,
          method: 'tools/call',
          params: { name: 'instance', arguments: {} },
        }),
      });
      const message = answer.text.includes('data: ')
        ? JSON.parse(answer.text.split('data: ')[1]!.split('\n')[0]!)
        : answer.json;
      return (message.result.content as { text: string }[])[0]!.text;
    };
    const first = await legacyCall();
    expect(await legacyCall()).not.toBe(first);
  });
});

describe('McpServerPool', () => {
  let built = 0;
  const pool = () =>
    new McpServerPool(() => {
      const server = new McpServer({ name: 'pool-test', version: String(++built) });
      return server;
    });
  /** One exchange: what the SDK does with a server it was given (connect, serve, close). */
  const exchange = async (server: McpServer) => {
    const { InMemoryTransport } = await import('@modelcontextprotocol/server');
    const [, serverSide] = InMemoryTransport.createLinkedPair();
    await server.connect(serverSide);
    await server.close();
  };

  it('keeps at most IDLE_SERVERS idle, dropping the least recently used owner first', async () => {
    const servers = pool();
    const signal = new AbortController().signal;
    const first = servers.take('old', signal);
    await exchange(first);
    const taken = Array.from({ length: IDLE_SERVERS }, () => servers.take('new', signal));
    for (const server of taken) await exchange(server);
    expect(servers.idleCount).toBe(IDLE_SERVERS);
    // The oldest owner's server made room.
    expect(servers.take('old', signal)).not.toBe(first);
    expect(taken).toContain(servers.take('new', signal));
  });

  it('gives nothing back once its signal fired, after retire() or after close()', async () => {
    const servers = pool();
    const aborted = new AbortController();
    const one = servers.take('a', aborted.signal);
    aborted.abort();
    await exchange(one);
    expect(servers.idleCount).toBe(0);

    const live = new AbortController().signal;
    const two = servers.take('a', live);
    servers.retire();
    await exchange(two);
    expect(servers.idleCount).toBe(0);

    const three = servers.take('a', live);
    await exchange(three);
    expect(servers.idleCount).toBe(1);
    servers.close();
    expect(servers.idleCount).toBe(0);
    const four = servers.take('a', live);
    await exchange(four);
    expect(servers.idleCount).toBe(0);
  });
});
