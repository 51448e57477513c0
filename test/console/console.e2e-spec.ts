import {
  type CanActivate,
  type ExecutionContext,
  Injectable,
  UnauthorizedException,
} from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { ExpressAdapter } from '@nestjs/platform-express';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { TasksModule, TasksService, TasksConfigError } from '../../src/index.js';
import { InMemoryTaskStore } from '../../src/entries/store.js';
import { TaskConsole } from '../../src/console/task-console.js';
import { CONSOLE_SCRIPTS } from '../../src/console/console-assets.js';
import { ADAPTERS, startApp, type RunningApp } from '../support/app.js';
import {
  ADMIN,
  ALICE,
  AdminGuard,
  bearerOnlyConsoleApp,
  call,
  consoleApp,
  openStream,
  TOKENS,
} from './console-app.js';

/**
 * The task console over HTTP on loopback, with the real app (Express and Fastify): who may use it,
 * its headers, listing across owners and by filter, detail, cancel, the change stream, the checks
 * on a POST, and a prompt shutdown with a stream open.
 */

const ROUTES = (id: string): [string, string][] => [
  ['GET', '/mcp-tasks'],
  ['GET', '/mcp-tasks/console.js'],
  ['GET', '/mcp-tasks/console-stream.js'],
  ['GET', '/mcp-tasks/console.css'],
  ['GET', '/mcp-tasks/api/tasks'],
  ['GET', `/mcp-tasks/api/tasks/${id}`],
  ['POST', `/mcp-tasks/api/tasks/${id}/cancel`],
  ['GET', '/mcp-tasks/api/stream'],
];

const JSON_POST = { ...ADMIN, 'content-type': 'application/json' };

const noStack = (text: string): void => {
  expect(text).not.toMatch(/\bat .+\.(ts|js):\d+/);
  expect(text).not.toContain('stack');
};

