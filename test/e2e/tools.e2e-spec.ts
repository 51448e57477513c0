import { jest } from '@jest/globals';
import {
  type CanActivate,
  type ExecutionContext,
  Injectable,
  Logger,
  Module,
  Scope,
} from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { IsString } from 'class-validator';
import * as z from 'zod/v4';
import { TasksConfigError } from '../../src/errors.js';
import { TaskTool, type TaskContext, TasksModule, TasksService } from '../../src/index.js';
import { TaskToolRegistry } from '../../src/tools/task-tool.registry.js';
import { ADAPTERS, startApp, type RunningApp } from '../support/app.js';
import { declaredCapabilities, envelope, PROTOCOL_VERSION } from '../support/wire.js';

const META = (tasks: boolean) => envelope(declaredCapabilities(tasks), 'tools-spec');

interface RpcAnswer {
  status: number;
  body: {
    result?: Record<string, unknown> & { taskId?: string; status?: string };
    error?: { code: number; message: string; data?: unknown };
  };
  text: string;
}

async function rpc(
  url: string,
  method: string,
  params: Record<string, unknown>,
  options: { tasks?: boolean; headers?: Record<string, string> } = {},
): Promise<RpcAnswer> {
  const name = (params.name ?? params.taskId) as string | undefined;
  const response = await fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'mcp-protocol-version': PROTOCOL_VERSION,
      'mcp-method': method,
      ...(name !== undefined && { 'mcp-name': name }),
      ...options.headers,
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 7,
      method,
      params: { ...params, _meta: META(options.tasks ?? true) },
    }),
  });
  const text = await response.text();
  return { status: response.status, body: JSON.parse(text) as RpcAnswer['body'], text };
}

async function settle(url: string, taskId: string, headers?: Record<string, string>) {
  for (let i = 0; i < 200; i++) {
    const { body } = await rpc(url, 'tasks/get', { taskId }, { headers });
    if (!['working', 'input_required'].includes(body.result!.status!)) return body.result!;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error('task did not settle');
}

class NameInput {
  @IsString()
  name!: string;
}

const handedOff: string[] = [];
const started: string[] = [];

@Injectable()
class Tools {
  @TaskTool({ name: 'crash' })
  crash(): never {
    throw new Error('secret detail /srv/app/db.ts:12');
  }

  @TaskTool({ name: 'inline_hello', input: NameInput, whenClientLacksTasks: 'inline' })
  hello(input: NameInput, task: TaskContext) {
    return `Hello ${input.name} (inline: ${task.inline})`;
  }

  @TaskTool({ name: 'zod_tool', input: z.object({ n: z.number().int() }) })
  zod(input: { n: number }) {
    started.push('zod_tool');
    return { content: [{ type: 'text', text: String(input.n * 2) }] };
  }

  @TaskTool({ name: 'hand_off' })
  handOff(_input: unknown, task: TaskContext) {
    task.handOff();
    handedOff.push(task.taskId);
    return 'ignored';
  }

  @TaskTool({ name: 'whoami' })
  whoami(_input: unknown, task: TaskContext) {
    return JSON.stringify(task.owner);
  }
}

/** An app guard: only callers with X-Api-Key: ok get in. */
@Injectable()
class ApiKeyGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const request = context.switchToHttp().getRequest<{ headers: Record<string, string> }>();
    return request.headers['x-api-key'] === 'ok';
  }
}

@Module({
  imports: [
    TasksModule.forRoot({
      guards: [ApiKeyGuard],
      principal: (request) => (request as { headers: Record<string, string> }).headers['x-user'],
      tenant: (request) => (request as { headers: Record<string, string> }).headers['x-tenant'],
      configure: (server) => {
        server.registerTool('plain', { description: 'plain' }, () => ({
          content: [{ type: 'text', text: 'plain' }],
        }));
      },
    }),
  ],
  providers: [Tools],
})
class ToolsModule {}

const key = { 'x-api-key': 'ok' };

