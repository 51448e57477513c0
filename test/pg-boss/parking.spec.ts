/**
 * Parked pg-boss jobs (issue 39): a queue-run method's long `task.sleep` and its wait for input
 * leave the worker's slot, and the job goes back to its queue until the sleep ends or the answer
 * (or a cancel) comes. On a real PostgreSQL, with the PostgreSQL task store, a worker of
 * concurrency 1 and pg-boss's default 2 s poll: the slot runs another job meanwhile, the job
 * wakes on time, the answer that lands before the worker moved the job still wakes it, a cancel
 * ends a parked job at once, and a tool's own job id fails the boot.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { Injectable, type INestApplicationContext } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import pg from 'pg';
import { TaskInternalError, TasksConfigError } from '../../src/errors.js';
import {
  OnTaskChange,
  type TaskContext,
  type TaskRecord,
  TaskTool,
  TasksModule,
  TasksService,
} from '../../src/index.js';
import { PgBossTaskQueue, TasksQueueModule } from '../../src/pg-boss/index.js';
import { taskJobId } from '../../src/pg-boss/pg-boss-task-queue.js';
import { TaskQueueWorkers } from '../../src/pg-boss/task-queue.workers.js';
import { PostgresTaskStore, postgresNotifier } from '../../src/postgres/index.js';
import type { JobOutcome } from '../../src/tools/task-tool.calls.js';
import { TaskToolRegistry } from '../../src/tools/task-tool.registry.js';
import { TaskToolRunner } from '../../src/tools/task-tool.runner.js';
import { accept, elicit, sleep } from '../support/helpers.js';
import { KeptLog } from '../support/kept-log.js';
import { startTestPostgres, type TestPostgres } from '../support/postgres-server.js';

const NAP_MS = 1_500;
const ALICE = { principal: 'alice' };

/** Calls of each step's function, by `taskId/step`, with when they ran. */
const calls = new Map<string, number[]>();
const called = (taskId: string, step: string): number => {
  const key = `${taskId}/${step}`;
  const times = calls.get(key) ?? [];
  times.push(Date.now());
  calls.set(key, times);
  return Date.now();
};
const callsOf = (taskId: string, step: string): number[] => calls.get(`${taskId}/${step}`) ?? [];

/** The status messages, and how often each task was asked for input, from this process's writes. */
const messages = new Map<string, string[]>();
const asked = new Map<string, number>();

@Injectable()
class Heard {
  @OnTaskChange()
  heard(record: TaskRecord): void {
    const { taskId, statusMessage, status } = record;
    if (statusMessage !== undefined) {
      const list = messages.get(taskId) ?? [];
      if (list.at(-1) !== statusMessage) list.push(statusMessage);
      messages.set(taskId, list);
    }
    if (status === 'input_required') asked.set(taskId, (asked.get(taskId) ?? 0) + 1);
  }
}

/** When each task's sleep was journaled to end, as the method read it after the sleep. */
const napEnds = new Map<string, number>();

@Injectable()
class ParkTools {
  constructor(private readonly tasks: TasksService) {}

  @TaskTool({ name: 'napper', queue: 'parks' })
  async napper(_input: unknown, task: TaskContext) {
    await task.step('a', () => called(task.taskId, 'a'));
    await task.sleep('nap', NAP_MS);
    // The sleep's end, as journaled (the journal goes with the task's end).
    napEnds.set(task.taskId, (await this.tasks.status(task.taskId)).steps!.nap!.until!);
    await task.step('b', () => called(task.taskId, 'b'));
    return { content: [{ type: 'text' as const, text: 'rested' }] };
  }

  @TaskTool({ name: 'asker', queue: 'parks' })
  async asker(_input: unknown, task: TaskContext) {
    called(task.taskId, 'run');
    const { name } = await task.requireInput({ name: elicit('Your name?') });
    const text = `hello ${String((name as { content?: { name?: string } }).content?.name)}`;
    return { content: [{ type: 'text' as const, text }] };
  }

  @TaskTool({ name: 'sleeper', queue: 'parks' })
  async sleeper(_input: unknown, task: TaskContext) {
    called(task.taskId, 'run');
    await task.sleep('long', 60_000);
    return { content: [] };
  }

