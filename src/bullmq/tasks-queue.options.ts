import type { WorkerOptions } from 'bullmq';

/** The worker options this module sets itself: the rest of BullMQ's WorkerOptions are the app's. */
export type TaskWorkerOptions = Omit<WorkerOptions, 'connection' | 'prefix' | 'autorun'>;

/** The injection token of the module's options. */
export const TASKS_QUEUE_OPTIONS = Symbol('TASKS_QUEUE_OPTIONS');

/** `TasksQueueModule.forRoot(options)`. */
export interface TasksQueueModuleOptions {
  /**
   * Whether this process runs jobs (default `true`): it starts a BullMQ Worker for every queue a
   * `@TaskTool` names, once the app is ready. A process that only takes calls sets `false`.
   */
  worker?: boolean;
  /**
   * BullMQ worker options per queue name (`concurrency`, `lockDuration`, `stalledInterval`,
   * `maxStalledCount`, `limiter`, ...). The connection and prefix are the queue's own.
   */
  workers?: Readonly<Record<string, TaskWorkerOptions>>;
}
