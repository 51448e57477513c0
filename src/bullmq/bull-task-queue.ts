import { Injectable } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { getQueueToken } from '@nestjs/bullmq';
import type { JobsOptions, Queue } from 'bullmq';
import { TasksConfigError } from '../errors.js';
import { type QueuedCall, TaskQueue } from '../tools/task-queue.js';
import type { TaskToolQueue } from '../tools/task-tool.decorator.js';

/** What a job carries: the call, and the answers its runs took (for a later run). */
export interface TaskJobData extends QueuedCall {
  answers?: Readonly<Record<string, unknown>>;
}

/**
 * The TaskQueue on the app's BullMQ queues (registered with `@nestjs/bullmq`). A job is named
 * after its tool; its options are the queue's `defaultJobOptions` and the tool's `jobOptions`.
 * Unless either says otherwise, a completed job is removed (the result lives in the task).
 */
@Injectable()
export class BullTaskQueue extends TaskQueue {
  private readonly queues = new Map<string, Queue>();

  constructor(private readonly modules: ModuleRef) {
    super();
  }

  /** The app's queue of that name; a queue the app did not register fails with the fix. */
  queue(name: string): Queue {
    let queue = this.queues.get(name);
    if (queue === undefined) {
      try {
        queue = this.modules.get<Queue>(getQueueToken(name), { strict: false });
      } catch {
        throw new TasksConfigError(
          `Task tools run on the queue "${name}", which the app does not register: add ` +
            `BullModule.registerQueue({ name: '${name}' }) from '@nestjs/bullmq' to its imports`,
        );
      }
      this.queues.set(name, queue);
    }
    return queue;
  }

  async enqueue(queue: Readonly<TaskToolQueue>, call: QueuedCall): Promise<void> {
    const target = this.queue(queue.name);
    const options = { ...(queue.jobOptions as JobsOptions | undefined) };
    if (
      options.removeOnComplete === undefined &&
      target.defaultJobOptions?.removeOnComplete === undefined
    ) {
      options.removeOnComplete = true;
    }
    const data: TaskJobData = call;
    await target.add(call.tool, data, options);
  }
}
