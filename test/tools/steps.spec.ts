/**
 * `task.step` (issue 39, item 1): a step's result is journaled in its task, in the record the
 * store keeps, and a later run of the method for the same task gets it back without running the
 * step again. On the in-memory store, a real Redis and a real PostgreSQL: retries with backoff,
 * a step that fails for good, a timeout, a cancel during a backoff, a name reached twice, what a
 * step costs the store; then a queue-run tool whose first run stops between steps, run again by
 * pg-boss (PostgreSQL) and by BullMQ (Redis).
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { Injectable, type INestApplicationContext, Logger, Module } from '@nestjs/common';
import { BullModule } from '@nestjs/bullmq';
import { Test } from '@nestjs/testing';
import {
  OnTaskChange,
  type TaskContext,
  type TaskRecord,
  TaskStepError,
  TaskTool,
  TasksModule,
  TasksService,
} from '../../src/index.js';
import type { TasksModuleExtras } from '../../src/entries/options.js';
import { TasksQueueModule as BullQueueModule } from '../../src/bullmq/index.js';
import { TasksQueueModule as PgBossQueueModule } from '../../src/pg-boss/index.js';
import {
  type PostgresTaskNotifier,
  PostgresTaskStore,
  postgresNotifier,
} from '../../src/postgres/index.js';
import { TaskNotifier } from '../../src/notify/task-notifier.js';
import pg from 'pg';
import { RedisTaskStore, redisNotifier } from '../../src/redis/index.js';
import type { TaskStore } from '../../src/store/task-store.js';
import { TaskToolRegistry } from '../../src/tools/task-tool.registry.js';
import { TaskToolRunner } from '../../src/tools/task-tool.runner.js';
import { sleep } from '../support/helpers.js';
import { KeptLog } from '../support/kept-log.js';
import { startTestPostgres, type TestPostgres } from '../support/postgres-server.js';
import { startTestRedis, type TestRedis } from '../support/redis-server.js';
import { STORES, type Storage } from '../support/stores.js';

/** Calls of each step's function, by `taskId/step`. */
const calls = new Map<string, number[]>();
const called = (task: TaskContext, step: string): number => {
  const key = `${task.taskId}/${step}`;
  const times = calls.get(key) ?? [];
  times.push(Date.now());
  calls.set(key, times);
  return times.length;
};
const callsOf = (taskId: string, step: string): number[] => calls.get(`${taskId}/${step}`) ?? [];

/** Runs of each task's method, by task id. */
const runs = new Map<string, number>();
const countRun = (taskId: string): number => {
  const run = (runs.get(taskId) ?? 0) + 1;
  runs.set(taskId, run);
  return run;
};

/** The status messages written, by task id, in order (every write of this process). */
const messages = new Map<string, string[]>();

@Injectable()
class Heard {
  @OnTaskChange()
  heard(record: TaskRecord): void {
    if (record.statusMessage === undefined) return;
    const list = messages.get(record.taskId) ?? [];
    if (list.at(-1) !== record.statusMessage) list.push(record.statusMessage);
    messages.set(record.taskId, list);
  }
}

const text = (value: unknown) => ({
  content: [{ type: 'text' as const, text: JSON.stringify(value) }],
});

@Injectable()
class StepTools {
  constructor(private readonly tasks: TasksService) {}

  @TaskTool({ name: 'order' })
  async order(_input: unknown, task: TaskContext) {
    const quote = await task.step('quote', () => {
      called(task, 'quote');
      return { amount: 42, at: new Date(0) };
    });
    const nothing = await task.step('log', () => {
      called(task, 'log');
    });
    const stored = await this.tasks.status(task.taskId);
    return text({
      quote,
      nothing: nothing === undefined,
      key: task.idempotencyKey('charge'),
      journal: stored.steps,
    });
  }

  @TaskTool({ name: 'flaky_step' })
  async flakyStep(input: { failures: number }, task: TaskContext) {
    const value = await task.step(
      'charge',
      ({ attempt }) => {
        called(task, 'charge');
        if (attempt <= input.failures) throw new Error(`declined ${attempt}`);
        return `charged on attempt ${attempt}`;
      },
      { retries: 2, backoffMs: 100 },
    );
    return text(value);
  }

  @TaskTool({ name: 'slow_step' })
  async slowStep(_input: unknown, task: TaskContext) {
    let signalled = 0;
    const value = await task.step(
      'fetch',
      ({ attempt, signal }) => {
        called(task, 'fetch');
        signal.addEventListener('abort', () => signalled++);
        // The first attempt never ends on its own; the second is quick.
        return attempt === 1 ? new Promise<string>(() => undefined) : `attempt ${attempt}`;
      },
      { retries: 1, backoffMs: 0, timeoutMs: 150 },
    );
    return text({ value, signalled });
  }

