/**
 * Issue 35, friction 4: the package client must not cancel what it follows. `close()` closes the
 * connection and leaves the tasks running (a second client reads them `working`, then
 * `completed`); the first client's waits reject at once with `TaskDetachedError`. `detach()` lets
 * one task go, and racing the task's completion it never cancels it and never leaves a wait hanging.
 */
import { Injectable, Module } from '@nestjs/common';
import * as z from 'zod/v4';
import { TaskTool, type TaskContext, TasksModule } from '../../src/index.js';
import {
  connectTasksClient,
  type TaskCallOutcome,
  TaskDetachedError,
  type TasksClient,
} from '../../src/client/index.js';
import { bearerPrincipal } from '../support/bearer.guard.js';
import { type RunningApp, startApp } from '../support/app.js';
import { textOf } from '../support/official-client.js';
import { rejection, sleep } from '../support/helpers.js';

/** Tasks whose method saw its signal abort (cancelled on the server). */
const cancelled: string[] = [];
/** Releases the `gated` task of a label. */
const gates = new Map<string, () => void>();

@Injectable()
class Tools {
  /** Runs until the test opens its gate. */
  @TaskTool({ name: 'gated', pollIntervalMs: 100, input: z.object({ label: z.string() }) })
  async gated(input: { label: string }, task: TaskContext) {
    task.signal.addEventListener('abort', () => cancelled.push(task.taskId), { once: true });
    await task.progress('Waiting for the gate');
    await new Promise<void>((open) => gates.set(input.label, open));
    return `opened ${input.label}`;
  }

  /** Ends after `ms`: a detach lands before, during or after its completion. */
  @TaskTool({ name: 'quick', pollIntervalMs: 20, input: z.object({ ms: z.number() }) })
  async quick(input: { ms: number }, task: TaskContext) {
    task.signal.addEventListener('abort', () => cancelled.push(task.taskId), { once: true });
    await sleep(input.ms);
    return `slept ${input.ms}`;
  }
}

@Module({
  imports: [
    TasksModule.forRoot({
      principal: bearerPrincipal,
      janitor: false,
      shutdown: { drainMs: 0 },
    }),
  ],
  providers: [Tools],
})
class ServerModule {}

/** Waits for `promise`, failing when it takes longer than `ms` (a hang is a failure, not a timeout). */
async function within<T>(ms: number, promise: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} still pending after ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** Waits until `check` holds (fails after 5 s). */
async function until(check: () => Promise<boolean>, what: string): Promise<void> {
  const deadline = Date.now() + 5_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`never: ${what}`);
    await sleep(20);
  }
}

