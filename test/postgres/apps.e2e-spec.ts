import { Injectable, Module, type Type } from '@nestjs/common';
import * as z from 'zod/v4';
import { type TaskContext, TaskTool, TasksModule } from '../../src/index.js';
import { TaskNotifier, TaskStore } from '../../src/entries/store.js';
import {
  PostgresTaskNotifier,
  PostgresTaskStore,
  postgresNotifier,
} from '../../src/postgres/index.js';
import { type RunningApp, startApp } from '../support/app.js';
import { eventually, openListen, rpc, type SseReader } from '../support/sse.js';
import type { JsonRpcMessage } from '../support/wire.js';
import { canStopServer, startTestPostgres, type TestPostgres } from '../support/postgres-server.js';

/**
 * Two Nest apps sharing one private PostgreSQL through PostgresTaskStore and the PostgreSQL
 * notifier: what one instance writes, the other reads, answers, cancels and hears about; while
 * PostgreSQL is down every request answers the store-unavailable error, and the apps recover.
 */

/** Releases of `wait_for_signal` calls, by gate name. */
const gates = new Map<string, () => void>();

@Injectable()
class PostgresTools {
  /** Works until the test opens its gate (then completes) or until it is cancelled. */
  @TaskTool({ name: 'wait_for_signal', input: z.object({ gate: z.string() }), pollIntervalMs: 100 })
  async waitForSignal(input: { gate: string }, task: TaskContext) {
    await task.progress('waiting for the signal');
    await new Promise<void>((resolve, reject) => {
      gates.set(input.gate, resolve);
      task.signal.addEventListener('abort', () => reject(task.signal.reason), { once: true });
    });
    return { content: [{ type: 'text', text: `released ${input.gate}` }] };
  }
}

/** `Authorization: Bearer <name>` makes `<name>` the principal. */
const principal = (request: unknown): string | undefined => {
  const header = (request as { headers: Record<string, string | undefined> }).headers.authorization;
  return header === undefined ? undefined : /^Bearer\s+(\S+)$/i.exec(header)?.[1];
};

function postgresModule(url: string): Type<unknown> {
  const connection = { connection: url, schema: 'apps', timeoutMs: 1_000 };
  @Module({
    imports: [
      TasksModule.forRoot({
        principal,
        janitor: false,
        store: new PostgresTaskStore(connection),
        notifier: postgresNotifier(connection),
      }),
    ],
    providers: [PostgresTools],
  })
  class PostgresTestModule {}
  return PostgresTestModule;
}

async function callTool(url: string, who: string, gate: string): Promise<string> {
  const { status, body } = await rpc(
    url,
    'tools/call',
    { name: 'wait_for_signal', arguments: { gate } },
    { principal: who },
  );
  expect(status).toBe(200);
  if (body.result?.resultType !== 'task') throw new Error(`tools/call: ${JSON.stringify(body)}`);
  return body.result.taskId as string;
}

async function getTask(url: string, who: string, taskId: string): Promise<Record<string, unknown>> {
  const { body } = await rpc(url, 'tasks/get', { taskId }, { principal: who });
  if (body.result === undefined) throw new Error(`tasks/get: ${JSON.stringify(body)}`);
  return body.result;
}

describe('two instances sharing one PostgreSQL', () => {
  let postgres: TestPostgres;
  let a: RunningApp;
  let b: RunningApp;
  const streams: SseReader[] = [];

  beforeAll(async () => {
    postgres = await startTestPostgres();
    a = await startApp(postgresModule(postgres.url), 'express');
    b = await startApp(postgresModule(postgres.url), 'express');
    for (const app of [a, b]) {
      expect(app.app.get(TaskStore)).toBeInstanceOf(PostgresTaskStore);
      await app.app.get<PostgresTaskNotifier>(TaskNotifier).ready;
    }
  }, 60_000);

  afterEach(async () => {
    for (const stream of streams.splice(0)) await stream.close();
    for (const open of gates.values()) open();
    gates.clear();
  });

  afterAll(async () => {
    const stores = [a, b].map((app) => app?.app.get<PostgresTaskStore>(TaskStore));
    await a?.close();
    await b?.close();
    await postgres?.stop();
    // The pools the stores made are ended with their app.
    for (const store of stores) expect(store?.pool.ended).toBe(true);
  });

  it('a task created on A is read and cancelled on B by its owner, and by no one else', async () => {
    const taskId = await callTool(a.url, 'alice', 'one');
    await eventually(
      async () =>
        (await getTask(b.url, 'alice', taskId)).statusMessage === 'waiting for the signal' ||
        undefined,
      5_000,
      'progress on B',
    );
    const foreign = await rpc(b.url, 'tasks/get', { taskId }, { principal: 'bob' });
    expect(foreign.body.error).toEqual({ code: -32602, message: 'Task not found' });
    const cancel = await rpc(b.url, 'tasks/cancel', { taskId }, { principal: 'alice' });
    expect(cancel.body.result?.resultType).toBe('complete');
    expect((await getTask(a.url, 'alice', taskId)).status).toBe('cancelled');
  });

  it('a listen stream on B hears the completion that happened on A, and never a foreign task', async () => {
    const mine = await callTool(a.url, 'alice', 'mine');
    const foreign = await callTool(a.url, 'bob', 'foreign');
    const response = await openListen(b.url, { principal: 'alice', taskIds: [mine, foreign] });
    if (response.stream === undefined) throw new Error(`listen: HTTP ${response.status}`);
    const stream = response.stream;
    streams.push(stream);
    const ack = await stream.next();
    expect(ack.params!.notifications).toEqual({ taskIds: [mine] });
    await eventually(
      () => (gates.has('foreign') && gates.has('mine')) || undefined,
      5_000,
      'gates',
    );
    gates.get('foreign')!();
    gates.get('mine')!();
    let completed: JsonRpcMessage | undefined;
    while (completed === undefined) {
      const message = await stream.next(5_000);
      expect(message.params!.taskId).toBe(mine);
      if (message.params!.status === 'completed') completed = message;
    }
    expect(completed.params).toMatchObject({
      status: 'completed',
      result: { content: [{ type: 'text', text: 'released mine' }] },
    });
    for (const frame of stream.frames) expect(frame.raw).not.toContain(foreign);
  });

  // It stops and starts the server: only on a private one.
  (canStopServer ? it : it.skip)(
    'while PostgreSQL is down every request answers "Task store unavailable" (HTTP 200), and the apps recover',
    async () => {
      const taskId = await callTool(a.url, 'alice', 'down');
      await postgres.kill();
      try {
        for (const app of [a, b]) {
          const get = await rpc(app.url, 'tasks/get', { taskId }, { principal: 'alice' });
          expect(get.status).toBe(200);
          expect(get.body.error).toEqual({ code: -32603, message: 'Task store unavailable' });
          const call = await rpc(
            app.url,
            'tools/call',
            { name: 'wait_for_signal', arguments: { gate: 'never' } },
            { principal: 'alice' },
          );
          expect(call.status).toBe(200);
          expect(call.body.error).toMatchObject({ code: -32603 });
          expect(JSON.stringify(call.body)).not.toMatch(/ECONNREFUSED|at .*\.js/);
        }
      } finally {
        await postgres.start();
      }
      for (const app of [a, b]) {
        await eventually(
          async () => (await getTask(app.url, 'alice', taskId)).status === 'working' || undefined,
          10_000,
          'the task again',
        );
      }
    },
  );
});
