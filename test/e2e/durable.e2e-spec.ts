/**
 * Resume instead of fail (issue 39, item 3): a `@TaskTool({ durable: true })` call whose instance
 * "dies" (its lease stops being renewed: TasksLease.stop, what a killed process amounts to for
 * the others) is run again by another instance once the lease has run out, from its journal: its
 * completed steps return what they returned, the answers it took come back, the task keeps its
 * id and completes. Apps sharing a real Redis, then a real PostgreSQL, over real HTTP; a short
 * lease (600 ms). The process actually killed (SIGKILL) is test/multiprocess/durable.e2e-spec.ts.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { Injectable, Module, type Type } from '@nestjs/common';
import * as z from 'zod/v4';
import {
  type TaskContext,
  type TaskRecord,
  TaskTool,
  TasksModule,
  TasksService,
} from '../../src/index.js';
import { TaskStore } from '../../src/entries/store.js';
import type { TasksModuleExtras } from '../../src/entries/options.js';
import { TasksLease } from '../../src/janitor/tasks.lease.js';
import { MAX_RUNS, TaskToolRunner } from '../../src/tools/task-tool.runner.js';
import { TaskToolRegistry } from '../../src/tools/task-tool.registry.js';
import { type RunningApp, startApp } from '../support/app.js';
import { bearerPrincipal } from '../support/bearer.guard.js';
import { KeptLog } from '../support/kept-log.js';
import { elicit } from '../support/helpers.js';
import { eventually, rpc } from '../support/sse.js';
import { STORES, type Storage } from '../support/stores.js';

const LEASE_MS = 600;

/** Calls of each step's function, by `taskId/step`; runs of each task's method, by task id. */
const calls = new Map<string, number>();
const runs = new Map<string, number>();
const count = (map: Map<string, number>, key: string): number => {
  const n = (map.get(key) ?? 0) + 1;
  map.set(key, n);
  return n;
};