describe('TasksClient leaves tasks running (issue 35)', () => {
  let app: RunningApp;
  const clients: TasksClient[] = [];
  const connect = async (): Promise<TasksClient> => {
    const mcp = await connectTasksClient(app.url, {
      headers: { Authorization: 'Bearer alice' },
      retry: false,
    });
    clients.push(mcp);
    return mcp;
  };

  beforeAll(async () => {
    app = await startApp(ServerModule, 'express');
  });

  afterAll(async () => {
    for (const mcp of clients) await mcp.close();
    for (const open of gates.values()) open();
    await app?.close();
  });

  it('close(): the task keeps running, a second client reads it working then completed; result() rejects with TaskDetachedError at once', async () => {
    const first = await connect();
    const call = await first.callTool('gated', { label: 'close' });
    const taskId = call.taskId!;
    await until(async () => gates.has('close'), 'the tool started');
    const pending = rejection(call.result());
    const outcome = call.outcome();

    const closing = Date.now();
    await first.close();
    const error = (await within(1_000, pending, 'result() after close()')) as TaskDetachedError;
    const rejectedAfterMs = Date.now() - closing;
    expect(error).toBeInstanceOf(TaskDetachedError);
    expect(error.name).toBe('TaskDetachedError');
    expect(error.taskId).toBe(taskId);
    expect(error.url).toBe(app.url);
    expect(error.reason).toBe('close');
    expect(error.message).toContain(`task ${taskId} keeps running on the server`);
    expect(error.message).toContain('follow(taskId) on a new client');
    expect(await outcome).toEqual({ status: 'detached', error });
    expect(rejectedAfterMs).toBeLessThan(1_000);

    const second = await connect();
    // Not cancelled: still working, and the server never aborted it.
    await sleep(200);
    expect((await second.getTask(taskId)).status).toBe('working');
    expect(cancelled).not.toContain(taskId);

    const followed = await second.follow(taskId);
    expect(followed.taskId).toBe(taskId);
    gates.get('close')!();
    expect(textOf(await within(5_000, followed.result(), 'the second client’s result()'))).toBe(
      'opened close',
    );
    expect((await second.getTask(taskId)).status).toBe('completed');
    expect(cancelled).not.toContain(taskId);
    // A task that has ended is followed too: its result at once.
    const ended = await second.follow(taskId);
    expect(textOf(await within(1_000, ended.result(), 'follow() of an ended task'))).toBe(
      'opened close',
    );
  });

  it('detach(): one task let go while the client goes on; result() rejects, the task completes', async () => {
    const mcp = await connect();
    const call = await mcp.callTool('gated', { label: 'detach' });
    const taskId = call.taskId!;
    await until(async () => gates.has('detach'), 'the tool started');
    const seen: string[] = [];
    const iterating = (async () => {
      for await (const task of call) seen.push(task.status);
    })();
    await call.detach();
    await within(1_000, iterating, 'for await over a detached call');
    expect(seen).toEqual(['working']);
    const error = (await within(1_000, rejection(call.result()), 'result()')) as TaskDetachedError;
    expect(error).toBeInstanceOf(TaskDetachedError);
    expect(error.reason).toBe('detach');
    expect(error.message).toContain(`task ${taskId} keeps running on the server`);

    // The client goes on: another call completes, the detached task is followed again.
    expect(textOf(await (await mcp.callTool('quick', { ms: 0 })).result())).toBe('slept 0');
    const again = await mcp.follow(taskId);
    gates.get('detach')!();
    expect(textOf(await within(5_000, again.result(), 'follow(taskId).result()'))).toBe(
      'opened detach',
    );
    expect(cancelled).not.toContain(taskId);
  });

  it('the call’s signal cancels: result() rejects at once with its reason, the server cancels the task', async () => {
    const mcp = await connect();
    const controller = new AbortController();
    const call = await mcp.callTool('gated', { label: 'signal' }, { signal: controller.signal });
    await until(async () => gates.has('signal'), 'the tool started');
    const reason = new Error('no longer needed');
    controller.abort(reason);
    expect(await within(1_000, rejection(call.result()), 'result()')).toBe(reason);
    expect((await within(5_000, call.outcome(), 'outcome()')).status).toBe('cancelled');
    expect((await mcp.getTask(call.taskId!)).status).toBe('cancelled');
    await until(async () => cancelled.includes(call.taskId!), "the method's signal aborted");
    gates.get('signal')!();
  });

  it('detach() racing the task’s completion: never cancelled, never hanging', async () => {
    const mcp = await connect();
    const outcomes = new Map<string, TaskCallOutcome['status']>();
    const ids: string[] = [];
    // Detaches land before, at and after the tool's end (and after the client saw it).
    await Promise.all(
      Array.from({ length: 24 }, async (_, i) => {
        const call = await mcp.callTool('quick', { ms: (i % 6) * 10 });
        ids.push(call.taskId!);
        await sleep((i * 11) % 120);
        const detaching = call.detach();
        const outcome = await within(2_000, call.outcome(), `outcome() of race ${i}`);
        await within(2_000, detaching, `detach() of race ${i}`);
        outcomes.set(call.taskId!, outcome.status);
        if (outcome.status === 'detached') {
          expect(outcome.error).toBeInstanceOf(TaskDetachedError);
          await expect(call.result()).rejects.toBe(outcome.error);
        } else {
          expect(outcome.status).toBe('completed');
          expect(textOf(await call.result())).toBe(`slept ${(i % 6) * 10}`);
        }
      }),
    );
    const statuses = new Set(outcomes.values());
    // Both sides of the race happened (the figure is in the file's report).
    expect(statuses).toEqual(new Set(['completed', 'detached']));
    for (const id of ids) {
      await until(async () => (await mcp.getTask(id)).status === 'completed', `${id} completed`);
    }
    expect(cancelled.filter((id) => ids.includes(id))).toEqual([]);
  });

  it('close() racing completions: nothing cancelled, nothing hanging', async () => {
    const mcp = await connect();
    const calls = await Promise.all(
      Array.from({ length: 8 }, (_, i) => mcp.callTool('quick', { ms: i * 5 })),
    );
    await sleep(15);
    await mcp.close();
    for (const call of calls) {
      const outcome = await within(1_000, call.outcome(), 'outcome() after close()');
      expect(['completed', 'detached']).toContain(outcome.status);
    }
    const reader = await connect();
    for (const call of calls) {
      await until(
        async () => (await reader.getTask(call.taskId!)).status === 'completed',
        `${call.taskId} completed`,
      );
    }
    expect(cancelled.filter((id) => calls.some((call) => call.taskId === id))).toEqual([]);
    await expect(mcp.callTool('quick', { ms: 0 })).rejects.toThrow(/closed/);
  });
});
