import type { INestApplication } from '@nestjs/common';
import { DemoModule } from '../../examples/demo.module.js';
import { type InMemoryTaskStore, TaskStore } from '../../src/entries/store.js';
import { ADAPTERS, type RunningApp, startApp } from '../support/app.js';
import { exchange, leak, mcpRequest, type RawAnswer, type RawExchange } from '../support/raw.js';

/**
 * The HTTP forms around the endpoint, over real sockets (every byte written by hand), under
 * Express and Fastify: methods it does not serve (405 with `Allow: POST`, as the SDK answers GET
 * and DELETE), CORS preflights left to `app.enableCors()`, absolute-form request targets (served,
 * with the target's authority checked as the host), and the one path rule: only the endpoint's
 * path exactly as configured (global prefix included) is served; every variant the router would
 * still send to it is answered 404 before anything reads its body.
 */

const METHOD_NOT_ALLOWED = {
  jsonrpc: '2.0',
  error: { code: -32000, message: 'Method not allowed.' },
  id: null,
};

/** A tools/call of the demo's echo tool: the standard headers as lines, the body. */
function echoCall(text = 'hi', id = 7): { headers: Array<[string, string]>; body: string } {
  const { headers, body } = mcpRequest(
    'tools/call',
    { name: 'echo', arguments: { text } },
    { id, tasks: false },
  );
  return { headers: Object.entries(headers), body };
}

/** A body nested `depth` levels deep that is otherwise a valid echo call. */
function deepCall(depth: number): string {
  const { body } = echoCall();
  return body.replace(
    '"arguments":{',
    `"deep":${'['.repeat(depth)}${']'.repeat(depth)},"arguments":{`,
  );
}

/** Every answer: no 5xx, no stack or file path, and an answer at all. */
function sane(answer: RawAnswer): void {
  expect(answer.status).toBeGreaterThanOrEqual(200);
  expect(answer.status).toBeLessThan(500);
  expect(leak(answer.text)).toBeUndefined();
}

function echoed(answer: RawAnswer): unknown {
  return (answer.json?.result?.content as Array<{ text?: unknown }> | undefined)?.[0]?.text;
}