  @TaskTool({ name: 'napper' })
  async napper(input: { ms: unknown }, task: TaskContext) {
    const started = Date.now();
    await task.sleep('nap', input.ms as number);
    const stored = await this.tasks.status(task.taskId);
    return text({ slept: Date.now() - started, until: stored.steps?.nap?.until, started });
  }

  @TaskTool({ name: 'twice' })
  async twice(_input: unknown, task: TaskContext) {
    await task.step('same', () => 1);
    await task.step('same', () => 2);
    return text('unreachable');
  }

  @TaskTool({ name: 'backing_off' })
  async backingOff(_input: unknown, task: TaskContext) {
    await task.step(
      'retrying',
      () => {
        called(task, 'retrying');
        throw new Error('always');
      },
      { retries: 5, backoffMs: 60_000 },
    );
    return text('unreachable');
  }

  @TaskTool({ name: 'final_error' })
  async finalError(_input: unknown, task: TaskContext) {
    await task.step(
      'validate',
      () => {
        called(task, 'validate');
        throw Object.assign(new Error('Unknown customer'), { code: -32602 });
      },
      { retries: 3, backoffMs: 0 },
    );
    return text('unreachable');
  }
}

/** Counts the store calls a step makes: the real store, observed. */
function counted(store: TaskStore): { store: TaskStore; counts: Map<string, number> } {
  const counts = new Map<string, number>();
  const proxy = new Proxy(store, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver) as unknown;
      if (typeof value !== 'function' || typeof property !== 'string') return value;
      return (...args: unknown[]) => {
        counts.set(property, (counts.get(property) ?? 0) + 1);
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  return { store: proxy, counts };
}

const apps: INestApplicationContext[] = [];

async function boot(
  imports: unknown[],
  providers: unknown[],
  log?: KeptLog,
): Promise<INestApplicationContext> {
  const moduleRef = await Test.createTestingModule({
    imports: imports as never[],
    providers: [Heard, ...(providers as never[])],
  }).compile();
  if (log !== undefined) moduleRef.useLogger(log);
  const app = await moduleRef.init();
  apps.push(app);
  return app;
}

async function call(app: INestApplicationContext, tool: string, input: unknown = {}) {
  const definition = app.get(TaskToolRegistry).get(tool)!;
  return (await app.get(TaskToolRunner).start(definition, input, { principal: 'alice' })).taskId;
}

/** The task once it has ended (read every 25 ms, up to `ms`). */
async function ended(app: INestApplicationContext, taskId: string, ms = 10_000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const task = await app.get(TasksService).status(taskId);
    if (['completed', 'failed', 'cancelled'].includes(task.status) || Date.now() > deadline) {
      return task;
    }
    await sleep(25);
  }
}

const resultOf = (task: TaskRecord): unknown =>
  JSON.parse((task.result!.content[0] as { text: string }).text);

afterEach(async () => {
  while (apps.length > 0) await apps.pop()!.close();
  Logger.overrideLogger(false);
});

