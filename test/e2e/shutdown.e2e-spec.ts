import { afterEach, describe, expect, it } from '@jest/globals';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { Injectable, Module } from '@nestjs/common';
import { type TaskContext, TasksModule, TasksService, TaskTool } from '../../src/index.js';
import { TaskToolRunner } from '../../src/tools/task-tool.runner.js';
import { ADAPTERS, type RunningApp, startApp } from '../support/app.js';
import { mcpRequest, post } from '../support/raw.js';
import { eventually, openListen, rpc } from '../support/sse.js';
import { v1Client, v1Transport } from '../support/v1-client.js';
import { legacyHeaders, type JsonRpcMessage } from '../support/wire.js';

/**
 * A graceful shutdown of one instance, over real HTTP on both adapters, with the in-memory store:
 * `app.close()` while tool calls run. The drain lets a call that finishes within `drainMs`
 * complete with its own result, and fails one that runs longer with a clear error; during the
 * drain a new task-tool call is refused (2026-07-28: HTTP 503, Retry-After, -32000; 2025-11-25:
 * the same error on HTTP 200) while tasks/get and listen streams keep answering.
 */

const DRAIN_MS = 1_500;

/** Released by the test: the call it holds then finishes, with a result naming the release. */
class Gate {
  private open!: (text: string) => void;
  readonly opened = new Promise<string>((resolve) => (this.open = resolve));
  release(text: string): void {
    this.open(text);
  }
}
let gate = new Gate();

@Injectable()
class ShutdownTools {
  @TaskTool({ name: 'gated' })
  async gated() {
    const text = await gate.opened;
    return { content: [{ type: 'text' as const, text }] };
  }

  @TaskTool({ name: 'forever' })
  async forever(_input: unknown, task: TaskContext) {
    await new Promise((_, reject) =>
      task.signal.addEventListener('abort', () => reject(task.signal.reason), { once: true }),
    );
  }
}

@Module({
  imports: [TasksModule.forRoot({ shutdown: { drainMs: DRAIN_MS } })],
  providers: [ShutdownTools],
})
class ShutdownModule {}

let running: RunningApp | undefined;
afterEach(async () => {
  await running?.close();
  running = undefined;
});

async function callTool(url: string, name: string): Promise<string> {
  const { status, body } = await rpc(url, 'tools/call', { name, arguments: {} });
  expect(status).toBe(200);
  const taskId = body.result?.taskId;
  if (typeof taskId !== 'string') throw new Error(`tools/call ${name}: ${JSON.stringify(body)}`);
  return taskId;
}

/** A 2025-11-25 task-augmented `tools/call`, as the v1 SDK sends it. */
function legacyCall(url: string, name: string) {
  return post(url, {
    headers: legacyHeaders('anyone'),
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 7,
      method: 'tools/call',
      params: { name, arguments: {}, task: { ttl: 60_000 } },
    }),
  });
}

const SHUTTING_DOWN = {
  code: -32000,
  message: 'The server is shutting down and starts no new task: call the tool again',
  data: { reason: 'shutting_down', retryAfterMs: 1_000 },
};

describe.each(ADAPTERS)('graceful shutdown of one instance (%s)', (adapter) => {
  it('drains: a call that ends within drainMs completes, a longer one fails; new calls are refused, reads go on', async () => {
    gate = new Gate();
    running = await startApp(ShutdownModule, adapter);
    const { url, app } = running;
    const tasks = app.get(TasksService);
    const runner = app.get(TaskToolRunner, { strict: false });
    const finishing = await callTool(url, 'gated');
    const longer = await callTool(url, 'forever');
    const listen = await openListen(url, { taskIds: [finishing] });
    const stream = listen.stream!;
    await stream.next(); // the acknowledgement
    const v1 = v1Client();
    await v1.connect(v1Transport(url, 'anyone'));

    const started = Date.now();
    const closing = running.close();
    running = undefined;
    await eventually(() => (runner.stopping ? true : undefined), 1_000, 'the drain');

    // A new task-tool call, in either era, is refused: nothing is created.
    const before = (await tasks.listAll({ limit: 100 })).tasks.length;
    const refused = await post(
      url,
      mcpRequest('tools/call', { name: 'gated', arguments: {} }, { id: 'late' }),
    );
    expect(refused.status).toBe(503);
    expect(refused.headers['retry-after']).toBe('1');
    expect(refused.json).toEqual({ jsonrpc: '2.0', id: 'late', error: SHUTTING_DOWN });
    // Without the extension (the call would run inline) it is refused the same way.
    const inline = await rpc(
      url,
      'tools/call',
      { name: 'gated', arguments: {} },
      {
        declareTasks: false,
      },
    );
    expect(inline.status).toBe(503);
    expect(inline.body.error).toEqual(SHUTTING_DOWN);
    const legacy = await legacyCall(url, 'gated');
    expect(legacy.status).toBe(200);
    expect(legacy.json).toEqual({ jsonrpc: '2.0', id: 7, error: SHUTTING_DOWN });
    // The v1 SDK reports it as the call's error, and its session goes on.
    const v1Refusal = await v1.callTool({ name: 'gated', arguments: {} }).catch((e: unknown) => e);
    expect(v1Refusal).toBeInstanceOf(McpError);
    expect((v1Refusal as McpError).code).toBe(-32000);
    expect((v1Refusal as McpError).message).toContain(SHUTTING_DOWN.message);
    expect(await v1.experimental.tasks.getTask(finishing)).toMatchObject({ status: 'working' });
    expect((await tasks.listAll({ limit: 100 })).tasks.length).toBe(before);

    // Reads and the listen stream go on; the call finishes within the drain with its result.
    const read = await rpc(url, 'tasks/get', { taskId: finishing });
    expect(read.status).toBe(200);
    expect(read.body.result?.status).toBe('working');
    gate.release('finished in the drain');
    const heard = await stream.waitForFrame(
      (frame) => (frame.message?.params as { status?: string } | undefined)?.status === 'completed',
    );
    expect((heard.message as JsonRpcMessage).params).toMatchObject({ taskId: finishing });
    const done = await rpc(url, 'tasks/get', { taskId: finishing });
    expect(done.body.result).toMatchObject({
      status: 'completed',
      result: { content: [{ type: 'text', text: 'finished in the drain' }] },
    });

    // The call still running when the drain is over fails with a clear error.
    await closing;
    const took = Date.now() - started;
    expect(took).toBeGreaterThanOrEqual(DRAIN_MS - 10);
    expect(took).toBeLessThan(DRAIN_MS + 1_500);
    expect(await tasks.status(finishing)).toMatchObject({
      status: 'completed',
      result: { content: [{ type: 'text', text: 'finished in the drain' }] },
    });
    expect(await tasks.status(longer)).toMatchObject({
      status: 'failed',
      error: { code: -32603, message: 'The server shut down before the task finished' },
    });
    await stream.waitForEnd();
    await v1.close();
  });

  it('ends the drain as soon as the running calls are done', async () => {
    gate = new Gate();
    running = await startApp(ShutdownModule, adapter);
    const { url, app } = running;
    const tasks = app.get(TasksService);
    const taskId = await callTool(url, 'gated');
    const started = Date.now();
    const closing = running.close();
    running = undefined;
    setTimeout(() => gate.release('done early'), 200);
    await closing;
    const took = Date.now() - started;
    expect(took).toBeGreaterThanOrEqual(190);
    expect(took).toBeLessThan(DRAIN_MS);
    expect((await tasks.status(taskId)).status).toBe('completed');
  });
});