describe.each(ADAPTERS)('HTTP forms at the endpoint (%s)', (adapter) => {
  let running: RunningApp;
  let port: number;
  const send = (request: RawExchange): Promise<RawAnswer> => exchange(port, request);
  const host = (): [string, string] => ['Host', `127.0.0.1:${port}`];
  const storeSize = (app: INestApplication): number => app.get<InMemoryTaskStore>(TaskStore).size;

  beforeAll(async () => {
    running = await startApp(DemoModule, adapter);
    port = Number(new URL(running.url).port);
  });
  afterAll(() => running?.close());

  describe('methods', () => {
    it('a POST to /mcp is served (the baseline the other cases differ from)', async () => {
      const { headers, body } = echoCall('baseline');
      const answer = await send({
        method: 'POST',
        target: '/mcp',
        headers: [host(), ...headers],
        body,
      });
      expect(answer.status).toBe(200);
      expect(echoed(answer)).toBe('baseline');
    });

    it.each(['GET', 'DELETE'])(
      '%s is answered by the SDK as before: 405, Allow: POST, -32000 "Method not allowed."',
      async (method) => {
        const answer = await send({ method, target: '/mcp', headers: [host()] });
        expect(answer.status).toBe(405);
        expect(answer.headers.allow).toBe('POST');
        expect(answer.headers['content-type']).toMatch(/^application\/json/);
        expect(answer.json).toEqual(METHOD_NOT_ALLOWED);
      },
    );

    it.each([
      'TRACE',
      'PATCH',
      'PUT',
      'OPTIONS',
      'LOCK',
      'UNLOCK',
      'PROPFIND',
      'MKCOL',
      'PURGE',
      'SEARCH',
    ])(
      '%s /mcp: 405, Allow: POST and the same JSON-RPC error as GET (no CORS set up)',
      async (method) => {
        const { headers, body } = echoCall();
        const answer = await send({ method, target: '/mcp', headers: [host(), ...headers], body });
        sane(answer);
        expect(answer.status).toBe(405);
        expect(answer.headers.allow).toBe('POST');
        expect(answer.headers['content-type']).toMatch(/^application\/json/);
        expect(answer.json).toEqual(METHOD_NOT_ALLOWED);
      },
    );

    it.each(['PUT', 'PATCH', 'OPTIONS', 'PROPFIND', 'QUERY'])(
      '%s /mcp with an empty or broken JSON body: still 405, before any body parser answers',
      async (method) => {
        const { headers } = echoCall();
        for (const body of ['', '{"jsonrpc":', '['.repeat(10_000)]) {
          const answer = await send({
            method,
            target: '/mcp',
            headers: [host(), ...headers],
            body,
          });
          expect(answer.status).toBe(405);
          expect(answer.json).toEqual(METHOD_NOT_ALLOWED);
        }
      },
    );

    it('HEAD /mcp: 405 with Allow: POST and no body', async () => {
      const answer = await send({ method: 'HEAD', target: '/mcp', headers: [host()] });
      expect(answer.status).toBe(405);
      expect(answer.headers.allow).toBe('POST');
      expect(answer.text).toBe('');
    });

    it("a made-up method is refused by Node's HTTP parser (400), CONNECT gets no answer; never a 5xx", async () => {
      const madeUp = await send({ method: 'FROB', target: '/mcp', headers: [host()] });
      expect(madeUp.status).toBe(400);
      const connectAnswer = await send({
        method: 'CONNECT',
        target: `127.0.0.1:${port}`,
        headers: [host()],
      });
      expect(
        connectAnswer.status === 0 || (connectAnswer.status >= 400 && connectAnswer.status < 500),
      ).toBe(true);
      // The server still serves.
      const { headers, body } = echoCall('after');
      const answer = await send({
        method: 'POST',
        target: '/mcp',
        headers: [host(), ...headers],
        body,
      });
      expect(echoed(answer)).toBe('after');
    });

    it('a task tool called with another method creates no task', async () => {
      const before = storeSize(running.app);
      const { headers, body } = mcpRequest(
        'tools/call',
        { name: 'add_slowly', arguments: { a: 1, b: 2 } },
        { principal: 'alice' },
      );
      for (const method of ['PUT', 'PATCH', 'TRACE', 'OPTIONS', 'GET', 'DELETE']) {
        const answer = await send({
          method,
          target: '/mcp',
          headers: [host(), ...Object.entries(headers)],
          body,
        });
        expect(answer.status).toBe(405);
      }
      expect(storeSize(running.app)).toBe(before);
    });
  });

  describe('absolute-form request targets', () => {
    it.each([
      'http://127.0.0.1:PORT/mcp',
      'http://localhost:PORT/mcp',
      'http://127.0.0.1:PORT/mcp?x=1',
      'HTTP://LOCALHOST:PORT/mcp',
    ])('%s is served like /mcp', async (form) => {
      const { headers, body } = echoCall('absolute');
      const target = form.replace('PORT', String(port));
      const answer = await send({ method: 'POST', target, headers: [host(), ...headers], body });
      expect(answer.status).toBe(200);
      expect(answer.json?.id).toBe(7);
      expect(echoed(answer)).toBe('absolute');
    });

    it("the target's authority replaces Host: an allowed authority is served under a foreign Host", async () => {
      const { headers, body } = echoCall('authority');
      const answer = await send({
        method: 'POST',
        target: `http://localhost:${port}/mcp`,
        headers: [['Host', 'evil.example'], ...headers],
        body,
      });
      expect(answer.status).toBe(200);
      expect(echoed(answer)).toBe('authority');
    });

    it.each([
      'http://evil.example/mcp',
      'http://evil.example:PORT/mcp',
      'https://localhost.evil.example/mcp',
      'http://127.0.0.1.evil.example/mcp',
    ])('a foreign authority (%s) is refused like a foreign Host: 403, -32000', async (form) => {
      const before = storeSize(running.app);
      const { headers, body } = mcpRequest(
        'tools/call',
        { name: 'add_slowly', arguments: { a: 1, b: 2 } },
        { principal: 'alice' },
      );
      const target = form.replace('PORT', String(port));
      const answer = await send({
        method: 'POST',
        target,
        headers: [host(), ...Object.entries(headers)],
        body,
      });
      expect(answer.status).toBe(403);
      expect(answer.json?.error?.code).toBe(-32000);
      expect(answer.json?.error?.message).toMatch(/^Invalid Host/);
      expect(storeSize(running.app)).toBe(before);
      // The same request under a foreign Host header gets the same answer.
      const viaHost = await send({
        method: 'POST',
        target: '/mcp',
        headers: [['Host', new URL(target).host], ...Object.entries(headers)],
        body,
      });
      expect(viaHost.status).toBe(403);
      expect(viaHost.json?.error?.code).toBe(-32000);
    });

    it("an absolute-form body goes through the endpoint's own parsing (depth limit, maxBodyBytes)", async () => {
      const target = `http://127.0.0.1:${port}/mcp`;
      const { headers } = echoCall();
      const deep = await send({
        method: 'POST',
        target,
        headers: [host(), ...headers],
        body: deepCall(100),
      });
      expect(deep.status).toBe(400);
      expect(deep.json?.error?.code).toBe(-32600);
      expect(deep.json?.error?.message).toMatch(/nests deeper than 64/);
      // 200 kB: over the app's own JSON parser's 100 kB, within maxBodyBytes (1 MiB).
      const big = await send({
        method: 'POST',
        target,
        headers: [host(), ...headers],
        body: echoCall('x'.repeat(200_000)).body,
      });
      expect(big.status).toBe(200);
      expect(echoed(big)).toHaveLength(200_000);
    });

    it('other methods in absolute form: 405 as in origin form', async () => {
      const answer = await send({
        method: 'TRACE',
        target: `http://127.0.0.1:${port}/mcp`,
        headers: [host()],
      });
      expect(answer.status).toBe(405);
      expect(answer.json).toEqual(METHOD_NOT_ALLOWED);
      const get = await send({
        method: 'GET',
        target: `http://127.0.0.1:${port}/mcp`,
        headers: [host()],
      });
      expect(get.status).toBe(405);
      expect(get.json).toEqual(METHOD_NOT_ALLOWED);
    });
  });

  describe('one path: exactly the configured one', () => {
    const variants = [
      '/mcp/',
      '/MCP',
      '/MCP/',
      '/Mcp',
      '/m%63p',
      '/%6Dcp',
      '//mcp',
      '/mcp//',
      '/mcp/x',
      '/./mcp',
      '/x/../mcp',
    ];

    it.each(variants)(
      '%s is not served: a valid call gets no result and no 5xx',
      async (target) => {
        const { headers, body } = echoCall();
        const answer = await send({ method: 'POST', target, headers: [host(), ...headers], body });
        sane(answer);
        expect(answer.status).toBe(404);
        expect(answer.json?.result).toBeUndefined();
      },
    );

    it.each(variants)(
      '%s with a body nested 10,000 levels deep: a 4xx, never a 5xx',
      async (target) => {
        const { headers } = echoCall();
        const answer = await send({
          method: 'POST',
          target,
          headers: [host(), ...headers],
          body: deepCall(10_000),
        });
        sane(answer);
        expect(answer.status).toBeGreaterThanOrEqual(400);
      },
    );

    it.each(variants)(
      '%s with a 200 kB body, or in absolute form: not served either',
      async (target) => {
        const { headers, body } = echoCall('x'.repeat(200_000));
        const answer = await send({ method: 'POST', target, headers: [host(), ...headers], body });
        sane(answer);
        expect(answer.status).toBeGreaterThanOrEqual(400);
        const absolute = await send({
          method: 'POST',
          target: `http://127.0.0.1:${port}${target}`,
          headers: [host(), ...echoCall().headers],
          body: echoCall().body,
        });
        sane(absolute);
        expect(absolute.json?.result).toBeUndefined();
      },
    );

    it('a task tool call to a variant creates no task', async () => {
      const before = storeSize(running.app);
      const { headers, body } = mcpRequest(
        'tools/call',
        { name: 'add_slowly', arguments: { a: 1, b: 2 } },
        { principal: 'alice' },
      );
      for (const target of variants) {
        const answer = await send({
          method: 'POST',
          target,
          headers: [host(), ...Object.entries(headers)],
          body,
        });
        expect(answer.status).toBe(404);
      }
      expect(storeSize(running.app)).toBe(before);
    });

    it('the canonical path takes a body nested 10,000 levels deep with -32600 (depth limit), 400', async () => {
      const { headers } = echoCall();
      const answer = await send({
        method: 'POST',
        target: '/mcp',
        headers: [host(), ...headers],
        body: deepCall(10_000),
      });
      expect(answer.status).toBe(400);
      expect(answer.json?.error?.code).toBe(-32600);
    });

    it('OPTIONS * (asterisk form) gets a 4xx, never a 5xx', async () => {
      const answer = await send({ method: 'OPTIONS', target: '*', headers: [host()] });
      sane(answer);
      expect(answer.status).toBeGreaterThanOrEqual(400);
    });

    it('a query string does not change the path: /mcp?x=1 is served', async () => {
      const { headers, body } = echoCall('query');
      const answer = await send({
        method: 'POST',
        target: '/mcp?x=1',
        headers: [host(), ...headers],
        body,
      });
      expect(echoed(answer)).toBe('query');
    });

    it('header names in any case, and repeated harmless headers, are served', async () => {
      const { headers, body } = echoCall('case');
      const lines: Array<[string, string]> = headers.map(([name, value]) => [
        name.toUpperCase(),
        value,
      ]);
      lines.push(
        ['X-Fuzz', 'a'],
        ['x-fuzz', 'b'],
        ['Accept', 'application/json, text/event-stream'],
      );
      const answer = await send({
        method: 'POST',
        target: '/mcp',
        headers: [['HOST', `127.0.0.1:${port}`], ...lines],
        body,
      });
      expect(answer.status).toBe(200);
      expect(echoed(answer)).toBe('case');
    });
  });
});

