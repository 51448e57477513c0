import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { Injectable, type INestApplicationContext } from '@nestjs/common';
import { BullModule, getQueueToken } from '@nestjs/bullmq';
import { Test } from '@nestjs/testing';
import type { Queue } from 'bullmq';
import { BullTaskQueue, TasksQueueModule } from '../../src/bullmq/index.js';
import { FAIR_RANKS, fairOwnerKey } from '../../src/bullmq/fair-turns.js';
import { TasksConfigError } from '../../src/errors.js';
import { TaskQueue, TaskTool, TasksModule, TasksService } from '../../src/index.js';
import { TaskToolRegistry } from '../../src/tools/task-tool.registry.js';
import { TaskToolRunner } from '../../src/tools/task-tool.runner.js';
import { startTestRedis, type TestRedis } from '../support/redis-server.js';

/** How TasksQueueModule is wired into an app: its boot errors, forRootAsync, what a call enqueues. */

@Injectable()
class QueuedTools {
  @TaskTool({ name: 'queued', queue: { name: 'reports', jobOptions: { priority: 3 } } })
  queued() {
    return { content: [] };
  }
}

@Injectable()
class KeptTools {
  @TaskTool({ name: 'kept', queue: 'kept' })
  kept() {
    return { content: [] };
  }
}

@Injectable()
class DedupTools {
  @TaskTool({
    name: 'dedup',
    queue: { name: 'reports', jobOptions: { deduplication: { id: 'reports' } } },
  })
  dedup() {
    return { content: [] };
  }
}

@Injectable()
class OneJobTools {
  @TaskTool({ name: 'one_job', queue: { name: 'reports', jobOptions: { jobId: 'report' } } })
  oneJob() {
    return { content: [] };
  }
}

const apps: INestApplicationContext[] = [];
let redis: TestRedis;

async function boot(
  imports: unknown[],
  providers: unknown[] = [QueuedTools],
): Promise<INestApplicationContext> {
  const moduleRef = await Test.createTestingModule({
    imports: imports as never[],
    providers: providers as never[],
  }).compile();
  // Closed after the test even when its boot fails: the queues it connected are closed with it.
  apps.push(moduleRef);
  return moduleRef.init();
}

const bootError = (imports: unknown[], providers?: unknown[]) =>
  boot(imports, providers).then(
    () => {
      throw new Error('expected the boot to fail');
    },
    (error: Error) => error,
  );

const bull = () =>
  BullModule.forRoot({
    connection: { host: '127.0.0.1', port: redis.port },
    prefix: `spec-${process.pid}`,
  });

beforeAll(async () => {
  redis = await startTestRedis();
});

afterEach(async () => {
  while (apps.length > 0) await apps.pop()!.close();
});

afterAll(async () => {
  await redis?.stop();
});

describe('TasksQueueModule', () => {
  it('a queue-run tool in an app without TasksQueueModule fails the boot, naming the fix', async () => {
    const error = await bootError([TasksModule.forRoot({ janitor: false })]);
    expect(error).toBeInstanceOf(TasksConfigError);
    expect(error.message).toContain('"queued"');
    expect(error.message).toContain('TasksQueueModule.forRoot()');
  });

  it('a tool naming a queue the app does not register fails the boot, naming the fix', async () => {
    const error = await bootError([
      bull(),
      TasksModule.forRoot({ janitor: false }),
      TasksQueueModule.forRoot(),
    ]);
    expect(error).toBeInstanceOf(TasksConfigError);
    expect(error.message).toContain("BullModule.registerQueue({ name: 'reports' })");
  });

  it("a tool's own jobId fails the boot, naming the tool: every call would be one job", async () => {
    const error = await bootError(
      [
        bull(),
        BullModule.registerQueue({ name: 'reports' }),
        TasksModule.forRoot({ janitor: false }),
        TasksQueueModule.forRoot({ worker: false }),
      ],
      [OneJobTools],
    );
    expect(error).toBeInstanceOf(TasksConfigError);
    expect(error.message).toBe(
      'Task tool "one_job" sets jobId "report" in its jobOptions (queue "reports"): a task\'s ' +
        "job takes the task's id, one job per call; remove jobId",
    );
  });

  it("a tool's deduplication fails the boot: later calls' jobs would be dropped", async () => {
    const own = await bootError(
      [
        bull(),
        BullModule.registerQueue({ name: 'reports' }),
        TasksModule.forRoot({ janitor: false }),
        TasksQueueModule.forRoot({ worker: false }),
      ],
      [DedupTools],
    );
    expect(own).toBeInstanceOf(TasksConfigError);
    expect(own.message).toBe(
      'Task tool "dedup" sets deduplication an object in its jobOptions (queue "reports"): ' +
        "BullMQ would drop a call's job as a duplicate of another's, and its task would never " +
        'run; remove deduplication',
    );
  });

  it('forRootAsync binds TaskQueue; a call stores its task and adds a job with the tool options', async () => {
    const app = await boot([
      bull(),
      BullModule.registerQueue({ name: 'reports' }),
      TasksModule.forRoot({ janitor: false }),
      TasksQueueModule.forRootAsync({ useFactory: async () => ({ worker: false }) }),
    ]);
    expect(app.get(TaskQueue)).toBeInstanceOf(BullTaskQueue);
    const tool = app.get(TaskToolRegistry).get('queued')!;
    const record = await app.get(TaskToolRunner).start(tool, {}, { principal: 'alice' });
    expect(record.status).toBe('working');
    expect((await app.get(TasksService).status(record.taskId)).status).toBe('working');
    const queue = app.get<Queue>(getQueueToken('reports'));
    // No worker in this process (worker: false): the job waits.
    const [job] = await queue.getJobs(['prioritized', 'waiting']);
    expect(job?.name).toBe('queued');
    // The job's id is its task's: a wake finds it from the task alone.
    expect(job?.id).toBe(record.taskId);
    expect(job?.data).toEqual({
      tool: 'queued',
      taskId: record.taskId,
      input: {},
      ownerKey: fairOwnerKey({ principal: 'alice' }),
    });
    // The queue is fair (the default): level 3 (the tool's priority), alice's first rank.
    expect(job?.opts.priority).toBe(3 * FAIR_RANKS + 1);
    expect(job?.opts.removeOnComplete).toBe(true);
    await queue.obliterate({ force: true });
  });

  it("keeps completed jobs when the queue's defaultJobOptions say so (removeOnComplete: false)", async () => {
    const app = await boot(
      [
        bull(),
        BullModule.registerQueue({ name: 'kept', defaultJobOptions: { removeOnComplete: false } }),
        TasksModule.forRoot({ janitor: false }),
        TasksQueueModule.forRoot({ worker: false }),
      ],
      [KeptTools],
    );
    const tool = app.get(TaskToolRegistry).get('kept')!;
    await app.get(TaskToolRunner).start(tool, {}, { principal: 'alice' });
    const queue = app.get<Queue>(getQueueToken('kept'));
    const [job] = await queue.getJobs(['prioritized']);
    expect(job?.opts.removeOnComplete).toBe(false);
    await queue.obliterate({ force: true });
  });
});