describe.each(Object.keys(STORES))('task.step on the %s store', (name) => {
  let storage: Storage;
  let parts: TasksModuleExtras;
  let counts: Map<string, number>;
  const log = new KeptLog();

  beforeAll(async () => {
    storage = await STORES[name]!(`steps_${name}`);
  }, 60_000);

  afterAll(async () => {
    await storage?.stop();
  });

  const start = async () => {
    const made = storage.parts();
    const seen = counted(made.store as TaskStore);
    counts = seen.counts;
    parts = { ...made, store: seen.store };
    log.errors.length = 0;
    Logger.overrideLogger(log);
    return await boot(
      [TasksModule.forRoot({ janitor: false, shutdown: { drainMs: 0 }, ...parts })],
      [StepTools],
      log,
    );
  };

  it('journals what a step returned (as JSON), one write each and no read; a terminal task drops the journal', async () => {
    const app = await start();
    const taskId = await call(app, 'order');
    const task = await ended(app, taskId);
    expect(task.status).toBe('completed');
    expect(resultOf(task)).toEqual({
      quote: { amount: 42, at: '1970-01-01T00:00:00.000Z' },
      nothing: true,
      key: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/),
      // As the store kept it while the task ran: `log` returned undefined.
      journal: { quote: { value: { amount: 42, at: '1970-01-01T00:00:00.000Z' } }, log: {} },
    });
    expect(callsOf(taskId, 'quote')).toHaveLength(1);
    expect(task.steps).toBeUndefined();
    // Create, two steps, complete: a compare-and-set each for the steps, and no read for them.
    expect(counts.get('compareAndSet')).toBe(3);
    const key = (resultOf(task) as { key: string }).key;
    const again = await call(app, 'order');
    expect((resultOf(await ended(app, again)) as { key: string }).key).not.toBe(key);
  });

  it('retries a failing step with backoff, and returns what its last attempt returned', async () => {
    const app = await start();
    const taskId = await call(app, 'flaky_step', { failures: 2 });
    const task = await ended(app, taskId);
    expect(resultOf(task)).toBe('charged on attempt 3');
    const times = callsOf(taskId, 'charge');
    expect(times).toHaveLength(3);
    // Jittered between half and all of 100 ms, then of 200 ms.
    expect(times[1]! - times[0]!).toBeGreaterThanOrEqual(45);
    expect(times[2]! - times[1]!).toBeGreaterThanOrEqual(95);
    expect(log.errors).toEqual([]);
  });

  it('fails the task with TaskStepError once the retries are spent, logging the cause once', async () => {
    const app = await start();
    const taskId = await call(app, 'flaky_step', { failures: 5 });
    const task = await ended(app, taskId);
    expect(task.status).toBe('failed');
    expect(task.error).toEqual({
      code: -32603,
      message: 'Step "charge" failed after 3 attempt(s)',
      data: { step: 'charge', attempts: 3 },
    });
    expect(callsOf(taskId, 'charge')).toHaveLength(3);
    expect(log.errors.filter((line) => line.includes('declined 3'))).toHaveLength(1);
    expect(new TaskStepError('x', 1, 'm').code).toBe(-32603);
  });

  it('passes a JSON-RPC error the step throws through at once, without retrying it', async () => {
    const app = await start();
    const taskId = await call(app, 'final_error');
    const task = await ended(app, taskId);
    expect(task.error).toEqual({ code: -32602, message: 'Unknown customer' });
    expect(callsOf(taskId, 'validate')).toHaveLength(1);
  });

  it('times an attempt out (its signal fires) and tries again', async () => {
    const app = await start();
    const taskId = await call(app, 'slow_step');
    const task = await ended(app, taskId);
    expect(resultOf(task)).toEqual({ value: 'attempt 2', signalled: 1 });
    const times = callsOf(taskId, 'fetch');
    expect(times[1]! - times[0]!).toBeGreaterThanOrEqual(140);
  });

  it('sleeps as a step: its end journaled when it starts; a bad length fails the call, loudly', async () => {
    const app = await start();
    const taskId = await call(app, 'napper', { ms: 200 });
    const { slept, until, started } = resultOf(await ended(app, taskId)) as Record<string, number>;
    expect(slept).toBeGreaterThanOrEqual(195);
    expect(until! - started!).toBeGreaterThanOrEqual(195);
    expect(until! - started!).toBeLessThan(400);
    const bad = await call(app, 'napper', { ms: -1 });
    expect((await ended(app, bad)).error).toEqual({ code: -32603, message: 'Internal error' });
    expect(log.errors.join('\n')).toContain('Sleep "nap": ms must be an integer from 0 to');
  });

  it('fails the call, loudly, when a step name is reached twice in one run', async () => {
    const app = await start();
    const taskId = await call(app, 'twice');
    const task = await ended(app, taskId);
    expect(task.error).toEqual({ code: -32603, message: 'Internal error' });
    expect(log.errors.join('\n')).toContain('Step "same" was reached twice in one run');
  });

  it('stops retrying when the task is cancelled during a backoff', async () => {
    const app = await start();
    const taskId = await call(app, 'backing_off');
    for (let i = 0; i < 100 && callsOf(taskId, 'retrying').length === 0; i++) await sleep(10);
    await app.get(TasksService).cancel(taskId, { principal: 'alice' });
    await sleep(200);
    expect(callsOf(taskId, 'retrying')).toHaveLength(1);
    expect((await app.get(TasksService).status(taskId)).status).toBe('cancelled');
  });
});