/** Whether `done()` holds within `ms` (checked every 10 ms). */
const waitFor = async (done: () => boolean, ms: number): Promise<boolean> => {
  for (const end = Date.now() + ms; Date.now() < end;) {
    if (done()) return true;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  return done();
};

/** Why each blocked run's signal fired, by task id. */
const stoppedWith = new Map<string, string>();

/** Waits until the call's signal fires (what a run blocked mid-step does), then rejects. */
const blocked = (signal: AbortSignal, taskId?: string): Promise<never> =>
  new Promise((_, reject) => {
    const stop = (): void => {
      if (taskId !== undefined) stoppedWith.set(taskId, (signal.reason as Error).name);
      reject(signal.reason as Error);
    };
    if (signal.aborted) stop();
    signal.addEventListener('abort', stop, { once: true });
  });

@Injectable()
class DurableTools {
  /** Three steps; the first run blocks in the second (its instance then "dies"). */
  @TaskTool({ name: 'report', durable: true, input: z.object({ month: z.string() }) })
  async report(input: { month: string }, task: TaskContext) {
    const run = count(runs, task.taskId);
    const fetched = await task.step('fetch', () => {
      count(calls, `${task.taskId}/fetch`);
      return { rows: 3, run };
    });
    await task.progress(`fetched ${fetched.rows} rows`);
    const charged = await task.step('charge', ({ signal }) => {
      count(calls, `${task.taskId}/charge`);
      if (run === 1) return blocked(signal, task.taskId);
      return waitFor(() => stoppedWith.has(task.taskId), 2_000).then((first) => ({
        id: `ch_${run}`,
        // Whether the first run, still going on the instance thought dead, had stopped by then.
        oldRunStopped: first,
      }));
    });
    const written = await task.step('write', () => {
      count(calls, `${task.taskId}/write`);
      return `report ${input.month} (run ${run})`;
    });
    return JSON.stringify({ fetched, charged, written });
  }

  /** Asks, then (first run) blocks after the question was asked. */
  @TaskTool({ name: 'ask', durable: true })
  async ask(_input: unknown, task: TaskContext) {
    const run = count(runs, task.taskId);
    const { name } = await task.requireInput({ name: elicit('Your name?') });
    const who = (name.content as { name: string }).name;
    return `hello ${who} (run ${run})`;
  }

  /** A step, a durable sleep, a step. */
  @TaskTool({ name: 'nap', durable: true, input: z.object({ ms: z.number().int() }) })
  async nap(input: { ms: number }, task: TaskContext) {
    const run = count(runs, task.taskId);
    const before = await task.step('before', () => {
      count(calls, `${task.taskId}/before`);
      return Date.now();
    });
    await task.sleep('cool', input.ms);
    const after = await task.step('after', () => {
      count(calls, `${task.taskId}/after`);
      return Date.now();
    });
    return JSON.stringify({ slept: after - before, run });
  }

  /** Sleeps long enough to park, and (wrongly) catches the park. */
  @TaskTool({ name: 'nap_caught', durable: true })
  async napCaught(_input: unknown, task: TaskContext) {
    count(runs, task.taskId);
    try {
      await task.sleep('cool', 2 * LEASE_MS + 100);
    } catch {
      return 'caught the park';
    }
    return 'slept';
  }

  /** Never ends on its own: its instance dies each time. */
  @TaskTool({ name: 'doomed', durable: true })
  async doomed(_input: unknown, task: TaskContext) {
    count(runs, task.taskId);
    return await blocked(task.signal);
  }

  /** The same as `report` without `durable`: failed, as before, when its instance dies. */
  @TaskTool({ name: 'plain' })
  async plain(_input: unknown, task: TaskContext) {
    count(runs, task.taskId);
    return await blocked(task.signal);
  }
}

function durableModule(
  parts: TasksModuleExtras,
  lease = true,
  cancellation: 'immediate' | 'cooperative' = 'immediate',
): Type<unknown> {
  @Module({
    imports: [
      TasksModule.forRoot({
        principal: bearerPrincipal,
        janitor: false,
        lease: lease && { ttlMs: LEASE_MS },
        shutdown: { drainMs: 0 },
        cancellation,
        ...parts,
      }),
    ],
    providers: [DurableTools],
  })
  class DurableModule {}
  return DurableModule;
}

interface Instance {
  running: RunningApp;
  url: string;
  service: TasksService;
  lease: TasksLease;
}

describe.each(['redis', 'postgres'])('durable calls resumed on the %s store', (name) => {
  let storage: Storage;
  const apps: Instance[] = [];

  beforeAll(async () => {
    storage = await STORES[name]!(`durable_${name}`);
  }, 60_000);

  afterEach(async () => {
    for (const app of apps.splice(0)) await app.running.close();
  });

  afterAll(async () => {
    await storage?.stop();
  });

  const start = async (
    cancellation: 'immediate' | 'cooperative' = 'immediate',
  ): Promise<Instance> => {
    const running = await startApp(durableModule(storage.parts(), true, cancellation), 'express');
    const instance = {
      running,
      url: running.url,
      service: running.app.get(TasksService),
      lease: running.app.get(TasksLease),
    };
    apps.push(instance);
    return instance;
  };

  const callTool = async (url: string, tool: string, args: Record<string, unknown> = {}) => {
    const { body } = await rpc(
      url,
      'tools/call',
      { name: tool, arguments: args },
      { principal: 'alice' },
    );
    if (body.result?.resultType !== 'task') throw new Error(`tools/call: ${JSON.stringify(body)}`);
    return body.result.taskId as string;
  };

  const ended = (instance: Instance, taskId: string, ms = 6_000) =>
    eventually(
      async () => {
        const task = await instance.service.status(taskId);
        return ['completed', 'failed', 'cancelled'].includes(task.status) ? task : undefined;
      },
      ms,
      `the end of ${taskId}`,
    );

  const textOf = (task: TaskRecord) => (task.result!.content[0] as { text: string }).text;

  it('runs the call again on another instance from its journal: done steps are not called again', async () => {
    const a = await start();
    const b = await start();
    // Each instance judges others only once it has renewed for a whole lease.
    await new Promise((resolve) => setTimeout(resolve, LEASE_MS));
    const taskId = await callTool(a.url, 'report', { month: 'May' });
    await eventually(async () => calls.get(`${taskId}/charge`), 3_000, 'the first charge');
    const before = await b.service.status(taskId);
    expect(before.heldBy).toBe(a.service.instanceId);
    expect(before.call).toEqual({ input: { month: 'May' } });
    expect(Object.keys(before.steps ?? {})).toEqual(['fetch']);

    a.lease.stop();
    const stoppedAt = Date.now();
    const task = await ended(b, taskId);
    const took = Date.now() - stoppedAt;
    expect(task.status).toBe('completed');
    expect(JSON.parse(textOf(task))).toEqual({
      fetched: { rows: 3, run: 1 },
      charged: { id: 'ch_2', oldRunStopped: true },
      written: 'report May (run 2)',
    });
    expect(runs.get(taskId)).toBe(2);
    // The first run, still going on the instance thought dead, stopped as the task moved, before
    // the second run's charge returned.
    expect(stoppedWith.get(taskId)).toBe('TaskMoved');
    expect(calls.get(`${taskId}/fetch`)).toBe(1);
    expect(calls.get(`${taskId}/charge`)).toBe(2);
    expect(calls.get(`${taskId}/write`)).toBe(1);
    // Within about 1.33 × the lease, with room for a noisy machine.
    expect(took).toBeLessThan(4 * LEASE_MS);
    // The finished task keeps nothing of the journal or the call.
    expect(task.steps).toBeUndefined();
    expect(task.call).toBeUndefined();
    expect(task.runs).toBe(2);
    console.log(`durable (${name}): resumed and completed ${took} ms after the lease stopped`);
  }, 20_000);

  it('parks while it waits for input; an answer sent after the asking instance died wakes it', async () => {
    const a = await start();
    const b = await start();
    await new Promise((resolve) => setTimeout(resolve, LEASE_MS));
    const taskId = await callTool(a.url, 'ask');
    // Asked, then parked: the instance that asked holds no running call.
    const runner = a.running.app.get(TaskToolRunner);
    const parked = await eventually(
      async () => {
        const task = await b.service.status(taskId);
        return task.status === 'input_required' &&
          task.heldBy?.startsWith('park:') &&
          runner.size === 0
          ? task
          : undefined;
      },
      3_000,
      'the park',
    );
    expect(parked.runs).toBe(1);
    a.lease.stop();
    const answeredAt = Date.now();
    const answer = await rpc(
      b.url,
      'tasks/update',
      { taskId, inputResponses: { name: { action: 'accept', content: { name: 'Ada' } } } },
      { principal: 'alice' },
    );
    expect(answer.body.error).toBeUndefined();
    const task = await ended(b, taskId);
    const woke = Date.now() - answeredAt;
    expect(textOf(task)).toBe('hello Ada (run 2)');
    // Asked once: the woken run took the answer instead of asking again; a wake is not a run.
    expect(task.usedInputKeys).toEqual(['name']);
    expect(task.runs).toBe(1);
    console.log(`durable (${name}): the parked task completed ${woke} ms after the answer`);
    expect(woke).toBeLessThan(2 * LEASE_MS);
  }, 20_000);

  // The 20 s on Redis; 3 s on PostgreSQL, which takes the same path, to keep the file short.
  const napMs = name === 'redis' ? 20_000 : 3_000;

  it(`a durable sleep of ${napMs} ms across a restart of every instance completes`, async () => {
    const a = await start();
    const b = await start();
    const calledAt = Date.now();
    const taskId = await callTool(a.url, 'nap', { ms: napMs });
    await eventually(
      async () => ((await b.service.status(taskId)).steps?.cool !== undefined ? true : undefined),
      3_000,
      'the sleep',
    );
    // Every instance stops (a graceful shutdown: the sleeping call is left to be resumed).
    for (const app of apps.splice(0)) await app.running.close();
    const c = await start();
    expect((await c.service.status(taskId)).status).toBe('working');
    const task = await ended(c, taskId, napMs + 8_000);
    expect(task.status).toBe('completed');
    const { slept, run } = JSON.parse(textOf(task)) as { slept: number; run: number };
    expect(run).toBe(2);
    expect(slept).toBeGreaterThanOrEqual(napMs);
    expect(Date.now() - calledAt).toBeGreaterThanOrEqual(napMs);
    expect(calls.get(`${taskId}/before`)).toBe(1);
    expect(calls.get(`${taskId}/after`)).toBe(1);
  }, 60_000);

  it('parks a long sleep out of memory: the task wakes on an instance at its end, its runs unchanged', async () => {
    const a = await start();
    const b = await start();
    await new Promise((resolve) => setTimeout(resolve, LEASE_MS));
    const calledAt = Date.now();
    const taskId = await callTool(a.url, 'nap', { ms: 3_000 });
    const runner = a.running.app.get(TaskToolRunner);
    const parked = await eventually(
      async () => {
        const task = await b.service.status(taskId);
        return task.heldBy?.startsWith('park:') && runner.size === 0 ? task : undefined;
      },
      2_000,
      'the park',
    );
    expect(parked.status).toBe('working');
    const task = await ended(b, taskId, 6_000);
    const wokeAfter = Date.now() - calledAt;
    expect(task.status).toBe('completed');
    const { slept, run } = JSON.parse(textOf(task)) as { slept: number; run: number };
    // The method ran twice (it left memory and came back), but its call never stopped.
    expect(run).toBe(2);
    expect(task.runs).toBe(1);
    expect(slept).toBeGreaterThanOrEqual(3_000);
    expect(calls.get(`${taskId}/before`)).toBe(1);
    console.log(
      `durable (${name}): a 3,000 ms sleep parked; the task completed ${wokeAfter} ms after the call`,
    );
    expect(wokeAfter).toBeLessThan(3_000 + 4 * LEASE_MS);
  }, 20_000);

  it('a cancel reaches a parked task at once: a cooperative one is acknowledged, not at the wake', async () => {
    const a = await start('cooperative');
    const b = await start('cooperative');
    await new Promise((resolve) => setTimeout(resolve, LEASE_MS));
    const taskId = await callTool(a.url, 'nap', { ms: 60_000 });
    await eventually(
      async () => ((await b.service.status(taskId)).heldBy?.startsWith('park:') ? true : undefined),
      2_000,
      'the park',
    );
    const cancelledAt = Date.now();
    const { body } = await rpc(b.url, 'tasks/cancel', { taskId }, { principal: 'alice' });
    expect(body.error).toBeUndefined();
    const task = await ended(b, taskId, 3_000);
    const tookMs = Date.now() - cancelledAt;
    expect(task.status).toBe('cancelled');
    // The method did not run on past its sleep, nor start again.
    expect(calls.get(`${taskId}/before`)).toBe(1);
    expect(calls.get(`${taskId}/after`)).toBeUndefined();
    expect(runs.get(taskId)).toBe(1);
    console.log(
      `durable (${name}): a parked task's cooperative cancel acknowledged in ${tookMs} ms`,
    );
    expect(tookMs).toBeLessThan(LEASE_MS);
  }, 20_000);

  it("parks no longer than its task lives: an expired task's park is put away at its expiry", async () => {
    const a = await start();
    await new Promise((resolve) => setTimeout(resolve, LEASE_MS));
    const nap = a.running.app.get(TaskToolRegistry).get('nap')!;
    // A client's short TTL: the task expires long before its 60 s sleep would end.
    const { taskId } = await a.running.app
      .get(TaskToolRunner)
      .start(nap, { ms: 60_000 }, { principal: 'alice', tenant: null }, { requestedTtlMs: 1_500 });
    const park = `park:${taskId}`;
    const store = a.running.app.get(TaskStore) as TaskStore & {
      heldTasks(holder: string): Promise<string[]>;
    };
    await eventually(
      async () => ((await store.heldTasks(park)).includes(taskId) ? true : undefined),
      2_000,
      'the park',
    );
    // Put away by a sweep soon after the expiry, not held by the park for the rest of the minute.
    const released = await eventually(
      async () => ((await store.heldTasks(park)).length === 0 ? true : undefined),
      3_000,
      'the park put away',
    ).catch(() => false);
    expect(released).toBe(true);
    expect(runs.get(taskId)).toBe(1);
  }, 15_000);

  it('warns once of a method that caught its park; the task still wakes and completes', async () => {
    const log = new KeptLog();
    const running = await startApp(durableModule(storage.parts()), 'express', '/mcp', (app) =>
      app.useLogger(log),
    );
    try {
      const instance = { service: running.app.get(TasksService) } as Instance;
      const taskId = await callTool(running.url, 'nap_caught');
      const task = await ended(instance, taskId, 6_000);
      expect(task.status).toBe('completed');
      // The first run's "caught the park" was dropped; the run after the wake slept no more.
      expect(textOf(task)).toBe('slept');
      expect(runs.get(taskId)).toBe(2);
      expect(log.warnings.filter((line) => line.includes('went on after its task parked'))).toEqual(
        [expect.stringContaining('Task tool nap_caught went on after its task parked')],
      );
    } finally {
      await running.close();
    }
  }, 15_000);

  it("a client's tasks/update on a parked task that waits for no input does not wake it", async () => {
    const a = await start();
    // An instance judges leases (and so wakes parks) a lease after its start.
    await new Promise((resolve) => setTimeout(resolve, LEASE_MS));
    const taskId = await callTool(a.url, 'nap', { ms: 60_000 });
    const isParked = async () =>
      (await a.service.status(taskId)).heldBy?.startsWith('park:') === true;
    await eventually(async () => ((await isParked()) ? true : undefined), 2_000, 'the park');
    // Accepted as no-ops (the task is not input_required): they must not end its park.
    for (let i = 0; i < 3; i++) {
      const { body } = await rpc(
        a.url,
        'tasks/update',
        { taskId, inputResponses: { name: { action: 'accept', content: { name: 'x' } } } },
        { principal: 'alice' },
      );
      expect(body.error).toBeUndefined();
    }
    await new Promise((resolve) => setTimeout(resolve, LEASE_MS / 2));
    const extra = runs.get(taskId)! - 1;
    console.log(`durable (${name}): ${extra} extra run(s) of a parked sleep after 3 no-op updates`);
    expect(extra).toBe(0);
    expect(await isParked()).toBe(true);
  }, 20_000);

  it('names the durable tools nothing would resume, in one WARN at boot, on an instance without a lease', async () => {
    const log = new KeptLog();
    const running = await startApp(
      durableModule(storage.parts(), false),
      'express',
      '/mcp',
      (app) => app.useLogger(log),
    );
    try {
      const warned = log.warnings.filter((line) => line.includes('are durable'));
      expect(warned).toEqual([
        expect.stringContaining(
          'Task tools "report", "ask", "nap", "nap_caught", "doomed" are durable, but this ' +
            'instance holds no lease',
        ),
      ]);
    } finally {
      await running.close();
    }
  });

  it(`fails a task whose instance stopped in each of its ${MAX_RUNS} runs, and one that is not durable`, async () => {
    const a = await start();
    const b = await start();
    await new Promise((resolve) => setTimeout(resolve, LEASE_MS));
    const doomed = await callTool(a.url, 'doomed');
    const plain = await callTool(a.url, 'plain');
    await eventually(async () => (runs.get(plain) === 1 ? true : undefined), 3_000, 'the call');
    // As if it had been run and lost three times already.
    const store = a.running.app.get<TaskStore>(TaskStore);
    const record = (await store.get(doomed))!;
    expect(
      await store.compareAndSet(
        { ...record, runs: MAX_RUNS, version: record.version + 1 },
        record.version,
      ),
    ).toBe(true);
    a.lease.stop();
    const failed = await ended(b, doomed);
    expect(failed.error).toEqual({
      code: -32603,
      message: `The task was run ${MAX_RUNS} times and its server stopped each time`,
    });
    expect(runs.get(doomed)).toBe(1);
    expect((await ended(b, plain)).error?.message).toBe(
      'The server stopped before the task finished',
    );
  }, 20_000);
});
