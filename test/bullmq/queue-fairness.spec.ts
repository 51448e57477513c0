import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { Inject, Injectable, type INestApplicationContext } from '@nestjs/common';
import { BullModule, getQueueToken } from '@nestjs/bullmq';
import { Test } from '@nestjs/testing';
import { type Job, type Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { TasksQueueModule } from '../../src/bullmq/index.js';
import {
  FAIR_CHECK_AFTER_MS,
  FAIR_MAX_LEVEL,
  FAIR_RANKS,
  fairOwnerKey,
} from '../../src/bullmq/fair-turns.js';
import { TasksConfigError } from '../../src/errors.js';
import {
  type TaskContext,
  type TaskRecord,
  TaskTool,
  TasksModule,
  TasksService,
} from '../../src/index.js';
import type { TaskOwner } from '../../src/entries/store.js';
import { RedisTaskStore, redisNotifier } from '../../src/redis/index.js';
import { TaskToolRegistry } from '../../src/tools/task-tool.registry.js';
import { TaskToolRunner } from '../../src/tools/task-tool.runner.js';
import { WaiterFeed } from '../../src/notify/waiter-feed.js';
import { startTestRedis, type TestRedis } from '../support/redis-server.js';

/**
 * Fair turns on a BullMQ queue (issue 34, item 4): each job's priority is its owner's rank, kept
 * in a per-owner set of job ids beside BullMQ's keys. The set must empty again however a job
 * ends (completed, failed, cancelled, stalled past `maxStalledCount`), keep a job given back at
 * shutdown, and heal itself of a job removed behind its back. Real Redis, real BullMQ workers.
 */

const PREFIX = `fair-${process.pid}`;
const QUEUE = 'fair';

/** Gates that the test opens: `hold` waits on one (or on its signal). */
const gates = new Map<string, () => void>();
const gate = (name: string) => new Promise<void>((resolve) => gates.set(name, resolve));

@Injectable()
class FairTools {
  @TaskTool({ name: 'fair_echo', queue: QUEUE })
  echo(input: Record<string, unknown>) {
    return { content: [{ type: 'text' as const, text: JSON.stringify(input) }] };
  }

  @TaskTool({ name: 'fair_urgent', queue: { name: QUEUE, jobOptions: { priority: 2 } } })
  urgent() {
    return { content: [] };
  }

  @TaskTool({ name: 'fair_boom', queue: { name: QUEUE, jobOptions: { attempts: 2 } } })
  boom(): never {
    throw new Error('boom');
  }

  @TaskTool({ name: 'fair_hold', queue: QUEUE })
  async hold(_input: unknown, task: TaskContext) {
    await new Promise<void>((resolve, reject) => {
      task.signal.addEventListener('abort', () => reject(task.signal.reason as Error));
      void gate(task.taskId).then(resolve);
    });
    return { content: [] };
  }

  constructor(@Inject(TasksService) private readonly tasks: TasksService) {}

  /** Cancels its own task as it starts: after the job's first read, before the job listens. */
  @TaskTool({ name: 'fair_cancel_self', queue: QUEUE })
  async cancelSelf(_input: unknown, task: TaskContext) {
    await this.tasks.cancel(task.taskId, task.owner);
    const fired = await new Promise<string>((resolve) => {
      if (task.signal.aborted) return resolve('signal fired');
      const timer = setTimeout(resolve, 2_000, 'signal still quiet after 2 s');
      task.signal.addEventListener('abort', () => {
        clearTimeout(timer);
        resolve('signal fired');
      });
    });
    selfCancels.push(fired);
    return { content: [] };
  }
}

/** What each `fair_cancel_self` run saw of its signal. */
const selfCancels: string[] = [];

@Injectable()
class TooUrgentTools {
  @TaskTool({
    name: 'too_urgent',
    queue: { name: QUEUE, jobOptions: { priority: FAIR_MAX_LEVEL + 1 } },
  })
  tooUrgent() {
    return { content: [] };
  }
}

let redis: TestRedis;
let raw: Redis;
const apps: INestApplicationContext[] = [];

interface BootOptions {
  worker?: boolean;
  fair?: boolean | Record<string, boolean>;
  workerOptions?: Record<string, unknown>;
  providers?: unknown[];
  /**
   * Redis: BullMQ's modules and the Redis store (default true). A boot that fails while compiling
   * leaves nothing to close what they connected, which would then keep the worker alive and retry
   * a stopped Redis for the rest of the run: such a boot runs on the in-memory store.
   */
  redis?: boolean;
}

async function boot(options: BootOptions = {}): Promise<INestApplicationContext> {
  const connection = { connection: redis.url, prefix: `${PREFIX}-tasks:` };
  const moduleRef = await Test.createTestingModule({
    imports: [
      ...(options.redis === false
        ? []
        : [
            BullModule.forRoot({
              connection: { host: '127.0.0.1', port: redis.port },
              prefix: PREFIX,
            }),
            BullModule.registerQueue({ name: QUEUE }),
          ]),
      TasksModule.forRoot({
        janitor: false,
        shutdown: { drainMs: 0 },
        ...(options.redis !== false && {
          store: new RedisTaskStore(connection),
          notifier: redisNotifier(connection),
        }),
      }),
      TasksQueueModule.forRoot({
        worker: options.worker ?? true,
        ...(options.fair !== undefined && { fair: options.fair }),
        workers: { [QUEUE]: { concurrency: 4, ...options.workerOptions } },
      }),
    ],
    providers: (options.providers ?? [FairTools]) as never[],
  }).compile();
  // The failing tool's error is logged by design: kept out of the test's output.
  moduleRef.useLogger(false);
  apps.push(moduleRef);
  return moduleRef.init();
}

const start = (app: INestApplicationContext, tool: string, owner: TaskOwner, input = {}) =>
  app
    .get(TaskToolRunner)
    .start(app.get(TaskToolRegistry).get(tool)!, input, owner) as Promise<TaskRecord>;

const queueOf = (app: INestApplicationContext) => app.get<Queue>(getQueueToken(QUEUE));

/** The job ids in an owner's set on the queue (none: the key is gone). */
const turnsOf = (owner: TaskOwner) =>
  raw.zrange(`${PREFIX}:${QUEUE}:fair:${fairOwnerKey(owner)}`, '0', '-1');

/** Every owner set of the queue, with its size. */
async function allTurns(): Promise<Record<string, number>> {
  const keys = await raw.keys(`${PREFIX}:${QUEUE}:fair:*`);
  const sizes: Record<string, number> = {};
  for (const key of keys) sizes[key] = await raw.zcard(key);
  return sizes;
}

async function until<T>(read: () => Promise<T | undefined>, what: string, ms = 10_000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await read();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`Timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

const settled = (app: INestApplicationContext, taskId: string, status: string) =>
  until(async () => {
    const task = await app.get(TasksService).status(taskId);
    return task.status === status ? task : undefined;
  }, `task ${status}`);

const noTurnsLeft = () =>
  until(
    async () => (Object.keys(await allTurns()).length === 0 ? true : undefined),
    'every owner set to empty',
  );

const alice: TaskOwner = { principal: 'alice', tenant: null };
const bob: TaskOwner = { principal: 'bob', tenant: null };

beforeAll(async () => {
  redis = await startTestRedis({ persistence: false });
  raw = new Redis(redis.url);
});

afterEach(async () => {
  for (const open of gates.values()) open();
  gates.clear();
  while (apps.length > 0) await apps.pop()!.close();
  const keys = await raw.keys(`${PREFIX}*`);
  if (keys.length > 0) await raw.del(...keys);
});

afterAll(async () => {
  raw?.disconnect();
  await redis?.stop();
});

describe('fair turns on a BullMQ queue', () => {
  it("gives each job its owner's rank as priority, per owner (principal and tenant) and level", async () => {
    const app = await boot({ worker: false });
    for (let i = 0; i < 3; i++) await start(app, 'fair_echo', alice);
    await start(app, 'fair_echo', bob);
    await start(app, 'fair_echo', { principal: 'alice', tenant: 'acme' });
    await start(app, 'fair_urgent', bob);
    const jobs = await queueOf(app).getJobs(['prioritized']);
    const priorities = jobs
      .map((job) => [job.name, job.data.ownerKey, job.opts.priority] as const)
      .sort((a, b) => a[2]! - b[2]!);
    const key = (owner: TaskOwner) => fairOwnerKey(owner);
    expect(priorities).toEqual(
      expect.arrayContaining([
        ['fair_echo', key(alice), 1],
        ['fair_echo', key(alice), 2],
        ['fair_echo', key(alice), 3],
        ['fair_echo', key(bob), 1],
        ['fair_echo', key({ principal: 'alice', tenant: 'acme' }), 1],
        // Level 2 (its priority option), rank 2 (bob's second job on the queue).
        ['fair_urgent', key(bob), 2 * FAIR_RANKS + 2],
      ]),
    );
    expect(priorities).toHaveLength(6);
    expect(await turnsOf(alice)).toHaveLength(3);
    expect(await turnsOf(bob)).toHaveLength(2);
    // The job's id is the one its owner's set names; the data has no principal in clear.
    expect((await turnsOf(bob)).sort()).toEqual(
      jobs
        .filter((job) => job.data.ownerKey === key(bob))
        .map((job) => job.id)
        .sort(),
    );
    expect(JSON.stringify(jobs.map((job) => job.data))).not.toContain('alice');
  });

  it('ranks the calls of one tick (sent to Redis together) one after another', async () => {
    const app = await boot({ worker: false });
    await Promise.all([
      ...Array.from({ length: 10 }, () => start(app, 'fair_echo', alice)),
      ...Array.from({ length: 3 }, () => start(app, 'fair_echo', bob)),
    ]);
    const jobs = await queueOf(app).getJobs(['prioritized']);
    const ranks = (owner: TaskOwner) =>
      jobs
        .filter((job) => job.data.ownerKey === fairOwnerKey(owner))
        .map((job) => job.opts.priority)
        .sort((a, b) => a! - b!);
    expect(ranks(alice)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect(ranks(bob)).toEqual([1, 2, 3]);
  });

  it('runs the first job of each owner before the rest of a backlog', async () => {
    const producer = await boot({ worker: false });
    const backlog: string[] = [];
    for (let i = 0; i < 6; i++) backlog.push((await start(producer, 'fair_echo', alice)).taskId);
    const late = (await start(producer, 'fair_echo', bob)).taskId;
    const order: string[] = [];
    const worker = new Worker(
      QUEUE,
      async (job: Job) => {
        order.push(job.data.taskId as string);
      },
      { connection: { host: '127.0.0.1', port: redis.port }, prefix: PREFIX, concurrency: 1 },
    );
    await until(async () => (order.length === 7 ? true : undefined), 'seven jobs run');
    await worker.close();
    // Bob's job (rank 1) runs right after alice's rank-1 job (same priority, added first).
    expect(order.indexOf(late)).toBe(1);
    expect(order.filter((id) => id !== late)).toEqual(backlog);
  });

  it('empties the owner sets after completions, failures and cancels', async () => {
    const app = await boot();
    const tasks = app.get(TasksService);
    const done = await Promise.all([1, 2, 3].map(() => start(app, 'fair_echo', alice)));
    const failed = await start(app, 'fair_boom', bob);
    const held = await start(app, 'fair_hold', bob);
    for (const task of done) await settled(app, task.taskId, 'completed');
    await settled(app, failed.taskId, 'failed');
    // The failing job ran twice (attempts: 2), its turn kept through the retry and given back at
    // its end; the held job keeps its own.
    await until(
      async () => ((await turnsOf(bob)).length === 1 ? true : undefined),
      "bob's failed job to give back its turn",
    );
    await tasks.cancel(held.taskId, bob);
    await settled(app, held.taskId, 'cancelled');
    await noTurnsLeft();
  });

  it('gives back the turn of a cancelled job that never ran, when a worker takes it', async () => {
    const producer = await boot({ worker: false });
    const tasks = producer.get(TasksService);
    const waiting = await Promise.all([1, 2].map(() => start(producer, 'fair_echo', alice)));
    for (const task of waiting) await tasks.cancel(task.taskId, alice);
    expect(await turnsOf(alice)).toHaveLength(2);
    await boot();
    await noTurnsLeft();
    for (const task of waiting) {
      expect((await tasks.status(task.taskId)).status).toBe('cancelled');
    }
  });

  it('gives back the turn of a job that stalled past maxStalledCount (its worker died)', async () => {
    const producer = await boot({ worker: false });
    const task = await start(producer, 'fair_hold', alice);
    // A worker takes the job and dies: its lock (1 s) is never renewed.
    const dead = new Worker(QUEUE, null, {
      connection: { host: '127.0.0.1', port: redis.port },
      prefix: PREFIX,
      lockDuration: 1_000,
      autorun: false,
    });
    const job = await dead.getNextJob('dead-token');
    expect(job?.data.taskId).toBe(task.taskId);
    expect(await turnsOf(alice)).toHaveLength(1);
    await boot({ workerOptions: { stalledInterval: 500, maxStalledCount: 0 } });
    await settled(producer, task.taskId, 'failed');
    await noTurnsLeft();
    await dead.close(true);
  });

  it('keeps the turn and the priority of a job given back at shutdown', async () => {
    const producer = await boot({ worker: false });
    await start(producer, 'fair_echo', alice);
    const task = await start(producer, 'fair_hold', alice);
    const worker = await boot();
    await until(
      async () => ((await queueOf(producer).getActiveCount()) === 1 ? true : undefined),
      'the held job to run',
    );
    apps.splice(apps.indexOf(worker), 1);
    await worker.close();
    const [job] = await queueOf(producer).getJobs(['delayed', 'prioritized']);
    expect(job?.data.taskId).toBe(task.taskId);
    expect(job?.opts.priority).toBe(2);
    expect(await turnsOf(alice)).toEqual([job!.id]);
    expect((await producer.get(TasksService).status(task.taskId)).status).toBe('working');
  });

  it('drops a job removed behind its back at the next add of its owner, once unconfirmed for a while', async () => {
    const app = await boot({ worker: false });
    const first = await start(app, 'fair_echo', alice);
    const queue = queueOf(app);
    const [job] = await queue.getJobs(['prioritized']);
    expect(job?.data.taskId).toBe(first.taskId);
    await queue.remove(job!.id!);
    // Still counted: nothing reported the removal.
    await start(app, 'fair_echo', alice);
    expect((await queue.getJobs(['prioritized'])).map((each) => each.opts.priority)).toEqual([2]);
    // Once both entries have gone unconfirmed for FAIR_CHECK_AFTER_MS, the next add checks them.
    const key = `${PREFIX}:${QUEUE}:fair:${fairOwnerKey(alice)}`;
    for (const id of await raw.zrange(key, '0', '-1')) {
      await raw.zadd(key, String(Date.now() - FAIR_CHECK_AFTER_MS - 1_000), id);
    }
    await start(app, 'fair_echo', alice);
    const jobs = await queue.getJobs(['prioritized']);
    expect(jobs.map((each) => each.opts.priority).sort()).toEqual([2, 2]);
    expect(await turnsOf(alice)).toHaveLength(2);
    expect(await raw.pttl(key)).toBeGreaterThan(0);
  });

  it('ends a job whose cancel is heard before its first read of the task (no wait forever)', async () => {
    // Seen first in the hostile fairness test: a worker took the job of a task cancelled a moment
    // before, heard the cancel on its feed while its subscription was still being made, stopped
    // its watch, and never made the read the job waits for, holding the worker's slot for good.
    const app = await boot({ worker: false });
    const task = await start(app, 'fair_hold', alice);
    const cancelled = await app.get(TasksService).cancel(task.taskId, alice);
    const tool = app.get(TaskToolRegistry).get('fair_hold')!;
    const job = app
      .get(TaskToolRunner)
      .runJob(
        tool,
        { tool: 'fair_hold', taskId: task.taskId, input: {} },
        { run: 1, lastRun: true, answers: {}, keepAnswers: async () => undefined },
      );
    // Heard at once, as the watch listens and before its subscription is in place.
    app.get(WaiterFeed).publish(cancelled);
    let timer: NodeJS.Timeout | undefined;
    const outcome = await Promise.race([
      job,
      new Promise((resolve) => (timer = setTimeout(resolve, 2_000, 'still waiting after 2 s'))),
    ]);
    clearTimeout(timer);
    expect(outcome).toBe('settled');
  });

  it("fires a job's signal for a cancel written after its first read, before it listens", async () => {
    // A job reads its task first and listens only once its method runs on: the read made once it
    // listens must catch a cancel written in between (here by the method itself, at its start).
    const app = await boot({ worker: false });
    const task = await start(app, 'fair_cancel_self', alice);
    const tool = app.get(TaskToolRegistry).get('fair_cancel_self')!;
    const outcome = await app
      .get(TaskToolRunner)
      .runJob(
        tool,
        { tool: 'fair_cancel_self', taskId: task.taskId, input: {} },
        { run: 1, lastRun: true, answers: {}, keepAnswers: async () => undefined },
      );
    expect(outcome).toBe('settled');
    expect(selfCancels).toEqual(['signal fired']);
    expect((await app.get(TasksService).status(task.taskId)).status).toBe('cancelled');
  });

  it('adds jobs as before on a queue that is not fair', async () => {
    const app = await boot({ worker: false, fair: { [QUEUE]: false } });
    await start(app, 'fair_echo', alice);
    await start(app, 'fair_urgent', alice);
    const jobs = await queueOf(app).getJobs(['waiting', 'prioritized']);
    expect(jobs.map((job) => job.opts.priority ?? 0).sort()).toEqual([0, 2]);
    expect(jobs.every((job) => job.data.ownerKey === undefined)).toBe(true);
    expect(await allTurns()).toEqual({});
  });

  it('fails the boot for a priority a fair queue has no room for, or a malformed fair option', async () => {
    const tooHigh = await boot({ worker: false, providers: [TooUrgentTools] }).catch((e) => e);
    expect(tooHigh).toBeInstanceOf(TasksConfigError);
    expect((tooHigh as Error).message).toContain(`from 0 to ${FAIR_MAX_LEVEL}`);
    expect((tooHigh as Error).message).toContain(`fair: { '${QUEUE}': false }`);
    // Not fair: BullMQ's own range applies.
    await expect(
      boot({ worker: false, providers: [TooUrgentTools], fair: false }),
    ).resolves.toBeDefined();
    const malformed = await boot({
      redis: false,
      providers: [],
      worker: false,
      fair: { [QUEUE]: 'yes' } as unknown as Record<string, boolean>,
    }).catch((e) => e);
    expect(malformed).toBeInstanceOf(TasksConfigError);
    expect((malformed as Error).message).toContain('"fair"');
  });
});