  /**
   * Kept a second by pg-boss once sent (its own retention), unless its park keeps it longer. Its
   * task lives as long as its sleep (a job parks no longer than its task lives).
   */
  @TaskTool({
    name: 'month_sleeper',
    ttlMs: null,
    queue: { name: 'parks', jobOptions: { retentionSeconds: 1 } },
  })
  async monthSleeper(_input: unknown, task: TaskContext) {
    called(task.taskId, 'run');
    await task.sleep('month', 30 * 86_400_000);
    return { content: [] };
  }

  @TaskTool({ name: 'quick', queue: 'parks' })
  quick(_input: unknown, task: TaskContext) {
    called(task.taskId, 'run');
    return { content: [] };
  }
}

@Injectable()
class OwnIdTools {
  @TaskTool({ name: 'own_id', queue: { name: 'ids', jobOptions: { id: 'my-job' } } })
  ownId() {
    return { content: [] };
  }
}

let postgres: TestPostgres;
const apps: INestApplicationContext[] = [];
let schemas = 0;

/** An app with a worker on the PostgreSQL task store; `worker: false` on the in-memory one. */
async function boot(providers: unknown[], worker = true, log?: KeptLog) {
  const schema = `park_${++schemas}`;
  const store = { connection: postgres.url, schema: `tasks_${schema}` };
  const moduleRef = await Test.createTestingModule({
    imports: [
      TasksModule.forRoot({
        janitor: false,
        shutdown: { drainMs: 0 },
        // Unlimited TTLs allowed: month_sleeper's task outlives its 30-day sleep.
        maxTtlMs: null,
        ...(worker && {
          store: new PostgresTaskStore(store),
          notifier: postgresNotifier(store),
        }),
      }),
      // pg-boss's default poll (2 s): a prompt wake comes from this module, not from the poll.
      TasksQueueModule.forRoot({
        connection: { connectionString: postgres.url, schema: `boss_${schema}` },
        worker,
        workers: { parks: { concurrency: 1 } },
      }),
    ],
    providers: providers as never[],
  }).compile();
  if (log !== undefined) moduleRef.useLogger(log);
  const app = await moduleRef.init();
  apps.push(app);
  return { app, bossSchema: `boss_${schema}` };
}

async function call(app: INestApplicationContext, tool: string): Promise<string> {
  const definition = app.get(TaskToolRegistry).get(tool)!;
  return (await app.get(TaskToolRunner).start(definition, {}, ALICE)).taskId;
}

/** The task once `done` holds, read every 10 ms (up to `ms`; then as it is). */
async function until(
  app: INestApplicationContext,
  taskId: string,
  done: (task: TaskRecord) => boolean,
  ms = 5_000,
): Promise<TaskRecord> {
  const deadline = Date.now() + ms;
  for (;;) {
    const task = await app.get(TasksService).status(taskId);
    if (done(task) || Date.now() > deadline) return task;
    await sleep(10);
  }
}

const completed = (task: TaskRecord) => task.status === 'completed';

interface JobRow {
  state: string;
  retry_count: number;
  /** Milliseconds from now to the job's start (negative: past). */
  starts_in: number;
  /** Milliseconds from now to the job's keep_until. */
  kept_for: number;
  data: { parkedAt?: number };
}

/** The job row of a task, read directly from pg-boss's table (by the id made from the task's). */
async function jobOf(schema: string, taskId: string): Promise<JobRow | undefined> {
  const client = new pg.Client({ connectionString: postgres.url });
  await client.connect();
  try {
    const { rows } = await client.query(
      `SELECT state, retry_count, data, ` +
        `(EXTRACT(epoch FROM start_after - now()) * 1000)::float8 AS starts_in, ` +
        `(EXTRACT(epoch FROM keep_until - now()) * 1000)::float8 AS kept_for ` +
        `FROM "${schema}".job WHERE id = $1`,
      [taskJobId(taskId)],
    );
    return rows[0] as JobRow | undefined;
  } finally {
    await client.end();
  }
}

