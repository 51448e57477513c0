/**
 * TaskQueue.wake from the API's side: the `tasks/update` that brings an answer wakes the task's
 * parked job through the bound TaskQueue (here a custom one, as an app may bind, whose queue is
 * away), and a queue fault answers the update with -32603 "Task queue unavailable" (the answers
 * are kept: a client that sends them again wakes the job then) while it is logged once a minute,
 * not once per update. On the in-memory store, in process.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Global, Injectable, type INestApplicationContext, Module } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import {
  type QueuedCall,
  type TaskContext,
  TaskQueue,
  TaskTool,
  TasksModule,
  TasksService,
} from '../../src/index.js';
import type { TaskOwner } from '../../src/entries/store.js';
import { TaskInternalError } from '../../src/errors.js';
import type { TaskToolQueue } from '../../src/tools/task-tool.decorator.js';
import { TaskToolRegistry } from '../../src/tools/task-tool.registry.js';
import { TaskToolRunner } from '../../src/tools/task-tool.runner.js';
import { elicit, accept } from '../support/helpers.js';
import { KeptLog } from '../support/kept-log.js';

/** A queue that takes every job and cannot wake any: its connection is away. */
@Injectable()
class AwayQueue extends TaskQueue {
  readonly enqueued: QueuedCall[] = [];
  wakes = 0;
  enqueue(_queue: Readonly<TaskToolQueue>, call: QueuedCall): Promise<void> {
    this.enqueued.push(call);
    return Promise.resolve();
  }
  override wake(): Promise<void> {
    this.wakes++;
    return Promise.reject(new Error('connect ECONNREFUSED 127.0.0.1:6399'));
  }
}

/** Bound as the app's TaskQueue, as TasksQueueModule binds its own (global). */
@Global()
@Module({
  providers: [AwayQueue, { provide: TaskQueue, useExisting: AwayQueue }],
  exports: [AwayQueue, TaskQueue],
})
class AwayQueueModule {}

@Injectable()
class Tools {
  @TaskTool({ name: 'queued', queue: 'work' })
  queued(_input: unknown, _task: TaskContext) {
    return { content: [] };
  }
}

const alice: TaskOwner = { principal: 'alice', tenant: null };
let app: INestApplicationContext;
const log = new KeptLog();

beforeAll(async () => {
  const moduleRef = await Test.createTestingModule({
    imports: [AwayQueueModule, TasksModule.forRoot({ janitor: false, shutdown: { drainMs: 0 } })],
    providers: [Tools],
  }).compile();
  moduleRef.useLogger(log);
  app = await moduleRef.init();
});

afterAll(async () => {
  await app?.close();
});

describe('TaskQueue.wake, from the API', () => {
  it('answers an update whose wake meets a queue fault with -32603, logged once a minute', async () => {
    const tasks = app.get(TasksService);
    const queue = app.get(AwayQueue);
    const tool = app.get(TaskToolRegistry).get('queued')!;
    const errors: unknown[] = [];
    for (let i = 0; i < 5; i++) {
      const { taskId } = await app.get(TaskToolRunner).start(tool, {}, alice);
      // What the job's run does before it parks: the question is out.
      await tasks.requireInput(taskId, { name: elicit('Your name?') });
      errors.push(
        await tasks.update(taskId, alice, { name: accept('Ada') }).then(
          () => undefined,
          (error: unknown) => error,
        ),
      );
      // The answer is kept for the job, which a resent update would wake.
      expect((await tasks.status(taskId)).inputResponses).toEqual({ name: accept('Ada') });
    }
    expect(queue.enqueued).toHaveLength(5);
    expect(queue.wakes).toBe(5);
    expect(errors.every((error) => error instanceof TaskInternalError)).toBe(true);
    expect((errors[0] as Error).message).toBe('Task queue unavailable');
    const logged = log.errors.filter((line) => line.includes('could not wake a parked job'));
    expect(logged).toEqual([
      expect.stringContaining(
        'Task tool queued could not wake a parked job: Error: connect ECONNREFUSED',
      ),
    ]);
  });
});