describe.each(ADAPTERS)('the endpoint under a global prefix (%s)', (adapter) => {
  let running: RunningApp;
  let port: number;
  const send = (request: RawExchange): Promise<RawAnswer> => exchange(port, request);
  const host = (): [string, string] => ['Host', `127.0.0.1:${port}`];

  beforeAll(async () => {
    running = await startApp(DemoModule, adapter, '/api/mcp', (app) => app.setGlobalPrefix('api'));
    port = Number(new URL(running.url).port);
  });
  afterAll(() => running?.close());

  it('/api/mcp is served, in origin and absolute form, with the depth limit', async () => {
    const { headers, body } = echoCall('prefixed');
    const answer = await send({
      method: 'POST',
      target: '/api/mcp',
      headers: [host(), ...headers],
      body,
    });
    expect(echoed(answer)).toBe('prefixed');
    const absolute = await send({
      method: 'POST',
      target: `http://localhost:${port}/api/mcp`,
      headers: [host(), ...headers],
      body,
    });
    expect(echoed(absolute)).toBe('prefixed');
    const deep = await send({
      method: 'POST',
      target: '/api/mcp',
      headers: [host(), ...headers],
      body: deepCall(10_000),
    });
    expect(deep.status).toBe(400);
    expect(deep.json?.error?.code).toBe(-32600);
  });

  it('/mcp, outside the prefix, is not routed to the endpoint (404 from the app)', async () => {
    const { headers, body } = echoCall();
    const answer = await send({
      method: 'POST',
      target: '/mcp',
      headers: [host(), ...headers],
      body,
    });
    expect(answer.status).toBe(404);
    expect(answer.json?.result).toBeUndefined();
  });

  it.each(['/api/MCP', '/API/mcp', '/api/mcp/', '/api//mcp', '/api/m%63p'])(
    '%s is not served (404)',
    async (target) => {
      const { headers, body } = echoCall();
      const answer = await send({ method: 'POST', target, headers: [host(), ...headers], body });
      sane(answer);
      expect(answer.status).toBe(404);
      expect(answer.json?.result).toBeUndefined();
    },
  );

  it('TRACE /api/mcp: 405', async () => {
    const answer = await send({ method: 'TRACE', target: '/api/mcp', headers: [host()] });
    expect(answer.status).toBe(405);
    expect(answer.json).toEqual(METHOD_NOT_ALLOWED);
  });
});

