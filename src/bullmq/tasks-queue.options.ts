import type { WorkerOptions } from 'bullmq';
import { show } from '../errors.js';
import { isObject } from '../object-shape.js';
import { queueOptionProblems } from '../tools/queue-module-definition.js';

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

const OPTION_KEYS: ReadonlySet<string> = new Set(
  Object.keys({ worker: true, workers: true, fair: true } satisfies Record<
    keyof TasksQueueModuleOptions,
    true
  >),
);

/**
 * Checks TasksQueueModule's options once, at startup: one TasksConfigError lists every problem,
 * an unknown option included (a `@TaskTool()` option says where it belongs).
 */
export function checkQueueOptions(given: unknown): void {
  const { problems: p, options } = queueOptionProblems(given, OPTION_KEYS);
  if (options === undefined) return p.throwIfAny();
  const { workers } = options;
  if (workers !== undefined && (!isObject(workers) || !Object.values(workers).every(isObject))) {
    p.add(
      'workers must be an object of BullMQ worker options by queue name (e.g. ' +
        `{ reports: { concurrency: 4 } }), got ${show(workers)}`,
    );
  }
  p.throwIfAny();
}
