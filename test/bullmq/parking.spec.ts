/**
 * Parked BullMQ jobs (issue 39): a queue-run method that sleeps (`task.sleep`, 1 s or more) or
 * waits for input leaves its worker's slot. Its job goes back to the queue's delayed set (the park
 * noted in its data, no attempt spent) until the sleep's end, and an answer or a cancel wakes it
 * at once (BullTaskQueue.wake, a promote by the job's id, which is its task's). Its run after the
 * wake replays the method from its journal, without a "Restarted" message; a run after that which
 * fails still counts. Real Redis, real BullMQ workers (concurrency 1), the Redis store and notifier.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Injectable, type INestApplicationContext } from '@nestjs/common';
import { BullModule, getQueueToken } from '@nestjs/bullmq';
import { Test } from '@nestjs/testing';
import { Job, type Queue, type RedisClient } from 'bullmq';
import { Redis } from 'ioredis';
import { BullTaskQueue, TasksQueueModule } from '../../src/bullmq/index.js';
import { fairOwnerKey, ownerSetKey } from '../../src/bullmq/fair-turns.js';
import {
  OnTaskChange,
  type TaskContext,
  type TaskRecord,
  TaskTool,
  TasksModule,
  TasksService,
} from '../../src/index.js';
import type { TaskOwner } from '../../src/entries/store.js';
import type { CancellationMode } from '../../src/task/record.js';
import { RedisTaskStore, redisNotifier } from '../../src/redis/index.js';
import type { JobOutcome } from '../../src/tools/task-tool.calls.js';
import { TaskToolRegistry } from '../../src/tools/task-tool.registry.js';
import { TaskToolRunner } from '../../src/tools/task-tool.runner.js';
import { accept, elicit, sleep } from '../support/helpers.js';
import { startTestRedis, type TestRedis } from '../support/redis-server.js';

const QUEUE = 'park';
const NAP_MS = 1_500;

/** When things happened in the tools, by task id. */
const sleptFrom = new Map<string, number>();
const wokeAt = new Map<string, number>();
const ranAt = new Map<string, number>();
/** How often each task's step `a`, and each method, ran. */
const stepA = new Map<string, number>();
const runs = new Map<string, number>();
const bump = (map: Map<string, number>, taskId: string): number => {
  const count = (map.get(taskId) ?? 0) + 1;
  map.set(taskId, count);
  return count;
};

/** The status messages each task was given, and the versions of each task that asked for input. */
const messages = new Map<string, string[]>();
const asked = new Map<string, Set<number>>();

@Injectable()
class Heard {
  @OnTaskChange()
  heard(record: TaskRecord): void {
    const list = messages.get(record.taskId) ?? [];
    // Each write (a change) of a message, not each record that still carries it.
    if (record.statusMessage !== undefined && list.at(-1) !== record.statusMessage) {
      messages.set(record.taskId, [...list, record.statusMessage]);
    }
    if (record.status === 'input_required') {
      asked.set(record.taskId, (asked.get(record.taskId) ?? new Set()).add(record.version));
    }
  }
}

@Injectable()
class ParkTools {
  @TaskTool({ name: 'nap', queue: QUEUE })
  async nap(_input: unknown, task: TaskContext) {
    await task.step('a', () => Promise.resolve(bump(stepA, task.taskId)));
    if (!sleptFrom.has(task.taskId)) sleptFrom.set(task.taskId, Date.now());
    await task.sleep('nap', NAP_MS);
    wokeAt.set(task.taskId, Date.now());
    await task.step('b', () => Promise.resolve('b'));
    return { content: [] };
  }

  @TaskTool({ name: 'quick', queue: QUEUE })
  quick(_input: unknown, task: TaskContext) {
    ranAt.set(task.taskId, Date.now());
    return { content: [] };
  }

  @TaskTool({ name: 'ask', queue: QUEUE })
  async ask(_input: unknown, task: TaskContext) {
    bump(runs, task.taskId);
    const { name } = await task.requireInput({ name: elicit('Your name?') });
    return { content: [{ type: 'text' as const, text: JSON.stringify(name) }] };
  }

  /** The same question, for a client that waits inline (a 2025-era one). */
  @TaskTool({ name: 'ask_inline', queue: QUEUE, whenClientLacksTasks: 'inline' })
  async askInline(_input: unknown, task: TaskContext) {
    bump(runs, task.taskId);
    await task.requireInput({ name: elicit('Your name?') });
    return { content: [] };
  }

