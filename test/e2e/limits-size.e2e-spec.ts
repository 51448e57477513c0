/**
 * `maxTaskBytes` and `maxTasksPerOwner` on the wire, over real HTTP on both adapters: a
 * `tasks/update` too large is -32602 in band naming the limit and changes nothing, a 2025-11-25
 * input answer too large is dropped (the task keeps waiting), and a task tool call beyond the
 * owner's quota is -32603 in band naming it, on both revisions, while another principal goes on.
 */
import { Injectable, Module, type Type } from '@nestjs/common';
import {
  type TaskContext,
  TaskTool,
  TasksModule,
  type TasksModuleOptions,
  TasksService,
} from '../../src/index.js';
import { ADAPTERS, type RunningApp, startApp } from '../support/app.js';
import { leak, mcpRequest, post } from '../support/raw.js';
import { legacyHeaders } from '../support/wire.js';

/** `Authorization: Bearer <name>` makes `<name>` the principal. */
const principal = (request: unknown): string | undefined => {
  const header = (request as { headers: Record<string, string | undefined> }).headers.authorization;
  return header === undefined ? undefined : /^Bearer\s+(\S+)$/i.exec(header)?.[1];
};

@Injectable()
class HoldTools {
  /** Runs until cancelled: a task that stays live. */
  @TaskTool({ name: 'hold' })
  async hold(_input: unknown, task: TaskContext): Promise<never> {
    return await new Promise<never>((_, reject) =>
      task.signal.addEventListener('abort', () => reject(task.signal.reason), { once: true }),
    );
  }
}

function sizedModule(options: TasksModuleOptions): Type<unknown> {
  @Module({
    imports: [
      // Calls are left running: closing the app hands them over at once.
      TasksModule.forRoot({ principal, janitor: false, shutdown: { drainMs: 0 }, ...options }),
    ],
    providers: [HoldTools],
  })
  class SizedTestModule {}
  return SizedTestModule;
}

const nameRequest = {
  name: {
    method: 'elicitation/create' as const,
    params: {
      message: 'Name?',
      requestedSchema: {
        type: 'object' as const,
        properties: { name: { type: 'string' as const } },
      },
    },
  },
};
const answer = (name: string) => ({ action: 'accept', content: { name } });

describe.each(ADAPTERS)('maxTaskBytes over HTTP (%s)', (adapter) => {
  let app: RunningApp;
  let tasks: TasksService;
  beforeAll(async () => {
    app = await startApp(sizedModule({ maxTaskBytes: 50_000 }), adapter);
    tasks = app.app.get(TasksService);
  });
  afterAll(() => app.close());

  it('a tasks/update too large: HTTP 200, -32602 naming the limit; the task unchanged, a small answer taken', async () => {
    const task = await tasks.create({ principal: 'alice' });
    await tasks.requireInput(task.taskId, nameRequest);
    const before = await tasks.get(task.taskId, { principal: 'alice' });
    const big = await post(
      app.url,
      mcpRequest(
        'tasks/update',
        { taskId: task.taskId, inputResponses: { name: answer('x'.repeat(60_000)) } },
        { principal: 'alice' },
      ),
    );
    expect(big.status).toBe(200);
    expect(big.json).toMatchObject({
      id: 1,
      error: {
        code: -32602,
        message: expect.stringMatching(/over maxTaskBytes \(50000\)$/),
        data: { limit: 'maxTaskBytes', max: 50_000 },
      },
    });
    expect(leak(big.text)).toBeUndefined();
    expect(await tasks.get(task.taskId, { principal: 'alice' })).toEqual(before);
    const small = await post(
      app.url,
      mcpRequest(
        'tasks/update',
        { taskId: task.taskId, inputResponses: { name: answer('Ada') } },
        { principal: 'alice' },
      ),
    );
    expect(small.json).toMatchObject({ result: { resultType: 'complete' } });
    expect((await tasks.get(task.taskId, { principal: 'alice' })).status).toBe('working');
  });

  it('a 2025-11-25 input answer too large is dropped: 202, the task still waits for it', async () => {
    const task = await tasks.create({ principal: 'alice' });
    await tasks.requireInput(task.taskId, nameRequest);
    const before = await tasks.get(task.taskId, { principal: 'alice' });
    const response = await fetch(app.url, {
      method: 'POST',
      headers: legacyHeaders('alice'),
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: `nestjs-mcp-tasks/input:${task.taskId}:name`,
        result: answer('x'.repeat(60_000)),
      }),
    });
    expect(response.status).toBe(202);
    expect(await tasks.get(task.taskId, { principal: 'alice' })).toEqual(before);
  });
});

describe.each(ADAPTERS)('maxTasksPerOwner over HTTP (%s)', (adapter) => {
  let app: RunningApp;
  beforeAll(async () => {
    app = await startApp(sizedModule({ maxTasksPerOwner: 2 }), adapter);
  });
  afterAll(() => app.close());

  const call2026 = (who: string) =>
    post(app.url, mcpRequest('tools/call', { name: 'hold', arguments: {} }, { principal: who }));
  const call2025 = async (who: string) => {
    const response = await fetch(app.url, {
      method: 'POST',
      headers: legacyHeaders(who, 'application/json'),
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/call',
        params: { name: 'hold', arguments: {}, task: { ttl: 60_000 } },
      }),
    });
    return { status: response.status, body: (await response.json()) as Record<string, unknown> };
  };
  const quota = {
    code: -32603,
    message: 'Task quota reached (maxTasksPerOwner 2)',
    data: { limit: 'maxTasksPerOwner', max: 2 },
  };

  it('an owner whose tasks all run is refused in band on both revisions; another owner is served', async () => {
    expect((await call2026('mallory')).json).toMatchObject({ result: { resultType: 'task' } });
    expect((await call2025('mallory')).body).toMatchObject({
      result: { task: { status: 'working' } },
    });
    const refused = await call2026('mallory');
    expect(refused.status).toBe(200);
    expect(refused.json).toMatchObject({ error: quota });
    const legacy = await call2025('mallory');
    expect(legacy.status).toBe(200);
    expect(legacy.body).toMatchObject({ error: quota });
    expect((await call2026('alice')).json).toMatchObject({ result: { resultType: 'task' } });
  });

  it("a finished task makes room: cancelling one of the owner's lets the next call in", async () => {
    const first = await call2026('bob');
    await call2026('bob');
    expect((await call2026('bob')).json).toMatchObject({ error: quota });
    const taskId = (first.json as { result: { taskId: string } }).result.taskId;
    const cancelled = await post(
      app.url,
      mcpRequest('tasks/cancel', { taskId }, { principal: 'bob' }),
    );
    expect(cancelled.json).toMatchObject({ result: { resultType: 'complete' } });
    expect((await call2026('bob')).json).toMatchObject({ result: { resultType: 'task' } });
    const gone = await post(app.url, mcpRequest('tasks/get', { taskId }, { principal: 'bob' }));
    expect(gone.json).toMatchObject({ error: { code: -32602, message: 'Task not found' } });
  });
});
