import { Inject, Injectable } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { getQueueToken } from '@nestjs/bullmq';
import { ErrorCode, type Job, type JobsOptions, type Queue } from 'bullmq';
import { TasksConfigError } from '../errors.js';
import type { TaskOwner } from '../task.js';
import { type QueuedCall, TaskQueue } from '../tools/task-queue.js';
import type { TaskToolQueue } from '../tools/task-tool.decorator.js';
import { isFairQueue } from '../tools/queue-module-definition.js';
import { FairTurns, fairPriority } from './fair-turns.js';
import { TASKS_QUEUE_OPTIONS, type TasksQueueModuleOptions } from './tasks-queue.options.js';

/** What a job carries: the call, and the answers its runs took (for a later run). */
export interface TaskJobData extends QueuedCall {
  answers?: Readonly<Record<string, unknown>>;
  /**
   * On a fair queue: the key of the task's owner (a hash of principal and tenant), whose turn
   * the job gives back when it ends.
   */
  ownerKey?: string;
  /**
   * How many times the job parked (see `TaskQueueWorkers`): BullMQ counts a start of the job
   * after each park in `attemptsStarted`, and the run number the method sees leaves them out.
   */
  parks?: number;
  /** The job's `attemptsStarted` when it last parked: the next start is its wake, not a restart. */
  parkedAt?: number;
}

/**
 * The TaskQueue on the app's BullMQ queues (registered with `@nestjs/bullmq`). A job is named
 * after its tool, and its id is its task's id (so that `wake` finds it from the task alone); its
 * options are the queue's `defaultJobOptions` and the tool's `jobOptions` (a tool's `jobId` fails
 * the boot, see TaskQueueWorkers). Unless either says otherwise, a completed job is removed (the
 * result lives in the task). On a fair queue (the default, see `TasksQueueModuleOptions.fair`)
 * the job's priority is its owner's turn (see FairTurns), within the level its `priority` option
 * sets.
 */
@Injectable()
export class BullTaskQueue extends TaskQueue {
  private readonly queues = new Map<string, Queue>();
  private readonly turns = new FairTurns();

  constructor(
    private readonly modules: ModuleRef,
    @Inject(TASKS_QUEUE_OPTIONS) private readonly options: TasksQueueModuleOptions,
  ) {
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

  /** Whether the queue of that name takes fair turns across owners. */
  isFair(name: string): boolean {
    return isFairQueue(this.options.fair, name);
  }

  /**
   * The priority level of a tool's jobs: its `priority` job option, else its queue's default
   * (0 without either).
   */
  priorityLevel(queue: Readonly<TaskToolQueue>): number {
    const own = (queue.jobOptions as JobsOptions | undefined)?.priority;
    return own ?? this.queue(queue.name).defaultJobOptions?.priority ?? 0;
  }

  async enqueue(
    queue: Readonly<TaskToolQueue>,
    call: QueuedCall,
    owner: Required<TaskOwner>,
  ): Promise<void> {
    const target = this.queue(queue.name);
    const options = { ...(queue.jobOptions as JobsOptions | undefined) };
    if (
      options.removeOnComplete === undefined &&
      target.defaultJobOptions?.removeOnComplete === undefined
    ) {
      options.removeOnComplete = true;
    }
    // A task id (43 base64url characters) has no ':' and is never an integer, as BullMQ requires
    // of a custom id; and no two tasks share one, so no add is dropped as a duplicate.
    options.jobId = call.taskId;
    const data: TaskJobData = { ...call };
    if (this.isFair(queue.name)) {
      // One round trip before the add: the owner's rank, with the job's id in its set.
      const turn = await this.turns.take(target, owner, call.taskId);
      options.priority = fairPriority(this.priorityLevel(queue), turn.rank);
      data.ownerKey = turn.ownerKey;
      try {
        await target.add(call.tool, data, options);
      } catch (error) {
        await this.turns.give(target, turn.ownerKey, call.taskId).catch(() => undefined);
        throw error;
      }
      return;
    }
    await target.add(call.tool, data, options);
  }

  /**
   * Makes the task's parked job run now: a job in BullMQ's delayed set (its id is the task's) is
   * moved to the queue, with its priority. One round trip (BullMQ's promote script, which checks
   * the delayed set and moves the job at once). A job that is not delayed (waiting, running,
   * completed, gone, or never parked) is left as it is: the script answers "not in the delayed
   * state", which is no error here. A job given back at shutdown (delayed a second) may be
   * promoted too: it then runs at once, on any worker.
   */
  override async wake(queue: Readonly<TaskToolQueue>, taskId: string): Promise<void> {
    try {
      await this.queue(queue.name).getBackend().promote(taskId);
    } catch (error) {
      if ((error as { code?: unknown }).code === ErrorCode.JobNotInState) return;
      throw error;
    }
  }

  /**
   * Gives back the turn of a job that ended: completed, or failed for good. A job of a queue that
   * is not fair (or was not when it was added) has none.
   */
  async ended(job: Job<TaskJobData>): Promise<void> {
    const { ownerKey } = job.data;
    if (ownerKey === undefined || job.id === undefined) return;
    await this.turns.give(this.queue(job.queueName), ownerKey, job.id);
  }
}
