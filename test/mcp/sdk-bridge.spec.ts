import { createServer, request, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { McpHttpHandler } from '@modelcontextprotocol/server';
import { serveWithSdk } from '../../src/mcp/sdk-bridge.js';

/**
 * The bridge from a Node request to the SDK's web-standard handler, over real HTTP on loopback.
 * The handler here is a small web handler written for the test: what is under test is the bridge
 * (what the handler receives, how its Response is written back), not the SDK.
 */
interface Seen {
  request: Request;
  bodyText: string;
  options: Parameters<McpHttpHandler['fetch']>[1];
}

function handlerOf(answer: (request: Request) => Response | Promise<Response>, seen: Seen[] = []) {
  return {
    fetch: async (request: Request, options?: Parameters<McpHttpHandler['fetch']>[1]) => {
      seen.push({ request, bodyText: await request.clone().text(), options });
      return answer(request);
    },
  } as unknown as McpHttpHandler;
}

async function serve(
  handler: McpHttpHandler,
  parsed: (req: IncomingMessage) => unknown,
  errors: Error[] = [],
): Promise<{ server: Server; port: number }> {
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      void serveWithSdk(handler, req, res, parsed(req), (error) => errors.push(error));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, port: (server.address() as AddressInfo).port };
}

function post(port: number, body: string, headers: Record<string, string> = {}) {
  return new Promise<{ status: number; headers: IncomingMessage['headers']; text: string }>(
    (resolve, reject) => {
      const req = request(
        {
          host: '127.0.0.1',
          port,
          method: 'POST',
          path: '/mcp?x=1',
          headers: { 'content-type': 'application/json', ...headers },
        },
        (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => (text += chunk));
          res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, text }));
        },
      );
      req.on('error', reject);
      req.end(body);
    },
  );
}

describe('serveWithSdk (the bridge to the SDK handler)', () => {
  let server: Server | undefined;
  afterEach(async () => {
    server?.closeAllConnections();
    await new Promise((resolve) => server?.close(resolve));
    server = undefined;
  });

  it('hands the parsed body over as parsedBody, with a body-less Request and every other header', async () => {
    const seen: Seen[] = [];
    const parsedBody = { jsonrpc: '2.0', id: 7, method: 'tools/list' };
    const handler = handlerOf(() => Response.json({ ok: true }), seen);
    ({ server } = await serve(handler, () => parsedBody));
    const { port } = server.address() as AddressInfo;
    const answer = await post(port, JSON.stringify(parsedBody), {
      'mcp-method': 'tools/list',
      authorization: 'Bearer t',
    });
    expect(answer.status).toBe(200);
    expect(JSON.parse(answer.text)).toEqual({ ok: true });
    expect(seen).toHaveLength(1);
    const [{ request: web, bodyText, options }] = seen;
    expect(options?.parsedBody).toBe(parsedBody);
    expect(bodyText).toBe('');
    expect(web.method).toBe('POST');
    expect(web.url).toBe(`http://127.0.0.1:${port}/mcp?x=1`);
    expect(web.headers.get('mcp-method')).toBe('tools/list');
    expect(web.headers.get('authorization')).toBe('Bearer t');
    expect(web.headers.get('content-type')).toBe('application/json');
    expect(web.headers.get('content-length')).toBeNull();
  });

  it('writes status, headers and every Set-Cookie of the Response', async () => {
    const handler = handlerOf(() => {
      const headers = new Headers({ 'content-type': 'application/json', 'x-one': 'a' });
      headers.append('set-cookie', 'a=1');
      headers.append('set-cookie', 'b=2');
      return new Response('{"e":1}', { status: 418, headers });
    });
    ({ server } = await serve(handler, () => ({})));
    const answer = await post((server.address() as AddressInfo).port, '{}');
    expect(answer.status).toBe(418);
    expect(answer.headers['x-one']).toBe('a');
    expect(answer.headers['set-cookie']).toEqual(['a=1', 'b=2']);
    expect(answer.text).toBe('{"e":1}');
    // A JSON answer goes whole, with its length, not chunked.
    expect(answer.headers['content-length']).toBe('7');
    expect(answer.headers['transfer-encoding']).toBeUndefined();
  });

  it('streams a long body in order, waiting for a slow reader', async () => {
    const chunk = 'x'.repeat(64 * 1024);
    const count = 512; // 32 MiB: well past the socket buffers on both sides
    let pulled = 0;
    let pulledWhilePaused = -1;
    const handler = handlerOf(
      () =>
        new Response(
          new ReadableStream({
            pull(controller) {
              if (pulled === count) return controller.close();
              controller.enqueue(new TextEncoder().encode(`${pulled % 10}${chunk}`));
              pulled++;
            },
          }),
          { headers: { 'content-type': 'text/event-stream' } },
        ),
    );
    ({ server } = await serve(handler, () => ({})));
    const { port } = server.address() as AddressInfo;
    const text = await new Promise<string>((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port, method: 'POST', path: '/mcp' }, (res) => {
        res.pause();
        let received = '';
        // Read slowly at first: the bridge must not pull the whole stream meanwhile.
        setTimeout(() => {
          pulledWhilePaused = pulled;
          res.setEncoding('utf8');
          res.on('data', (part: string) => (received += part));
          res.on('end', () => resolve(received));
          res.resume();
        }, 200);
      });
      req.on('error', reject);
      req.end('{}');
    });
    expect(pulledWhilePaused).toBeGreaterThan(0);
    expect(pulledWhilePaused).toBeLessThan(count / 2);
    expect(text.length).toBe(count * (chunk.length + 1));
    for (let i = 0; i < count; i++) expect(text[i * (chunk.length + 1)]).toBe(String(i % 10));
  });

  it('aborts the handler’s signal and stops the stream when the client goes away', async () => {
    let signal: AbortSignal | undefined;
    let cancelled = false;
    const handler = handlerOf((web) => {
      signal = web.signal;
      return new Response(
        new ReadableStream({
          start(controller) {
            controller.enqueue(new TextEncoder().encode('data: first\n\n'));
          },
          cancel() {
            cancelled = true;
          },
        }),
        { headers: { 'content-type': 'text/event-stream' } },
      );
    });
    ({ server } = await serve(handler, () => ({})));
    const { port } = server.address() as AddressInfo;
    await new Promise<void>((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port, method: 'POST', path: '/mcp' }, (res) => {
        res.once('data', () => {
          req.destroy();
          resolve();
        });
      });
      req.on('error', () => undefined);
      req.end('{}');
      setTimeout(() => reject(new Error('no first event')), 5_000).unref();
    });
    for (let i = 0; i < 100 && !(signal?.aborted && cancelled); i++) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    expect(signal?.aborted).toBe(true);
    expect(cancelled).toBe(true);
  });

  it('answers a handler that throws with a JSON-RPC internal error and no stack', async () => {
    const errors: Error[] = [];
    const handler = {
      fetch: () => Promise.reject(new Error('secret detail at /srv/app.js:1')),
    } as unknown as McpHttpHandler;
    ({ server } = await serve(handler, () => ({ jsonrpc: '2.0', id: 1, method: 'x' }), errors));
    const answer = await post((server.address() as AddressInfo).port, '{}');
    expect(answer.status).toBe(500);
    expect(JSON.parse(answer.text)).toEqual({
      jsonrpc: '2.0',
      id: null,
      error: { code: -32603, message: 'Internal error' },
    });
    expect(answer.text).not.toContain('secret');
    expect(errors.map((error) => error.message)).toEqual(['secret detail at /srv/app.js:1']);
  });
});