  @TaskTool({ name: 'long_nap', queue: QUEUE })
  async longNap(_input: unknown, task: TaskContext) {
    bump(runs, task.taskId);
    await task.sleep('long', 60_000);
    return { content: [] };
  }

  /** Parks once; the run after its wake fails (the queue runs it again), the next completes. */
  @TaskTool({ name: 'nap_fail', queue: { name: QUEUE, jobOptions: { attempts: 2 } } })
  async napFail(_input: unknown, task: TaskContext) {
    await task.sleep('nap', 1_200);
    if (bump(runs, task.taskId) === 1) throw new Error('the run after the wake fails on purpose');
    return { content: [] };
  }
}

let redis: TestRedis;
let raw: Redis;
const apps: INestApplicationContext[] = [];
let app: INestApplicationContext;
const alice: TaskOwner = { principal: 'alice', tenant: null };

async function boot(prefix: string, cancellation?: CancellationMode) {
  const storage = { connection: redis.url, prefix: `${prefix}-tasks:` };
  const moduleRef = await Test.createTestingModule({
    imports: [
      BullModule.forRoot({ connection: { host: '127.0.0.1', port: redis.port }, prefix }),
      // Completed jobs kept: the test reads their counts.
      BullModule.registerQueue({ name: QUEUE, defaultJobOptions: { removeOnComplete: false } }),
      TasksModule.forRoot({
        janitor: false,
        shutdown: { drainMs: 0 },
        store: new RedisTaskStore(storage),
        notifier: redisNotifier(storage),
        ...(cancellation !== undefined && { cancellation }),
      }),
      // BullMQ's default concurrency: one job at a time.
      TasksQueueModule.forRoot(),
    ],
    providers: [ParkTools, Heard],
  }).compile();
  // nap_fail's failure is logged by design: kept out of the test's output.
  moduleRef.useLogger(false);
  apps.push(moduleRef);
  return moduleRef.init();
}

const start = async (on: INestApplicationContext, tool: string): Promise<string> => {
  const definition = on.get(TaskToolRegistry).get(tool)!;
  return (await on.get(TaskToolRunner).start(definition, {}, alice)).taskId;
};

const queueOf = (on: INestApplicationContext) => on.get<Queue>(getQueueToken(QUEUE));

async function until<T>(
  read: () => Promise<T | undefined> | T | undefined,
  what: string,
  ms = 8_000,
) {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await read();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`Timed out waiting for ${what}`);
    await sleep(5);
  }
}

const statusOf = (on: INestApplicationContext, taskId: string) =>
  on.get(TasksService).status(taskId);

const reaches = (on: INestApplicationContext, taskId: string, status: string, ms?: number) =>
  until(
    async () => {
      const task = await statusOf(on, taskId);
      return task.status === status ? task : undefined;
    },
    `task ${status}`,
    ms,
  );

const jobState = (on: INestApplicationContext, taskId: string) => queueOf(on).getJobState(taskId);

const parked = (on: INestApplicationContext, taskId: string) =>
  until(async () => ((await jobState(on, taskId)) === 'delayed' ? true : undefined), 'the park');

beforeAll(async () => {
  redis = await startTestRedis({ persistence: false });
  raw = new Redis(redis.url);
  app = await boot(`park-${process.pid}`);
});

afterAll(async () => {
  while (apps.length > 0) await apps.pop()!.close();
  raw?.disconnect();
  await redis?.stop();
});

