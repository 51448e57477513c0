import { createServer, type AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { Injectable, type INestApplicationContext } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import PgBoss from 'pg-boss';
import pg from 'pg';
import { TasksConfigError } from '../../src/errors.js';
import {
  TaskQueue,
  TaskTool,
  TasksModule,
  TasksService,
  type TaskContext,
} from '../../src/index.js';
import { PgBossTaskQueue, TasksQueueModule } from '../../src/pg-boss/index.js';
import { FAIR_RANKS, fairOwnerKey } from '../../src/pg-boss/pg-boss-task-queue.js';
import { PostgresTaskStore, postgresNotifier } from '../../src/postgres/index.js';
import type { TaskRecord } from '../../src/task/record.js';
import { TaskToolRegistry } from '../../src/tools/task-tool.registry.js';
import { TaskToolRunner } from '../../src/tools/task-tool.runner.js';
import { accept, elicit, sleep } from '../support/helpers.js';
import { startTestPostgres, type TestPostgres } from '../support/postgres-server.js';

/**
 * TasksQueueModule of `nestjs-mcp-tasks/pg-boss` on a real PostgreSQL and real pg-boss: its boot
 * errors, what a call sends, and the worker's runs (completion, retries, a job whose worker died,
 * a job that outlives its `expireInSeconds`).
 */

/** Runs of each tool's method in this process, by task id. */
const runs = new Map<string, number>();
const countRun = (taskId: string): number => {
  const run = (runs.get(taskId) ?? 0) + 1;
  runs.set(taskId, run);
  return run;
};

@Injectable()
class QueuedTools {
  @TaskTool({ name: 'report', queue: { name: 'reports', jobOptions: { priority: 3 } } })
  async report(input: { month?: string }, task: TaskContext) {
    countRun(task.taskId);
    await task.progress(`Collecting ${input.month ?? '?'}`);
    return { content: [{ type: 'text' as const, text: `report ${input.month ?? '?'}` }] };
  }

  @TaskTool({ name: 'flaky', queue: { name: 'flaky', jobOptions: { retryLimit: 1 } } })
  flaky(_input: unknown, task: TaskContext) {
    if (countRun(task.taskId) === 1) throw new Error('first run fails');
    return { content: [{ type: 'text' as const, text: 'second run' }] };
  }

  @TaskTool({ name: 'slow', queue: 'slow' })
  async slow(input: { ms: number }, task: TaskContext) {
    countRun(task.taskId);
    await sleep(input.ms);
    return { content: [{ type: 'text' as const, text: 'slow done' }] };
  }
}

/** When each task's method began, and when its signal fired, by task id. */
const started = new Map<string, number>();
const aborted = new Map<string, number>();

@Injectable()
class CancelTools {
  @TaskTool({ name: 'until_cancel', queue: 'waits' })
  async untilCancel(_input: unknown, task: TaskContext) {
    countRun(task.taskId);
    started.set(task.taskId, Date.now());
    await new Promise<void>((resolve) => task.signal.addEventListener('abort', () => resolve()));
    aborted.set(task.taskId, Date.now());
    return { content: [] };
  }
}

@Injectable()
class AskTools {
  @TaskTool({ name: 'ask', queue: { name: 'asks', jobOptions: { retryLimit: 1 } } })
  async ask(_input: unknown, task: TaskContext) {
    const run = countRun(task.taskId);
    const { name: answer } = await task.requireInput({ name: elicit('Your name?') });
    const name = String((answer as { content?: { name?: string } }).content?.name);
    // The first run parks at the question, and the answer wakes it (the same run, the method
    // called again): that run dies after the answer, and the next gets it back without asking.
    if (run === 2) throw new Error('the run stops after the answer');
    return { content: [{ type: 'text' as const, text: `hello ${name}` }] };
  }
}

/** The order the `turn` tool's jobs ran in, by principal. */
const order: string[] = [];

@Injectable()
class TurnTools {
  @TaskTool({ name: 'turn', queue: 'turns' })
  async turn(input: { who: string }) {
    order.push(input.who);
    await sleep(20);
    return { content: [] };
  }
}

@Injectable()
class UrgentTools {
  @TaskTool({ name: 'urgent', queue: { name: 'urgent', jobOptions: { priority: 5_000 } } })
  urgent() {
    return { content: [] };
  }
}

const apps: INestApplicationContext[] = [];
let postgres: TestPostgres;

async function boot(
  imports: unknown[],
  providers: unknown[] = [QueuedTools, CancelTools, AskTools, TurnTools],
): Promise<INestApplicationContext> {
  const moduleRef = await Test.createTestingModule({
    imports: imports as never[],
    providers: providers as never[],
  }).compile();
  const app = await moduleRef.init();
  apps.push(app);
  return app;
}

/** Fresh pg-boss schema per test, so no test sees another's jobs. */
let schemas = 0;
const connection = (extra: Partial<PgBoss.ConstructorOptions> = {}) => ({
  connectionString: postgres.url,
  schema: `boss_${++schemas}`,
  ...extra,
});

const tasksModule = () => TasksModule.forRoot({ janitor: false, shutdown: { drainMs: 0 } });

/** The TasksModule of instances that share tasks: the PostgreSQL store and notifier. */
const sharedTasksModule = (schema: string) => {
  const options = { connection: postgres.url, schema };
  return TasksModule.forRoot({
    janitor: false,
    shutdown: { drainMs: 0 },
    store: new PostgresTaskStore(options),
    notifier: postgresNotifier(options),
  });
};

async function call(
  app: INestApplicationContext,
  tool: string,
  input: unknown,
  principal = 'alice',
) {
  const definition = app.get(TaskToolRegistry).get(tool)!;
  return app.get(TaskToolRunner).start(definition, input, { principal });
}

/** The task once `done` holds, read every 50 ms (up to `ms`). */
async function until(
  app: INestApplicationContext,
  taskId: string,
  done: (task: TaskRecord) => boolean,
  ms = 10_000,
): Promise<TaskRecord> {
  const deadline = Date.now() + ms;
  for (;;) {
    const task = await app.get(TasksService).status(taskId);
    if (done(task) || Date.now() > deadline) return task;
    await sleep(50);
  }
}

const ended = (task: TaskRecord) => task.status === 'completed' || task.status === 'failed';

/** Reads pg-boss's job rows directly (its table, in the test's schema). */
async function jobs(schema: string, queue: string) {
  const client = new pg.Client({ connectionString: postgres.url });
  await client.connect();
  try {
    const { rows } = await client.query(
      `SELECT id, state, priority, retry_count, data FROM "${schema}".job WHERE name = $1`,
      [queue],
    );
    return rows as {
      id: string;
      state: string;
      priority: number;
      retry_count: number;
      data: unknown;
    }[];
  } finally {
    await client.end();
  }
}

beforeAll(async () => {
  postgres = await startTestPostgres();
});

afterEach(async () => {
  while (apps.length > 0) await apps.pop()!.close();
});

afterAll(async () => {
  await postgres?.stop();
});

describe('TasksQueueModule (pg-boss)', () => {
  it('fails the boot on options without a connection, naming the fix', async () => {
    const error = await boot([
      tasksModule(),
      TasksQueueModule.forRoot({
        connection: '',
        workers: { reports: { concurrency: 0 } },
        fair: 'yes' as never,
      }),
    ]).then(
      () => new Error('expected the boot to fail'),
      (failure: Error) => failure,
    );
    expect(error).toBeInstanceOf(TasksConfigError);
    expect(error.message).toContain('connection must name the PostgreSQL of the queues');
    expect(error.message).toContain('workers.reports.concurrency must be an integer >= 1');
    expect(error.message).toContain('TasksQueueModule option "fair" must be true, false or');
  });

  it('fails the boot when PostgreSQL is not there, naming where it was sought (no password)', async () => {
    const closed = await new Promise<number>((resolve) => {
      const server = createServer().listen(0, '127.0.0.1', () => {
        const { port } = server.address() as AddressInfo;
        server.close(() => resolve(port));
      });
    });
    const error = await boot([
      tasksModule(),
      TasksQueueModule.forRoot({
        connection: `postgres://app:s3cret@127.0.0.1:${closed}/tasks`,
      }),
    ]).then(
      () => new Error('expected the boot to fail'),
      (failure: Error) => failure,
    );
    expect(error.message).toContain(`could not start on PostgreSQL at 127.0.0.1:${closed}/tasks`);
    expect(error.message).toContain('ECONNREFUSED');
    expect(error.message).not.toContain('s3cret');
  });

  it('a tool whose priority leaves no room for fair turns fails the boot, naming the fix', async () => {
    const error = await boot(
      [tasksModule(), TasksQueueModule.forRoot({ connection: connection(), worker: false })],
      [UrgentTools],
    ).then(
      () => new Error('expected the boot to fail'),
      (failure: Error) => failure,
    );
    expect(error).toBeInstanceOf(TasksConfigError);
    expect(error.message).toContain('"urgent" runs on the fair queue "urgent" with priority 5000');
    expect(error.message).toContain("fair: { 'urgent': false }");
  });

  it('forRootAsync binds TaskQueue; a call stores its task, then sends a job with the tool options', async () => {
    const options = connection();
    const app = await boot([
      tasksModule(),
      TasksQueueModule.forRootAsync({
        useFactory: async () => ({ connection: options, worker: false }),
      }),
    ]);
    expect(app.get(TaskQueue)).toBeInstanceOf(PgBossTaskQueue);
    const record = await call(app, 'report', { month: 'May' });
    expect(record.status).toBe('working');
    // No worker in this process (worker: false): the job waits.
    const [job, ...more] = await jobs(options.schema, 'reports');
    expect(more).toEqual([]);
    expect(job).toMatchObject({
      state: 'created',
      // The queue is fair (the default): level 3 (the tool's priority), alice's first rank.
      priority: 3 * FAIR_RANKS + FAIR_RANKS - 1,
    });
    expect(job?.data).toEqual({
      tool: 'report',
      taskId: record.taskId,
      input: { month: 'May' },
      ownerKey: fairOwnerKey({ principal: 'alice' }),
    });
  });

  it('a worker runs the job: progress, then the result completes the task', async () => {
    const options = connection();
    const app = await boot([
      tasksModule(),
      TasksQueueModule.forRoot({
        connection: options,
        workers: { reports: { pollingIntervalSeconds: 0.5 } },
      }),
    ]);
    const record = await call(app, 'report', { month: 'June' });
    const task = await until(app, record.taskId, ended);
    expect(task.status).toBe('completed');
    expect(task.result).toMatchObject({ content: [{ type: 'text', text: 'report June' }] });
    expect(runs.get(record.taskId)).toBe(1);
    await sleep(100);
    expect((await jobs(options.schema, 'reports')).map((job) => job.state)).toEqual(['completed']);
  });

  it('a run that throws leaves the task working and pg-boss runs it again (retryLimit)', async () => {
    const options = connection();
    const app = await boot([
      tasksModule(),
      TasksQueueModule.forRoot({
        connection: options,
        workers: { flaky: { pollingIntervalSeconds: 0.5 } },
      }),
    ]);
    const record = await call(app, 'flaky', {});
    const task = await until(app, record.taskId, ended);
    expect(task.status).toBe('completed');
    expect(task.result).toMatchObject({ content: [{ type: 'text', text: 'second run' }] });
    expect(runs.get(record.taskId)).toBe(2);
  });

  it('the job of a worker that died runs again on another once its expireInSeconds pass', async () => {
    // The dead worker: a PgBoss that fetches the job and then never reports on it again.
    const options = connection({ maintenanceIntervalSeconds: 1 });
    const api = await boot([
      sharedTasksModule(`tasks_${options.schema}`),
      TasksQueueModule.forRoot({
        connection: options,
        worker: false,
        queues: { slow: { expireInSeconds: 1, retryLimit: 1 } },
      }),
    ]);
    const record = await call(api, 'slow', { ms: 10 });
    const dead = new PgBoss({ ...options, supervise: false, schedule: false });
    dead.on('error', () => undefined);
    await dead.start();
    const [taken] = await dead.fetch('slow');
    expect(taken?.data).toMatchObject({ taskId: record.taskId });
    await dead.stop({ graceful: false, wait: true });
    const started = Date.now();
    // A worker process of the same app: it finds the job once pg-boss's maintenance expired it.
    const worker = await boot([
      sharedTasksModule(`tasks_${options.schema}`),
      TasksQueueModule.forRoot({
        connection: options,
        workers: { slow: { pollingIntervalSeconds: 0.5 } },
      }),
    ]);
    void worker;
    const task = await until(api, record.taskId, ended);
    expect(task.status).toBe('completed');
    expect(runs.get(record.taskId)).toBe(1);
    expect(Date.now() - started).toBeLessThan(6_000);
    expect(await jobs(options.schema, 'slow')).toMatchObject([
      { state: 'completed', retry_count: 1 },
    ]);
  });

  it('a job that runs past its expireInSeconds is kept alive by its worker, not run twice', async () => {
    const options = connection({ maintenanceIntervalSeconds: 1 });
    const app = await boot([
      tasksModule(),
      TasksQueueModule.forRoot({
        connection: options,
        queues: { slow: { expireInSeconds: 1, retryLimit: 2 } },
        workers: { slow: { pollingIntervalSeconds: 0.5, concurrency: 2 } },
      }),
    ]);
    const record = await call(app, 'slow', { ms: 3_500 });
    const task = await until(app, record.taskId, ended);
    expect(task.status).toBe('completed');
    expect(runs.get(record.taskId)).toBe(1);
    expect((await jobs(options.schema, 'slow')).map((job) => job.retry_count)).toEqual([0]);
  });

  it('a cancel on another instance stops the job on its worker within 1 s; the job completes', async () => {
    const options = connection();
    const shared = `tasks_${options.schema}`;
    const api = await boot([
      sharedTasksModule(shared),
      TasksQueueModule.forRoot({ connection: options, worker: false }),
    ]);
    await boot([
      sharedTasksModule(shared),
      TasksQueueModule.forRoot({
        connection: options,
        workers: { waits: { pollingIntervalSeconds: 0.5 } },
      }),
    ]);
    const record = await call(api, 'until_cancel', {});
    const deadline = Date.now() + 10_000;
    while (!started.has(record.taskId) && Date.now() < deadline) await sleep(20);
    expect(started.has(record.taskId)).toBe(true);
    const cancelledAt = Date.now();
    await api.get(TasksService).cancel(record.taskId, { principal: 'alice' });
    while (!aborted.has(record.taskId) && Date.now() < deadline) await sleep(5);
    const latency = aborted.get(record.taskId)! - cancelledAt;
    process.stdout.write(`pg-boss cancel across instances: signal fired after ${latency} ms\n`);
    expect(latency).toBeLessThan(1_000);
    expect((await api.get(TasksService).status(record.taskId)).status).toBe('cancelled');
    await sleep(200);
    expect(await jobs(options.schema, 'waits')).toMatchObject([{ state: 'completed' }]);
    expect(runs.get(record.taskId)).toBe(1);
  });

  it('the job of a worker that died on its last run fails its task (pg-boss failed it)', async () => {
    const options = connection({ maintenanceIntervalSeconds: 1 });
    const shared = `tasks_${options.schema}`;
    const api = await boot([
      sharedTasksModule(shared),
      TasksQueueModule.forRoot({
        connection: options,
        worker: false,
        queues: { slow: { expireInSeconds: 1, retryLimit: 0 } },
      }),
    ]);
    const record = await call(api, 'slow', { ms: 10 });
    const dead = new PgBoss({ ...options, supervise: false, schedule: false });
    dead.on('error', () => undefined);
    await dead.start();
    expect(await dead.fetch('slow')).toHaveLength(1);
    await dead.stop({ graceful: false, wait: true });
    await boot([
      sharedTasksModule(shared),
      TasksQueueModule.forRoot({
        connection: options,
        workers: { slow: { pollingIntervalSeconds: 0.5 } },
      }),
    ]);
    const task = await until(api, record.taskId, ended);
    expect(task.status).toBe('failed');
    expect(task.error?.code).toBe(-32603);
    expect(runs.get(record.taskId)).toBeUndefined();
    expect(await jobs(options.schema, 'slow')).toMatchObject([{ state: 'failed' }]);
  });

  it('input requests: answered on another instance; a later run gets the answers back', async () => {
    const options = connection();
    const shared = `tasks_${options.schema}`;
    const api = await boot([
      sharedTasksModule(shared),
      TasksQueueModule.forRoot({ connection: options, worker: false }),
    ]);
    await boot([
      sharedTasksModule(shared),
      TasksQueueModule.forRoot({
        connection: options,
        workers: { asks: { pollingIntervalSeconds: 0.5 } },
      }),
    ]);
    const record = await call(api, 'ask', {});
    const asking = await until(api, record.taskId, (task) => task.status === 'input_required');
    expect(asking.status).toBe('input_required');
    await api.get(TasksService).update(
      record.taskId,
      { principal: 'alice' },
      {
        name: accept('Ada'),
      },
    );
    const task = await until(api, record.taskId, ended);
    expect(task.status).toBe('completed');
    expect(task.result).toMatchObject({ content: [{ type: 'text', text: 'hello Ada' }] });
    expect(runs.get(record.taskId)).toBe(3);
    const [job] = await jobs(options.schema, 'asks');
    expect(job).toMatchObject({ state: 'completed', retry_count: 1 });
    expect((job!.data as { answers?: unknown }).answers).toEqual({ name: accept('Ada') });
  });

  it.each([
    [true, ['mallory', 'bob', 'mallory', 'mallory', 'mallory', 'mallory']],
    [false, ['mallory', 'mallory', 'mallory', 'mallory', 'mallory', 'bob']],
  ])(
    'fair: %s: mallory’s backlog of 5 and bob’s one job run in the order %j',
    async (fair, runs) => {
      const options = connection();
      const shared = `tasks_${options.schema}`;
      const api = await boot([
        sharedTasksModule(shared),
        TasksQueueModule.forRoot({ connection: options, worker: false, fair }),
      ]);
      const ids: string[] = [];
      for (let i = 0; i < 5; i++)
        ids.push((await call(api, 'turn', { who: 'mallory' }, 'mallory')).taskId);
      ids.push((await call(api, 'turn', { who: 'bob' }, 'bob')).taskId);
      order.length = 0;
      await boot([
        sharedTasksModule(shared),
        TasksQueueModule.forRoot({
          connection: options,
          fair,
          workers: { turns: { pollingIntervalSeconds: 0.5 } },
        }),
      ]);
      for (const id of ids) expect((await until(api, id, ended)).status).toBe('completed');
      expect(order).toEqual(runs);
    },
  );
});