/** A queue-run tool whose first run stops between its steps: the queue runs it again. */
@Injectable()
class ReportTools {
  @TaskTool({
    name: 'report',
    queue: { name: 'reports', jobOptions: { retryLimit: 1, attempts: 2 } },
  })
  async report(_input: unknown, task: TaskContext) {
    const run = countRun(task.taskId);
    const fetched = await task.step('fetch', () => {
      called(task, 'fetch');
      return { rows: 3, run };
    });
    await task.progress(`fetched ${fetched.rows} rows`);
    const charged = await task.step('charge', () => {
      called(task, 'charge');
      return { id: `ch_${run}` };
    });
    if (run === 1) throw new Error('the worker stops here');
    await task.progress('writing');
    const written = await task.step('write', () => {
      called(task, 'write');
      return `report of run ${run}`;
    });
    return text({ fetched, charged, written });
  }
}

/** Steps after a pause: a listener has its LISTEN in place by then. */
@Injectable()
class PacedTools {
  @TaskTool({ name: 'paced' })
  async paced(_input: unknown, task: TaskContext) {
    await sleep(300);
    for (const name of ['a', 'b', 'c']) await task.step(name, () => name);
    await task.progress('stepped');
    return text('done');
  }
}

const expectReplayed = (taskId: string, task: TaskRecord) => {
  expect(task.status).toBe('completed');
  expect(runs.get(taskId)).toBe(2);
  // The first two steps ran in the first run only; their values came back in the second.
  expect(resultOf(task)).toEqual({
    fetched: { rows: 3, run: 1 },
    charged: { id: 'ch_1' },
    written: 'report of run 2',
  });
  expect(callsOf(taskId, 'fetch')).toHaveLength(1);
  expect(callsOf(taskId, 'charge')).toHaveLength(1);
  expect(callsOf(taskId, 'write')).toHaveLength(1);
  // The replayed ground's message was written once, by the first run.
  expect(messages.get(taskId)?.filter((message) => message === 'fetched 3 rows')).toHaveLength(1);
};

describe('a queue-run tool run again gets its journaled steps back', () => {
  let postgres: TestPostgres;
  let redis: TestRedis;

  beforeAll(async () => {
    [postgres, redis] = await Promise.all([startTestPostgres(), startTestRedis()]);
  }, 60_000);

  afterAll(async () => {
    await Promise.all([postgres?.stop(), redis?.stop()]);
  });

  it('on PostgreSQL with pg-boss', async () => {
    const options = { connection: postgres.url, schema: 'steps_queue' };
    const app = await boot(
      [
        TasksModule.forRoot({
          janitor: false,
          shutdown: { drainMs: 0 },
          store: new PostgresTaskStore(options),
          notifier: postgresNotifier(options),
        }),
        PgBossQueueModule.forRoot({
          connection: { connectionString: postgres.url, schema: 'steps_boss' },
          workers: { reports: { pollingIntervalSeconds: 0.5 } },
        }),
      ],
      [ReportTools],
    );
    const taskId = await call(app, 'report');
    expectReplayed(taskId, await ended(app, taskId, 15_000));
  }, 30_000);

  it('sends no change for a step on PostgreSQL (the wire shows none): only the message and the end', async () => {
    const options = { connection: postgres.url, schema: 'steps_quiet' };
    const app = await boot(
      [
        TasksModule.forRoot({
          janitor: false,
          shutdown: { drainMs: 0 },
          store: new PostgresTaskStore(options),
          notifier: postgresNotifier(options),
        }),
      ],
      [PacedTools],
    );
    const taskId = await call(app, 'paced');
    const channel = (app.get(TaskNotifier) as PostgresTaskNotifier).channelOf(taskId);
    const listener = new pg.Client({ connectionString: postgres.url });
    await listener.connect();
    const heard: string[] = [];
    listener.on('notification', (message) => heard.push(message.payload ?? ''));
    await listener.query(`LISTEN "${channel}"`);
    try {
      expect((await ended(app, taskId)).status).toBe('completed');
      await sleep(100);
      expect(heard).toHaveLength(2);
    } finally {
      await listener.end();
    }
  });

  it('on Redis with BullMQ', async () => {
    const options = { connection: redis.url, prefix: 'steps:' };
    @Module({
      imports: [
        BullModule.forRoot({
          connection: { host: '127.0.0.1', port: redis.port },
          prefix: 'steps-bull',
        }),
        BullModule.registerQueue({ name: 'reports' }),
      ],
      exports: [BullModule],
    })
    class Queues {}
    const app = await boot(
      [
        Queues,
        TasksModule.forRoot({
          janitor: false,
          shutdown: { drainMs: 0 },
          store: new RedisTaskStore(options),
          notifier: redisNotifier(options),
        }),
        BullQueueModule.forRoot(),
      ],
      [ReportTools],
    );
    const taskId = await call(app, 'report');
    expectReplayed(taskId, await ended(app, taskId, 15_000));
  }, 30_000);
});