describe.each(ADAPTERS)('task tools over HTTP (%s)', (adapter) => {
  let running: RunningApp;
  beforeAll(async () => {
    running = await startApp(ToolsModule, adapter);
  });
  afterAll(async () => {
    await running.close();
  });

  it("the app's guards run before every request to the endpoint", async () => {
    const refused = await fetch(running.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{}',
    });
    expect(refused.status).toBe(403);
    const allowed = await rpc(running.url, 'tools/list', {}, { headers: key });
    expect(allowed.status).toBe(200);
  });

  it('tools/list has the task tools and the plain tool of the configure hook', async () => {
    const { body } = await rpc(running.url, 'tools/list', {}, { headers: key });
    const names = (body.result!.tools as { name: string }[]).map((tool) => tool.name).sort();
    expect(names).toEqual(['crash', 'hand_off', 'inline_hello', 'plain', 'whoami', 'zod_tool']);
  });

  it('a throw without a JSON-RPC code fails the task with -32603 and a generic message; the detail stays in the log', async () => {
    const error = jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
    const { body } = await rpc(
      running.url,
      'tools/call',
      { name: 'crash', arguments: {} },
      { headers: key },
    );
    const done = await settle(running.url, body.result!.taskId!, key);
    expect(done.status).toBe('failed');
    expect(done.error).toEqual({ code: -32603, message: 'Internal error' });
    expect(JSON.stringify(done)).not.toContain('secret');
    expect(error).toHaveBeenCalledWith(expect.stringContaining('secret detail'));
    error.mockRestore();
  });

  it("'inline': a client without the extension gets the method's result directly", async () => {
    const { status, body } = await rpc(
      running.url,
      'tools/call',
      { name: 'inline_hello', arguments: { name: 'Ada' } },
      { tasks: false, headers: key },
    );
    expect(status).toBe(200);
    expect(body.result).toMatchObject({
      content: [{ type: 'text', text: 'Hello Ada (inline: true)' }],
    });
    expect(body.result).not.toHaveProperty('taskId');
  });

  it("'inline' tools still answer with a task to a client that declared the extension", async () => {
    const { body } = await rpc(
      running.url,
      'tools/call',
      { name: 'inline_hello', arguments: { name: 'Bo' } },
      { headers: key },
    );
    expect(body.result!.resultType).toBe('task');
    const done = await settle(running.url, body.result!.taskId!, key);
    expect(done.result).toMatchObject({ content: [{ text: 'Hello Bo (inline: false)' }] });
  });

  it("'reject' (default): a client without the extension gets -32021 and the method never runs", async () => {
    started.length = 0;
    const { status, body } = await rpc(
      running.url,
      'tools/call',
      { name: 'zod_tool', arguments: { n: 2 } },
      { tasks: false, headers: key },
    );
    expect(status).toBe(400);
    expect(body.error).toMatchObject({
      code: -32021,
      data: { requiredCapabilities: { extensions: { 'io.modelcontextprotocol/tasks': {} } } },
    });
    expect(started).toEqual([]);
  });

  it('a Standard Schema (zod) input validates arguments before the method runs', async () => {
    started.length = 0;
    const bad = await rpc(
      running.url,
      'tools/call',
      { name: 'zod_tool', arguments: { n: 1.5 } },
      { headers: key },
    );
    // The SDK answers invalid arguments with a tool error result, before any task exists.
    expect(bad.body.result).toMatchObject({ isError: true });
    expect(JSON.stringify(bad.body.result)).toContain('Input validation error');
    expect(bad.body.result?.taskId).toBeUndefined();
    expect(started).toEqual([]);
    const good = await rpc(
      running.url,
      'tools/call',
      { name: 'zod_tool', arguments: { n: 21 } },
      { headers: key },
    );
    const done = await settle(running.url, good.body.result!.taskId!, key);
    expect(done.result).toMatchObject({ content: [{ text: '42' }] });
  });

  it('hand-off: the return value does not complete the task; a worker drives it by id', async () => {
    const { body } = await rpc(
      running.url,
      'tools/call',
      { name: 'hand_off', arguments: {} },
      { headers: key },
    );
    const taskId = body.result!.taskId!;
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(handedOff).toContain(taskId);
    expect(
      (await rpc(running.url, 'tasks/get', { taskId }, { headers: key })).body.result!.status,
    ).toBe('working');
    await running.app
      .get(TasksService)
      .complete(taskId, { content: [{ type: 'text', text: 'by the worker' }] });
    const done = await settle(running.url, taskId, key);
    expect(done.result).toMatchObject({ content: [{ text: 'by the worker' }] });
  });

  it('the principal and tenant resolvers decide the owner; other owners see "Task not found"', async () => {
    const alice = { ...key, 'x-user': 'alice', 'x-tenant': 'acme' };
    const { body } = await rpc(
      running.url,
      'tools/call',
      { name: 'whoami', arguments: {} },
      { headers: alice },
    );
    const taskId = body.result!.taskId!;
    const done = await settle(running.url, taskId, alice);
    expect(done.result).toMatchObject({
      content: [{ text: '{"principal":"alice","tenant":"acme"}' }],
    });
    for (const other of [
      { ...key, 'x-user': 'alice', 'x-tenant': 'globex' },
      { ...key, 'x-user': 'bob', 'x-tenant': 'acme' },
      key,
    ]) {
      const foreign = await rpc(running.url, 'tasks/get', { taskId }, { headers: other });
      expect(foreign.body.error).toEqual({ code: -32602, message: 'Task not found' });
    }
  });
});