describe.each(ADAPTERS)('task console (%s)', (adapter) => {
  let running: RunningApp;
  let base: string;
  let tasks: TasksService;

  beforeAll(async () => {
    running = await startApp(consoleApp({ listen: { keepAliveMs: 150 } }), adapter);
    base = new URL('/', running.url).href;
    tasks = running.app.get(TasksService);
  });
  afterAll(() => running.close());

  it('refuses a caller its guards do not let in (403), and anonymous too: the API, the stream, the page', async () => {
    const task = await tasks.create({ principal: 'alice' }, {}, { toolName: 'build' });
    for (const [method, path] of ROUTES(task.taskId)) {
      // The script and styles are served to anyone (see the bearer-only tests below).
      if (/\.(js|css)$/.test(path)) continue;
      for (const headers of [ALICE, {}]) {
        const answer = await call(
          base,
          method,
          path,
          {
            ...headers,
            ...(method === 'POST' && { 'content-type': 'application/json' }),
          },
          method === 'POST' ? '{}' : undefined,
        );
        expect(`${method} ${path} ${answer.status}`).toBe(`${method} ${path} 403`);
        expect(answer.text).not.toContain(task.taskId);
      }
    }
    expect((await tasks.status(task.taskId)).status).toBe('working');
  });

  it('serves the page, its script and styles with a strict CSP, nosniff and no caching', async () => {
    const page = await call(base, 'GET', '/mcp-tasks', ADMIN);
    expect(page.status).toBe(200);
    expect(page.headers['content-type']).toMatch(/^text\/html; charset=utf-8/);
    const csp = String(page.headers['content-security-policy']);
    expect(csp).toContain("default-src 'self'");
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("style-src 'self'");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).not.toContain('unsafe-inline');
    expect(page.headers['x-content-type-options']).toBe('nosniff');
    expect(page.headers['cache-control']).toBe('no-store');
    expect(page.text).toContain('<script type="module" src="/mcp-tasks/console.js"></script>');
    expect(page.text).toContain('href="/mcp-tasks/console.css"');
    expect(page.text).not.toMatch(/<script>|<style>| on[a-z]+=/);

    // The page script is ES modules beside the page, each imported by a relative URL.
    let scripts = '';
    for (const name of CONSOLE_SCRIPTS) {
      const script = await call(base, 'GET', `/mcp-tasks/${name}`, ADMIN);
      expect(`${name} ${script.status}`).toBe(`${name} 200`);
      expect(script.headers['content-type']).toMatch(/^text\/javascript/);
      expect(script.headers['x-content-type-options']).toBe('nosniff');
      scripts += script.text;
      for (const [, imported] of script.text.matchAll(/^import .* from '\.\/([^']+)';$/gm)) {
        expect(CONSOLE_SCRIPTS).toContain(imported);
      }
    }
    expect((await call(base, 'GET', '/mcp-tasks/console-none.js', ADMIN)).status).toBe(404);
    expect(scripts).not.toContain('new EventSource');
    expect(scripts).toContain('sessionStorage');
    expect(scripts).not.toMatch(/localStorage\.|document\.cookie/);
    expect(scripts).not.toContain('innerHTML');
    const styles = await call(base, 'GET', '/mcp-tasks/console.css', ADMIN);
    expect(styles.status).toBe(200);
    expect(styles.headers['content-type']).toMatch(/^text\/css/);
  });

  it('lists every owner’s tasks newest first, and filters by owner, tenant, status and tool', async () => {
    const made: string[] = [];
    const make = async (principal: string, toolName: string, tenant?: string) => {
      const record = await tasks.create({ principal, tenant }, {}, { toolName });
      made.push(record.taskId);
      await new Promise((resolve) => setTimeout(resolve, 3));
      return record;
    };
    const a1 = await make('ann', 'lst_render');
    const b1 = await make('ben', 'lst_render');
    const a2 = await make('ann', 'lst_export');
    const t1 = await make('ann', 'lst_export', 'acme');
    await tasks.complete(a1.taskId, { content: [] });

    const all = await call(base, 'GET', '/mcp-tasks/api/tasks?limit=100', ADMIN);
    expect(all.status).toBe(200);
    expect(all.headers['cache-control']).toBe('no-store');
    expect(all.headers['x-content-type-options']).toBe('nosniff');
    const ids = (all.json().tasks as { taskId: string }[]).map((task) => task.taskId);
    expect(ids.filter((id) => made.includes(id))).toEqual([...made].reverse());
    const first = (all.json().tasks as Record<string, unknown>[]).find(
      (t) => t.taskId === b1.taskId,
    )!;
    expect(first).toMatchObject({
      toolName: 'lst_render',
      owner: { principal: 'ben', tenant: null },
      status: 'working',
      statusMessage: null,
      version: 1,
    });
    expect(typeof first.createdAt).toBe('string');

    const listed = async (query: string): Promise<string[]> => {
      const answer = await call(base, 'GET', `/mcp-tasks/api/tasks?${query}`, ADMIN);
      expect(`${query} ${answer.status}`).toBe(`${query} 200`);
      return (answer.json().tasks as { taskId: string }[]).map((task) => task.taskId);
    };
    expect(await listed('owner=ann')).toEqual([a2.taskId, a1.taskId]);
    expect(await listed('owner=ann&tenant=acme')).toEqual([t1.taskId]);
    expect(await listed('owner=ann&tool=lst_export')).toEqual([a2.taskId]);
    expect(await listed('tool=lst_render')).toEqual([b1.taskId, a1.taskId]);
    expect(await listed('tool=lst_render&status=completed')).toEqual([a1.taskId]);
    expect(await listed('tool=lst_render&status=working,completed')).toEqual([
      b1.taskId,
      a1.taskId,
    ]);
    expect(await listed('owner=ben&status=completed')).toEqual([]);

    // Paging: two at a time over the four, no task twice, none missed.
    const seen: string[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < 10; page++) {
      const answer = await call(
        base,
        'GET',
        `/mcp-tasks/api/tasks?owner=ann&limit=1${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
        ADMIN,
      );
      const body = answer.json() as { tasks: { taskId: string }[]; nextCursor?: string };
      seen.push(...body.tasks.map((task) => task.taskId));
      cursor = body.nextCursor;
      if (cursor === undefined) break;
    }
    expect(seen).toEqual([a2.taskId, a1.taskId]);
  });

  it('answers a bad query with 400 and a message naming the parameter, never a stack', async () => {
    const cases: [string, RegExp][] = [
      ['limit=0', /limit must be an integer from 1 to 100/],
      ['limit=abc', /limit must be an integer/],
      ['limit=101', /limit must be an integer/],
      ['status=done', /status must be one of working/],
      ['status=working,nope', /status must be one of/],
      ['colour=red', /Unknown query parameter "colour"/],
      ['tenant=acme', /tenant filters an owner/],
      ['owner=a&owner=b', /owner must be given once/],
      ['cursor=not-a-cursor', /cursor/],
    ];
    for (const [query, message] of cases) {
      const answer = await call(base, 'GET', `/mcp-tasks/api/tasks?${query}`, ADMIN);
      expect(`${query} ${answer.status}`).toBe(`${query} 400`);
      expect(answer.headers['content-type']).toMatch(/application\/json/);
      expect(String(answer.json().message)).toMatch(message);
      noStack(answer.text);
    }
  });

  it('shows a task in detail: status, input requests, result, kept arguments, the history heard', async () => {
    const record = await tasks.create(
      { principal: 'carol', tenant: 'acme' },
      { ttlMs: 60_000 },
      { toolName: 'deploy', arguments: { service: 'api', replicas: 3 } },
    );
    await tasks.progress(record.taskId, 'Uploading 1/3');
    await tasks.requireInput(record.taskId, {
      confirm: {
        method: 'elicitation/create',
        params: {
          mode: 'form',
          message: 'Go on?',
          requestedSchema: { type: 'object', properties: {} },
        },
      },
    } as never);
    let detail = (await call(base, 'GET', `/mcp-tasks/api/tasks/${record.taskId}`, ADMIN)).json();
    expect(detail).toMatchObject({
      taskId: record.taskId,
      toolName: 'deploy',
      owner: { principal: 'carol', tenant: 'acme' },
      status: 'input_required',
      ttlMs: 60_000,
      argumentsKept: true,
      arguments: { service: 'api', replicas: 3 },
      result: null,
      error: null,
    });
    expect(Object.keys(detail.inputRequests as object)).toEqual(['confirm']);
    expect(detail.expiresAt).toBe(new Date(record.createdAt + 60_000).toISOString());

    await tasks.complete(record.taskId, { content: [{ type: 'text', text: 'deployed' }] });
    const answer = await call(base, 'GET', `/mcp-tasks/api/tasks/${record.taskId}`, ADMIN);
    expect(answer.headers['cache-control']).toBe('no-store');
    detail = answer.json();
    expect(detail.status).toBe('completed');
    expect(detail.inputRequests).toBeNull();
    expect(detail.result).toMatchObject({ content: [{ type: 'text', text: 'deployed' }] });
    const history = detail.history as { status: string; statusMessage?: string; version: number }[];
    expect(history.map((change) => change.status)).toEqual([
      'working',
      'working',
      'input_required',
      'completed',
    ]);
    expect(history[1]!.statusMessage).toBe('Uploading 1/3');

    const plain = await tasks.create({ principal: null }, {}, {});
    const bare = (await call(base, 'GET', `/mcp-tasks/api/tasks/${plain.taskId}`, ADMIN)).json();
    expect(bare).toMatchObject({ toolName: null, argumentsKept: false, arguments: null });
    expect(bare.owner).toEqual({ principal: null, tenant: null });
  });

  it('cancels as the task’s owner; a finished task is answered as it is; unknown ids are 404', async () => {
    const record = await tasks.create({ principal: 'dave' }, {}, { toolName: 'crawl' });
    const cancelled = await call(
      base,
      'POST',
      `/mcp-tasks/api/tasks/${record.taskId}/cancel`,
      JSON_POST,
      '{}',
    );
    expect(cancelled.status).toBe(200);
    expect(cancelled.headers['cache-control']).toBe('no-store');
    expect(cancelled.json()).toMatchObject({ taskId: record.taskId, status: 'cancelled' });
    expect((await tasks.get(record.taskId, { principal: 'dave' })).status).toBe('cancelled');

    const again = await call(base, 'POST', `/mcp-tasks/api/tasks/${record.taskId}/cancel`, {
      ...ADMIN,
      'x-tasks-console': '1',
    });
    expect(again.status).toBe(200);
    expect(again.json()).toMatchObject({ status: 'cancelled', version: cancelled.json().version });

    for (const [method, path] of [
      ['GET', '/mcp-tasks/api/tasks/no-such-task'],
      ['POST', '/mcp-tasks/api/tasks/no-such-task/cancel'],
    ] as const) {
      const missing = await call(
        base,
        method,
        path,
        JSON_POST,
        method === 'POST' ? '{}' : undefined,
      );
      expect(`${method} ${missing.status}`).toBe(`${method} 404`);
      expect(missing.json()).toMatchObject({ statusCode: 404, message: 'Task not found' });
      noStack(missing.text);
    }
  });

  it('refuses a POST a cross-site page could send: a form’s content type, a foreign Origin', async () => {
    const record = await tasks.create({ principal: 'erin' }, {}, { toolName: 'crawl' });
    const path = `/mcp-tasks/api/tasks/${record.taskId}/cancel`;
    const form = await call(
      base,
      'POST',
      path,
      { ...ADMIN, 'content-type': 'application/x-www-form-urlencoded' },
      'a=1',
    );
    expect(form.status).toBe(415);
    const plain = await call(base, 'POST', path, { ...ADMIN, 'content-type': 'text/plain' }, '{}');
    expect(plain.status).toBe(415);
    const foreign = await call(
      base,
      'POST',
      path,
      { ...JSON_POST, origin: 'http://evil.example' },
      '{}',
    );
    expect(foreign.status).toBe(403);
    const otherPort = await call(
      base,
      'POST',
      path,
      { ...JSON_POST, origin: 'http://localhost:1' },
      '{}',
    );
    expect(otherPort.status).toBe(403);
    const crossSite = await call(
      base,
      'POST',
      path,
      { ...JSON_POST, 'sec-fetch-site': 'cross-site' },
      '{}',
    );
    expect(crossSite.status).toBe(403);
    const rebound = await call(base, 'GET', '/mcp-tasks', { ...ADMIN, host: 'evil.example' });
    expect(rebound.status).toBe(403);
    expect((await tasks.status(record.taskId)).status).toBe('working');

    const sameOrigin = await call(
      base,
      'POST',
      path,
      { ...JSON_POST, origin: base.slice(0, -1) },
      '{}',
    );
    expect(sameOrigin.status).toBe(200);
    expect((await tasks.status(record.taskId)).status).toBe('cancelled');
  });

  it('streams every change as it happens, with keepalive comments', async () => {
    const stream = await openStream(base, '/mcp-tasks/api/stream', ADMIN);
    try {
      expect(stream.status).toBe(200);
      expect(stream.headers['content-type']).toMatch(/^text\/event-stream/);
      expect(stream.headers['cache-control']).toBe('no-store');
      await stream.waitFor(/: connected/);
      const record = await tasks.create({ principal: 'frank' }, {}, { toolName: 'stream_me' });
      await stream.waitFor(
        new RegExp(`event: task\\ndata: \\{"taskId":"${record.taskId}"[^\\n]*"version":1\\}`),
      );
      const halfway = await tasks.progress(record.taskId, 'halfway');
      const frame = await stream.waitFor(
        new RegExp(`data: [^\\n]*${record.taskId}[^\\n]*halfway[^\\n]*`),
      );
      const data = JSON.parse(frame.slice('data: '.length)) as Record<string, unknown>;
      expect(data).toMatchObject({
        status: 'working',
        statusMessage: 'halfway',
        toolName: 'stream_me',
        version: halfway.version,
      });
      await stream.waitFor(/: keepalive\n\n/, 2_000);
      expect(running.app.get(TaskConsole).openStreams).toBe(1);
    } finally {
      stream.close();
    }
    // A client that goes away is dropped.
    await stream.ended;
    for (let i = 0; i < 50 && running.app.get(TaskConsole).openStreams > 0; i++) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    expect(running.app.get(TaskConsole).openStreams).toBe(0);
  });
});

describe.each(ADAPTERS)('task console, bearer-only app (%s)', (adapter) => {
  let running: RunningApp;
  let base: string;
  let tasks: TasksService;
  const admin = { authorization: `Bearer ${TOKENS.admin}` };
  const alice = { authorization: `Bearer ${TOKENS.alice}` };

  beforeAll(async () => {
    running = await startApp(bearerOnlyConsoleApp(), adapter);
    base = new URL('/', running.url).href;
    tasks = running.app.get(TasksService);
  });
  afterAll(() => running.close());

  it('serves the page (with the refusal’s status), its script and styles without credentials', async () => {
    const task = await tasks.create({ principal: 'alice' }, {}, { toolName: 'build' });
    for (const [headers, status] of [
      [{}, 401],
      [{ authorization: 'Bearer wrong' }, 401],
      [{ authorization: 'Basic YWRtaW46eA==' }, 401],
      [alice, 403],
      [admin, 200],
    ] as const) {
      const page = await call(base, 'GET', '/mcp-tasks', headers);
      expect(`${headers.authorization} ${page.status}`).toBe(`${headers.authorization} ${status}`);
      expect(page.headers['content-type']).toMatch(/^text\/html; charset=utf-8/);
      expect(String(page.headers['content-security-policy'])).toContain("frame-ancestors 'none'");
      expect(page.headers['x-frame-options']).toBe('DENY');
      expect(page.headers['referrer-policy']).toBe('no-referrer');
      expect(page.headers['cache-control']).toBe('no-store');
      expect(page.headers['x-content-type-options']).toBe('nosniff');
      expect(page.text).toContain('<script type="module" src="/mcp-tasks/console.js"></script>');
      expect(page.text).toContain('id="sign-in-form"');
      expect(page.text).not.toContain(task.taskId);
    }
    for (const [path, type] of [
      ['/mcp-tasks/console.js', /^text\/javascript/],
      ['/mcp-tasks/console-api.js', /^text\/javascript/],
      ['/mcp-tasks/console.css', /^text\/css/],
    ] as const) {
      const file = await call(base, 'GET', path, {});
      expect(`${path} ${file.status}`).toBe(`${path} 200`);
      expect(file.headers['content-type']).toMatch(type);
      expect(String(file.headers['content-security-policy'])).toContain("default-src 'self'");
      expect(file.headers['x-content-type-options']).toBe('nosniff');
      expect(file.text).toBe((await call(base, 'GET', path, admin)).text);
    }
  });

  it('refuses the API and the stream without a token (401), with a wrong one (401), to a non-admin (403)', async () => {
    const task = await tasks.create({ principal: 'alice' }, {}, { toolName: 'build' });
    const api = ROUTES(task.taskId).filter(([, path]) => path.includes('/api/'));
    for (const [method, path] of api) {
      for (const [headers, status] of [
        [{}, 401],
        [{ authorization: 'Bearer wrong' }, 401],
        [alice, 403],
      ] as const) {
        const answer = await call(
          base,
          method,
          path,
          { ...headers, ...(method === 'POST' && { 'content-type': 'application/json' }) },
          method === 'POST' ? '{}' : undefined,
        );
        expect(`${method} ${path} ${answer.status}`).toBe(`${method} ${path} ${status}`);
        expect(answer.headers['content-type']).toMatch(/^application\/json/);
        expect(answer.text).not.toContain(task.taskId);
        expect(answer.json()).toMatchObject({ statusCode: status });
        noStack(answer.text);
      }
    }
    expect((await tasks.status(task.taskId)).status).toBe('working');
    const listed = await call(base, 'GET', '/mcp-tasks/api/tasks', admin);
    expect(listed.status).toBe(200);
    expect((listed.json().tasks as { taskId: string }[]).map((t) => t.taskId)).toContain(
      task.taskId,
    );
    const stream = await openStream(base, '/mcp-tasks/api/stream', admin);
    try {
      expect(stream.status).toBe(200);
      await stream.waitFor(/: connected/);
    } finally {
      stream.close();
    }
  });

  it('answers a foreign Host or Origin with its JSON 403, never the page, with a token or without', async () => {
    for (const [path, headers] of [
      ['/mcp-tasks', { host: 'evil.example' }],
      ['/mcp-tasks', { host: 'evil.example', ...admin }],
      ['/mcp-tasks/console.js', { host: 'evil.example' }],
      ['/mcp-tasks/console-stream.js', { host: 'evil.example' }],
      ['/mcp-tasks/console.css', { origin: 'http://evil.example' }],
      ['/mcp-tasks', { origin: 'http://evil.example', ...alice }],
    ] as const) {
      const answer = await call(base, 'GET', path, headers);
      expect(`${path} ${answer.status}`).toBe(`${path} 403`);
      expect(answer.headers['content-type']).toMatch(/^application\/json/);
      expect(String(answer.json().message)).toMatch(/^Invalid (Host|Origin): evil\.example/);
      expect(answer.text).not.toContain('sign-in');
    }
  });
});

describe('task console: a guard that challenges for HTTP Basic', () => {
  @Injectable()
  class BasicAdminGuard implements CanActivate {
    canActivate(context: ExecutionContext): boolean {
      const http = context.switchToHttp();
      const header = http.getRequest<{ headers: Record<string, string> }>().headers.authorization;
      if (header === `Basic ${Buffer.from('admin:x').toString('base64')}`) return true;
      const response = http.getResponse<{
        header?: (name: string, value: string) => void;
        setHeader?: (name: string, value: string) => void;
      }>();
      if (response.header) response.header('WWW-Authenticate', 'Basic realm="console"');
      else response.setHeader!('WWW-Authenticate', 'Basic realm="console"');
      throw new UnauthorizedException('Sign in');
    }
  }

  it.each(ADAPTERS)(
    'answers the page with the 401 and its challenge, as before (%s); with the credentials, 200',
    async (adapter) => {
      const running = await startApp(
        consoleApp({}, { console: { guards: [BasicAdminGuard] } }),
        adapter,
      );
      try {
        const base = new URL('/', running.url).href;
        const refused = await call(base, 'GET', '/mcp-tasks');
        expect(refused.status).toBe(401);
        expect(refused.headers['www-authenticate']).toBe('Basic realm="console"');
        const api = await call(base, 'GET', '/mcp-tasks/api/tasks');
        expect(api.status).toBe(401);
        expect(api.headers['www-authenticate']).toBe('Basic realm="console"');
        const basic = { authorization: `Basic ${Buffer.from('admin:x').toString('base64')}` };
        expect((await call(base, 'GET', '/mcp-tasks', basic)).status).toBe(200);
        expect((await call(base, 'GET', '/mcp-tasks/api/tasks', basic)).status).toBe(200);
      } finally {
        await running.close();
      }
    },
  );
});

describe('task console: registration and stores', () => {
  it('refuses at boot a console path equal to the endpoint’s, and a console without guards', () => {
    expect(() => TasksModule.forRoot({}).constructor).not.toThrow();
    expect(() =>
      TasksModule.forRoot({
        path: 'ops',
        console: { path: '/ops/', guards: [AdminGuard] },
      } as never),
    ).toThrow(
      new TasksConfigError(
        'console.path must differ from the MCP endpoint\'s path, got "/ops/" for both',
      ),
    );
    expect(() => TasksModule.forRoot({ console: { path: 'mcp', guards: [] } } as never)).toThrow(
      TasksConfigError,
    );
    expect(() => TasksModule.forRoot({ console: {} } as never)).toThrow(
      /console.guards is required/,
    );
    expect(() => TasksModule.forRoot({ console: { guards: [42] } } as never)).toThrow(
      /console.guards must be an array of guard classes or instances/,
    );
    expect(() => TasksModule.forRoot({ console: { guards: [], colour: 'red' } } as never)).toThrow(
      /console: unknown option colour/,
    );
  });

  it('without listAll in the store, the listing asks for an owner (400, ownerRequired) and lists by owner', async () => {
    class OwnerOnlyStore extends InMemoryTaskStore {}
    (OwnerOnlyStore.prototype as { listAll?: unknown }).listAll = undefined;
    const running = await startApp(consoleApp({}, { store: new OwnerOnlyStore() }), 'express');
    try {
      const base = new URL('/', running.url).href;
      const tasks = running.app.get(TasksService);
      expect(tasks.canListAll).toBe(false);
      const record = await tasks.create({ principal: 'gina' }, {}, { toolName: 'x' });
      const all = await call(base, 'GET', '/mcp-tasks/api/tasks', ADMIN);
      expect(all.status).toBe(400);
      expect(all.json()).toMatchObject({ ownerRequired: true });
      expect(String(all.json().message)).toMatch(/filter by owner/);
      const mine = await call(base, 'GET', '/mcp-tasks/api/tasks?owner=gina', ADMIN);
      expect((mine.json().tasks as { taskId: string }[]).map((t) => t.taskId)).toEqual([
        record.taskId,
      ]);
    } finally {
      await running.close();
    }
  });

  it.each(ADAPTERS)(
    'the app shuts down promptly with a stream open (%s, no forceCloseConnections), ending it',
    async (adapter) => {
      const moduleRef = await Test.createTestingModule({ imports: [consoleApp()] }).compile();
      const app = moduleRef.createNestApplication(
        adapter === 'express' ? new ExpressAdapter() : new FastifyAdapter(),
        { logger: false },
      );
      await app.listen(0, '127.0.0.1');
      const { port } = app.getHttpServer().address() as { port: number };
      const stream = await openStream(`http://127.0.0.1:${port}/`, '/mcp-tasks/api/stream', ADMIN);
      await stream.waitFor(/: connected/);
      const started = Date.now();
      await app.close();
      const took = Date.now() - started;
      await stream.ended;
      expect(took).toBeLessThan(1_000);
    },
  );

  it('is off by default: no route, nothing listens', async () => {
    const running = await startApp(consoleApp({}, { console: undefined }), 'express');
    try {
      const base = new URL('/', running.url).href;
      expect((await call(base, 'GET', '/mcp-tasks', ADMIN)).status).toBe(404);
    } finally {
      await running.close();
    }
  });
});
