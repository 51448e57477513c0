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
  /**
   * Fair turns across owners (principal and tenant), on every queue (`true`, the default), on
   * none (`false`), or per queue name (`{ reports: false }`; a queue not named is fair). On a fair
   * queue a job's BullMQ priority is its owner's rank: 1 + how many of the owner's jobs already
   * wait or run there. So one owner's backlog runs after the first jobs of every other owner,
   * not before them. A tool's (or the queue's) `priority` job option still orders jobs across
   * levels (0 to 2047), with fair turns within each level. See docs/queue.md.
   */
  fair?: boolean | Readonly<Record<string, boolean>>;
}

/** Whether the queue of that name takes fair turns (see `TasksQueueModuleOptions.fair`). */
export function isFairQueue(options: TasksQueueModuleOptions, queue: string): boolean {
  const { fair } = options;
  if (fair === undefined || typeof fair === 'boolean') return fair ?? true;
  return Object.hasOwn(fair, queue) ? fair[queue] !== false : true;
}