describe('task tool discovery', () => {
  it('duplicate tool names fail the boot', async () => {
    @Injectable()
    class A {
      @TaskTool({ name: 'same' })
      one() {}
    }
    @Injectable()
    class B {
      @TaskTool({ name: 'same' })
      two() {}
    }
    const moduleRef = await Test.createTestingModule({
      imports: [TasksModule.forRoot({ path: false })],
      providers: [A, B],
    }).compile();
    const failure = await moduleRef.init().then(
      () => null,
      (error: unknown) => error,
    );
    expect(failure).toBeInstanceOf(TasksConfigError);
    expect((failure as Error).message).toContain('a task tool named "same" exists already');
  });

  it('request-scoped providers serve their tools, queue-run ones as any queue-run tool', async () => {
    const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    @Injectable({ scope: Scope.REQUEST })
    class Scoped {
      @TaskTool({ name: 'scoped' })
      run() {}

      @TaskTool({ name: 'scoped_queued', queue: 'reports' })
      queued() {}
    }
    const moduleRef = await Test.createTestingModule({
      imports: [TasksModule.forRoot({ path: false })],
      providers: [Scoped],
    }).compile();
    // Registered, so an app without a task queue fails its boot naming the fix, as for any.
    const failure = await moduleRef.init().then(
      () => null,
      (error: unknown) => error,
    );
    expect(failure).toBeInstanceOf(TasksConfigError);
    expect((failure as Error).message).toContain('Task tools "scoped_queued" run on a queue');
    const registry = moduleRef.get(TaskToolRegistry);
    expect(registry.get('scoped')?.scoped).toBe(true);
    expect(registry.get('scoped_queued')?.scoped).toBe(true);
    expect(warn).not.toHaveBeenCalled();
    await moduleRef.close();
    warn.mockRestore();
  });

  it('an invalid tool name fails the boot', async () => {
    @Injectable()
    class Bad {
      @TaskTool({ name: 'has space' })
      run() {}
    }
    const moduleRef = await Test.createTestingModule({
      imports: [TasksModule.forRoot({ path: false })],
      providers: [Bad],
    }).compile();
    await expect(moduleRef.init()).rejects.toThrow(/name must be 1-128/);
  });
});

describe('shutdown with tool calls still running', () => {
  @Injectable()
  class Forever {
    @TaskTool({ name: 'forever' })
    async forever(_input: unknown, task: TaskContext) {
      await new Promise((_, reject) =>
        task.signal.addEventListener('abort', () => reject(task.signal.reason), { once: true }),
      );
    }
  }

  it.each([
    ['fail', 'failed'],
    ['leave', 'working'],
  ] as const)(
    "runningTasksOnShutdown '%s': app.close() ends once the drain is over and the task is %s",
    async (mode, status) => {
      @Module({
        imports: [
          TasksModule.forRoot({ runningTasksOnShutdown: mode, shutdown: { drainMs: 200 } }),
        ],
        providers: [Forever],
      })
      class ShutdownModule {}
      const running = await startApp(ShutdownModule, 'express');
      const { body } = await rpc(running.url, 'tools/call', { name: 'forever', arguments: {} });
      const taskId = body.result!.taskId!;
      const tasks = running.app.get(TasksService);
      const started = Date.now();
      await running.close();
      const took = Date.now() - started;
      expect(took).toBeGreaterThanOrEqual(190);
      expect(took).toBeLessThan(2_000);
      const after = await tasks.status(taskId);
      expect(after.status).toBe(status);
      if (mode === 'fail') {
        expect(after.error).toEqual({
          code: -32603,
          message: 'The server shut down before the task finished',
        });
      }
    },
  );
});