describe('a parked BullMQ job', () => {
  it('frees its slot while it sleeps, and wakes at the sleep end without a restart', async () => {
    const napId = await start(app, 'nap');
    await until(() => sleptFrom.get(napId), 'the sleep');
    const quickId = await start(app, 'quick');
    // One slot: the quick job runs only if the sleeping one left it.
    await reaches(app, quickId, 'completed', 3_000).catch(() => undefined);
    const done = await reaches(app, napId, 'completed');
    expect(done.status).toBe('completed');
    const slept = wokeAt.get(napId)! - sleptFrom.get(napId)!;
    const quickAfter = ranAt.get(quickId)! - sleptFrom.get(napId)!;
    console.log(
      `nap: woke ${slept} ms after its sleep began (${slept - NAP_MS} ms past ${NAP_MS}); ` +
        `the quick job ran ${quickAfter} ms after that sleep began`,
    );
    expect(ranAt.get(quickId)).toBeLessThan(wokeAt.get(napId)!);
    expect(slept).toBeGreaterThanOrEqual(NAP_MS);
    expect(stepA.get(napId)).toBe(1);
    expect((messages.get(napId) ?? []).filter((m) => m.startsWith('Restarted'))).toEqual([]);
    const job = (await Job.fromId(queueOf(app), napId))!;
    // Two starts (the park's and the wake's); the completion is the only attempt made.
    expect([job.attemptsStarted, job.attemptsMade, job.data.parks]).toEqual([2, 1, 1]);
  }, 10_000);

  it('waits for input out of its slot; the answer wakes it at once, asked once', async () => {
    const askId = await start(app, 'ask');
    await parked(app, askId);
    expect((await statusOf(app, askId)).status).toBe('input_required');
    const job = (await Job.fromId(queueOf(app), askId))!;
    // Parked: no attempt spent.
    expect(job.attemptsMade).toBe(0);
    const quickId = await start(app, 'quick');
    await reaches(app, quickId, 'completed', 3_000);
    const answered = Date.now();
    await app.get(TasksService).update(askId, alice, { name: accept('Ada') });
    const done = await reaches(app, askId, 'completed', 3_000);
    const latency = Date.now() - answered;
    console.log(`ask: completed ${latency} ms after its answer`);
    expect(latency).toBeLessThan(1_000);
    expect(done.result?.content).toEqual([
      { type: 'text', text: JSON.stringify({ action: 'accept', content: { name: 'Ada' } }) },
    ]);
    expect(asked.get(askId)?.size).toBe(1);
    expect(runs.get(askId)).toBe(2);
    expect((messages.get(askId) ?? []).filter((m) => m.startsWith('Restarted'))).toEqual([]);
  }, 10_000);

  it('answers an inline call whose job asks for input with a tool error, at once: it cannot park', async () => {
    const definition = app.get(TaskToolRegistry).get('ask_inline')!;
    // Without the check the job would park for an hour, and the call would wait as long.
    const result = await app.get(TaskToolRunner).runInline(definition, {}, alice);
    expect(result).toMatchObject({
      isError: true,
      content: [
        {
          type: 'text',
          text: 'This tool needs input from the client, which requires the tasks extension',
        },
      ],
    });
  }, 10_000);

  it('wakes at once when the answer came after the method parked, before the job moved', async () => {
    const runner = app.get(TaskToolRunner);
    const tasks = app.get(TasksService);
    const runJob = runner.runJob.bind(runner);
    let answered = 0;
    let stateAtAnswer: string | undefined;
    // The answer lands between the method's park and the worker's move: its wake finds the job
    // still active, and moves nothing.
    runner.runJob = async (...args): Promise<JobOutcome> => {
      const outcome = await runJob(...args);
      if (typeof outcome === 'object' && answered === 0) {
        await tasks.update(args[1].taskId, alice, { name: accept('Grace') });
        answered = Date.now();
        stateAtAnswer = await jobState(app, args[1].taskId);
      }
      return outcome;
    };
    try {
      const askId = await start(app, 'ask');
      await reaches(app, askId, 'completed', 3_000);
      const latency = Date.now() - answered;
      console.log(`race: completed ${latency} ms after the answer that came before the move`);
      expect(stateAtAnswer).toBe('active');
      expect(latency).toBeLessThan(1_000);
      expect(asked.get(askId)?.size).toBe(1);
    } finally {
      runner.runJob = runJob;
    }
  }, 10_000);

  it.each(['immediate', 'cooperative'] as const)(
    'a cancel (%s) ends a parked 60 s sleep within a second',
    async (mode) => {
      const on = mode === 'immediate' ? app : await boot(`park-coop-${process.pid}`, mode);
      const taskId = await start(on, 'long_nap');
      await parked(on, taskId);
      const turns = ownerSetKey(queueOf(on), fairOwnerKey(alice));
      // A parked job keeps its owner's turn on the fair queue: it has not ended.
      expect(await raw.zrange(turns, '0', '-1')).toEqual([taskId]);
      const cancelled = Date.now();
      const answer = await on.get(TasksService).cancel(taskId, alice);
      expect(answer.status).toBe(mode === 'immediate' ? 'cancelled' : 'working');
      await reaches(on, taskId, 'cancelled', 1_000);
      await until(
        async () => ((await jobState(on, taskId)) === 'completed' ? true : undefined),
        'the job to complete',
        1_000,
      );
      console.log(
        `cancel (${mode}): task cancelled, job completed ${Date.now() - cancelled} ms after`,
      );
      // The woken run ended without the method running again.
      expect(runs.get(taskId)).toBe(1);
      // Its owner's turn is given back as the job completes.
      await until(
        async () => ((await raw.zcard(turns)) === 0 ? true : undefined),
        'the turn',
        1_000,
      );
    },
    10_000,
  );

  it("a client's tasks/update on a task that waits for no input does not wake its parked job", async () => {
    const taskId = await start(app, 'long_nap');
    await parked(app, taskId);
    const tasks = app.get(TasksService);
    // Accepted as a no-op (the task is not input_required): it must not wake the sleeping job.
    for (let i = 0; i < 5; i++) {
      expect((await tasks.update(taskId, alice, { name: accept('x') })).status).toBe('working');
    }
    await sleep(300);
    const extra = runs.get(taskId)! - 1;
    console.log(`no-op updates: ${extra} extra run(s) of the parked job after 5 updates`);
    expect(extra).toBe(0);
    expect(await jobState(app, taskId)).toBe('delayed');
    await tasks.cancel(taskId, alice);
    await reaches(app, taskId, 'cancelled');
  }, 10_000);

  it("parks no longer than its task lives: the job of an expired task ends at the task's expiry", async () => {
    const definition = app.get(TaskToolRegistry).get('long_nap')!;
    // A client's short TTL: the task expires long before the job's 60 s sleep would end.
    const { taskId, createdAt } = await app
      .get(TaskToolRunner)
      .start(definition, {}, alice, { requestedTtlMs: 1_000 });
    await parked(app, taskId);
    const ended = await until(
      async () => ((await jobState(app, taskId)) === 'completed' ? Date.now() : undefined),
      'the job to end',
      3_000,
    ).catch(() => undefined);
    const state = await jobState(app, taskId);
    console.log(
      `expiry: the parked job is ${state} ` +
        (ended === undefined
          ? '3 s after its park (its sleep had 60 s to go)'
          : `${ended - createdAt - 1_000} ms after its task expired`),
    );
    // Ended (its data gone, its fair turn given back), without running the method again.
    expect(state).toBe('completed');
    expect(runs.get(taskId)).toBe(1);
  }, 10_000);

  it('counts a failed run after a wake as a restart (run 2), not the wake', async () => {
    const taskId = await start(app, 'nap_fail');
    await reaches(app, taskId, 'completed');
    expect((messages.get(taskId) ?? []).filter((m) => m.startsWith('Restarted'))).toEqual([
      'Restarted (run 2): the previous run stopped',
    ]);
    const job = (await Job.fromId(queueOf(app), taskId))!;
    expect([job.attemptsStarted, job.data.parks]).toEqual([3, 1]);
  }, 10_000);
});