/** What a browser client of the endpoint needs allowed (the README's enableCors example). */
const CORS = {
  origin: ['http://localhost:5173'],
  methods: ['POST', 'GET', 'DELETE'],
  allowedHeaders: [
    'Content-Type',
    'Accept',
    'Authorization',
    'Mcp-Protocol-Version',
    'Mcp-Method',
    'Mcp-Name',
    'Last-Event-ID',
  ],
  exposedHeaders: ['WWW-Authenticate'],
  maxAge: 600,
};

describe.each(ADAPTERS)('CORS at the endpoint with app.enableCors() (%s)', (adapter) => {
  let running: RunningApp;
  let port: number;
  const send = (request: RawExchange): Promise<RawAnswer> => exchange(port, request);
  const host = (): [string, string] => ['Host', `127.0.0.1:${port}`];

  beforeAll(async () => {
    running = await startApp(DemoModule, adapter, '/mcp', (app) => app.enableCors(CORS));
    port = Number(new URL(running.url).port);
  });
  afterAll(() => running?.close());

  it("a browser's preflight for a POST with the MCP headers succeeds", async () => {
    const answer = await send({
      method: 'OPTIONS',
      target: '/mcp',
      headers: [
        host(),
        ['Origin', 'http://localhost:5173'],
        ['Access-Control-Request-Method', 'POST'],
        [
          'Access-Control-Request-Headers',
          'content-type, mcp-method, mcp-name, mcp-protocol-version, authorization',
        ],
      ],
    });
    expect(answer.status).toBeGreaterThanOrEqual(200);
    expect(answer.status).toBeLessThan(300);
    expect(answer.headers['access-control-allow-origin']).toBe('http://localhost:5173');
    expect(answer.headers['access-control-allow-methods']).toMatch(/\bPOST\b/);
    const allowed = (answer.headers['access-control-allow-headers'] ?? '')
      .split(',')
      .map((name) => name.trim().toLowerCase());
    for (const name of [
      'content-type',
      'mcp-method',
      'mcp-name',
      'mcp-protocol-version',
      'authorization',
    ]) {
      expect(allowed).toContain(name);
    }
  });

  it('the POST that follows is served and carries the CORS headers the browser needs to read it', async () => {
    const { headers, body } = echoCall('cors');
    const answer = await send({
      method: 'POST',
      target: '/mcp',
      headers: [host(), ['Origin', 'http://localhost:5173'], ...headers],
      body,
    });
    expect(answer.status).toBe(200);
    expect(echoed(answer)).toBe('cors');
    expect(answer.headers['access-control-allow-origin']).toBe('http://localhost:5173');
    expect(answer.headers['access-control-expose-headers']).toMatch(/WWW-Authenticate/i);
  });

  it('an error answer from the endpoint (400, -32020) carries them too', async () => {
    const { headers, body } = echoCall();
    const answer = await send({
      method: 'POST',
      target: '/mcp',
      headers: [
        host(),
        ['Origin', 'http://localhost:5173'],
        ...headers.map(([name, value]): [string, string] =>
          name === 'mcp-name' ? [name, 'not-echo'] : [name, value],
        ),
      ],
      body,
    });
    expect(answer.status).toBe(400);
    expect(answer.json?.error?.code).toBe(-32020);
    expect(answer.headers['access-control-allow-origin']).toBe('http://localhost:5173');
  });

  it('a method the endpoint does not serve is still 405 (not a preflight: no Access-Control-Request-Method)', async () => {
    const answer = await send({
      method: 'PUT',
      target: '/mcp',
      headers: [host(), ['Origin', 'http://localhost:5173']],
    });
    expect(answer.status).toBe(405);
    expect(answer.json).toEqual(METHOD_NOT_ALLOWED);
  });

  it('a foreign origin is still refused by the endpoint (403), CORS or not', async () => {
    const { headers, body } = echoCall();
    const answer = await send({
      method: 'POST',
      target: '/mcp',
      headers: [host(), ['Origin', 'http://evil.example'], ...headers],
      body,
    });
    expect(answer.status).toBe(403);
    expect(answer.json?.error?.code).toBe(-32000);
  });
});