/** Waits until the task's job is parked: back on the queue, to start later. */
async function parkedJob(schema: string, taskId: string, ms = 5_000): Promise<JobRow | undefined> {
  const deadline = Date.now() + ms;
  for (;;) {
    const job = await jobOf(schema, taskId);
    if ((job?.state === 'retry' && job.starts_in > 0) || Date.now() > deadline) return job;
    await sleep(10);
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

describe('parked pg-boss jobs', () => {
  it('a sleep frees the slot for another job, and its job wakes on time as the same run', async () => {
    const { app, bossSchema } = await boot([ParkTools, Heard]);
    const taskId = await call(app, 'napper');
    const sleeping = await until(app, taskId, (task) => task.steps?.nap !== undefined);
    const napEnd = sleeping.steps!.nap!.until!;
    // While it sleeps, the one slot of the queue runs another job to its end.
    const other = await call(app, 'quick');
    const otherDone = await until(app, other, completed, NAP_MS + 1_000);
    expect(otherDone.status).toBe('completed');
    const otherAt = callsOf(other, 'run')[0]!;
    process.stdout.write(
      `pg-boss park: the other job ran ${napEnd - otherAt} ms before the sleep's end\n`,
    );
    expect(otherAt).toBeLessThan(napEnd);
    const task = await until(app, taskId, completed, NAP_MS + 2_000);
    expect(task.status).toBe('completed');
    const resumedAt = callsOf(taskId, 'b')[0]!;
    const lateness = resumedAt - napEnd;
    process.stdout.write(`pg-boss park: the sleep's job woke ${lateness} ms after its end\n`);
    expect(napEnds.get(taskId)).toBe(napEnd);
    expect(resumedAt).toBeGreaterThanOrEqual(napEnd);
    expect(lateness).toBeLessThan(500);
    expect(callsOf(taskId, 'a')).toHaveLength(1);
    expect(messages.get(taskId) ?? []).not.toContainEqual(expect.stringMatching(/Restarted/));
    // The park spent no retry; the job's id is the one made from its task's.
    expect(await jobOf(bossSchema, taskId)).toMatchObject({
      state: 'completed',
      retry_count: 0,
      data: { parkedAt: 0 },
    });
  });

  it('a wait for input frees the slot; the answer wakes the job, which asks no more', async () => {
    const { app, bossSchema } = await boot([ParkTools, Heard]);
    const taskId = await call(app, 'asker');
    expect((await until(app, taskId, (task) => task.status === 'input_required')).status).toBe(
      'input_required',
    );
    const parked = await parkedJob(bossSchema, taskId);
    // Parked for an hour at most (then it wakes and asks no more), kept past that.
    expect(parked).toMatchObject({ state: 'retry', retry_count: -1, data: { parkedAt: 0 } });
    expect(parked!.starts_in).toBeGreaterThan(3_500_000);
    expect(parked!.kept_for).toBeGreaterThan(parked!.starts_in + 13 * 86_400_000);
    // No timer kept for the hour: an answer ends most input parks long before it.
    const workers = app.get(TaskQueueWorkers) as unknown as { parks: Set<unknown> };
    expect(workers.parks.size).toBe(0);
    const other = await call(app, 'quick');
    expect((await until(app, other, completed, 3_000)).status).toBe('completed');
    expect((await app.get(TasksService).status(taskId)).status).toBe('input_required');
    const answeredAt = Date.now();
    await app.get(TasksService).update(taskId, ALICE, { name: accept('Ada') });
    const task = await until(app, taskId, completed);
    const latency = Date.now() - answeredAt;
    process.stdout.write(`pg-boss park: answer to completed in ${latency} ms\n`);
    expect(task.status).toBe('completed');
    expect(task.result).toMatchObject({ content: [{ type: 'text', text: 'hello Ada' }] });
    expect(latency).toBeLessThan(1_000);
    expect(asked.get(taskId)).toBe(1);
    expect(callsOf(taskId, 'run')).toHaveLength(2);
    expect(messages.get(taskId) ?? []).not.toContainEqual(expect.stringMatching(/Restarted/));
    expect(await jobOf(bossSchema, taskId)).toMatchObject({ state: 'completed', retry_count: 0 });
  });

  it('an answer that lands after the park but before the worker moved the job still wakes it', async () => {
    const { app, bossSchema } = await boot([ParkTools, Heard]);
    const tasks = app.get(TasksService);
    const runner = app.get(TaskToolRunner);
    // The real runJob; its park is answered before it reaches the worker, whose job is active.
    const runJob = runner.runJob.bind(runner);
    let answeredAt = 0;
    let stateThen: string | undefined;
    runner.runJob = async (...args): Promise<JobOutcome> => {
      const outcome = await runJob(...args);
      if (typeof outcome === 'object' && answeredAt === 0) {
        stateThen = (await jobOf(bossSchema, args[1].taskId))?.state;
        answeredAt = Date.now();
        await tasks.update(args[1].taskId, ALICE, { name: accept('Bo') });
      }
      return outcome;
    };
    const taskId = await call(app, 'asker');
    const task = await until(app, taskId, completed);
    const latency = Date.now() - answeredAt;
    process.stdout.write(`pg-boss park: an answer before the move, completed in ${latency} ms\n`);
    // The answer's own wake found the job running: only the worker's re-read woke it.
    expect(stateThen).toBe('active');
    expect(task.status).toBe('completed');
    expect(task.result).toMatchObject({ content: [{ type: 'text', text: 'hello Bo' }] });
    expect(latency).toBeLessThan(1_000);
    expect(asked.get(taskId)).toBe(1);
  });

  it('a cancel ends a parked job within a second: the job completes, the task is cancelled', async () => {
    const { app, bossSchema } = await boot([ParkTools, Heard]);
    const taskId = await call(app, 'sleeper');
    const parked = await parkedJob(bossSchema, taskId);
    expect(parked?.starts_in).toBeGreaterThan(55_000);
    const cancelledAt = Date.now();
    await app.get(TasksService).cancel(taskId, ALICE);
    let job = await jobOf(bossSchema, taskId);
    while (job?.state !== 'completed' && Date.now() - cancelledAt < 5_000) {
      await sleep(10);
      job = await jobOf(bossSchema, taskId);
    }
    const latency = Date.now() - cancelledAt;
    process.stdout.write(`pg-boss park: a cancelled parked job completed in ${latency} ms\n`);
    expect(job?.state).toBe('completed');
    expect(latency).toBeLessThan(1_000);
    expect((await app.get(TasksService).status(taskId)).status).toBe('cancelled');
    // The method did not run again for the cancel.
    expect(callsOf(taskId, 'run')).toHaveLength(1);
  });

  it('a park whose task re-read fails (the store away) stays parked, with a WARN, not an ERROR', async () => {
    const log = new KeptLog();
    const { app, bossSchema } = await boot([ParkTools, Heard], true, log);
    const runner = app.get(TaskToolRunner);
    const tasks = app.get(TasksService);
    const status = tasks.status.bind(tasks);
    let failed = 0;
    // The read after the move (TaskToolRunner.parked) meets a store that is away: the one read
    // made once the method has parked.
    const runJob = runner.runJob.bind(runner);
    runner.runJob = async (...args): Promise<JobOutcome> => {
      const outcome = await runJob(...args);
      if (typeof outcome === 'object') {
        tasks.status = () => {
          tasks.status = status;
          failed++;
          return Promise.reject(new TaskInternalError('Task store unavailable'));
        };
      }
      return outcome;
    };
    const taskId = await call(app, 'sleeper');
    expect(await parkedJob(bossSchema, taskId)).toMatchObject({ state: 'retry' });
    await sleep(50);
    process.stdout.write(
      `pg-boss park: a failed re-read logged ${log.errors.length} ERROR(s), ` +
        `${log.warnings.length} WARN(s)\n`,
    );
    expect(failed).toBe(1);
    expect(log.errors).toEqual([]);
    expect(log.warnings).toEqual([expect.stringContaining('could not check for answers')]);
  });

  it("a 30-day sleep outlives pg-boss's maintenance: the park keeps the job past its end", async () => {
    const { app, bossSchema } = await boot([ParkTools, Heard]);
    const taskId = await call(app, 'month_sleeper');
    const parked = await parkedJob(bossSchema, taskId);
    expect(parked?.starts_in).toBeGreaterThan(30 * 86_400_000 - 60_000);
    // The job's own retention (1 s) counted from the park's end, not from its sending.
    expect(parked!.kept_for - parked!.starts_in).toBeGreaterThanOrEqual(900);
    await sleep(1_200);
    // pg-boss's maintenance deletes (archives) a waiting job whose keep_until has passed.
    await app.get(PgBossTaskQueue).boss.maintain();
    expect(await jobOf(bossSchema, taskId)).toMatchObject({
      state: 'retry',
      data: { parkedAt: 0 },
    });
    await app.get(TasksService).cancel(taskId, ALICE);
    expect((await until(app, taskId, (task) => task.status === 'cancelled')).status).toBe(
      'cancelled',
    );
  });

  it("a tool's own jobOptions.id fails the boot, naming the tool", async () => {
    const error = await boot([OwnIdTools], false).then(
      () => new Error('expected the boot to fail'),
      (failure: Error) => failure,
    );
    expect(error).toBeInstanceOf(TasksConfigError);
    expect(error.message).toContain('Task tool "own_id" sets jobOptions.id on queue "ids"');
  });
});