describe('BullTaskQueue.wake', () => {
  it('promotes a delayed job in one round trip, and leaves any other job (or none) alone', async () => {
    const queue = queueOf(app);
    const client = (await queue.getBackend().client) as RedisClient & {
      sendCommand(...args: unknown[]): unknown;
    };
    const send = client.sendCommand.bind(client);
    let sent = 0;
    client.sendCommand = (...args: unknown[]) => {
      sent++;
      return send(...args);
    };
    const wake = (taskId: string) => app.get(BullTaskQueue).wake({ name: QUEUE }, taskId);
    try {
      const taskId = await start(app, 'long_nap');
      await parked(app, taskId);
      sent = 0;
      await wake('no-such-task-id');
      const none = sent;
      sent = 0;
      const woke = Date.now();
      await wake(taskId);
      const promote = sent;
      console.log(`wake: ${promote} round trip(s) for a parked job, ${none} for none`);
      expect([promote, none]).toEqual([1, 1]);
      // It runs (and parks again, its sleep not over): the method's second run.
      await until(() => (runs.get(taskId) === 2 ? true : undefined), 'the woken run');
      console.log(`wake: the method ran again ${Date.now() - woke} ms after the wake`);
      await parked(app, taskId);
      await app.get(TasksService).cancel(taskId, alice);
      await reaches(app, taskId, 'cancelled');
      // A completed job: nothing, no error (an active one: see the race above).
      await wake(taskId);
    } finally {
      client.sendCommand = send;
    }
  }, 10_000);
});
