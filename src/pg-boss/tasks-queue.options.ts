import type PgBoss from 'pg-boss';
import { show } from '../errors.js';
import { isObject } from '../object-shape.js';
import { queueOptionProblems } from '../tools/queue-module-definition.js';

/** The injection token of the module's options. */
export const TASKS_PG_BOSS_OPTIONS = Symbol('TASKS_PG_BOSS_OPTIONS');

/**
 * How this process runs one queue's jobs. pg-boss 10 has no worker object of its own that runs
 * jobs side by side (its `work()` awaits a whole batch before it fetches again): every slot here
 * fetches and runs one job at a time.
 */
export interface TaskWorkerOptions {
  /** How many jobs of the queue this process runs at once (default 1, as BullMQ's). */
  concurrency?: number;
  /**
   * How long an idle slot waits before it looks for a job again, in seconds (default 2, at least
   * 0.5: pg-boss's own bound). A job sent by any process wakes an idle slot at once (through a
   * job notice, see docs/queue.md): the poll is the fallback for a notice that was lost.
   */
  pollingIntervalSeconds?: number;
}

/**
 * A queue's own pg-boss options (`createQueue`): `retryLimit`, `retryDelay`, `retryBackoff`,
 * `expireInSeconds`, `retentionMinutes`, `deadLetter`, `policy`. They are the defaults of its
 * jobs, as BullMQ's `defaultJobOptions` are.
 */
export type TaskQueueOptions = Omit<PgBoss.Queue, 'name'>;

/** `TasksQueueModule.forRoot(options)` of `nestjs-mcp-tasks/pg-boss`. */
export interface TasksQueueModuleOptions {
  /**
   * The PostgreSQL of the queues: a connection string, or pg-boss's constructor options
   * (`{ connectionString, schema, max, maintenanceIntervalSeconds, ... }`). Give it the database
   * of the task store: the queues live in a schema of their own (`pgboss` unless `schema` says
   * otherwise). This module starts and stops its PgBoss.
   */
  connection: string | PgBoss.ConstructorOptions;
  /**
   * Whether this process runs jobs (default `true`): it starts the slots of every queue a
   * `@TaskTool` names, once the app is ready. A process that only takes calls sets `false`.
   */
  worker?: boolean;
  /** How this process runs each queue's jobs, by queue name (see TaskWorkerOptions). */
  workers?: Readonly<Record<string, TaskWorkerOptions>>;
  /**
   * pg-boss's options of each queue, by name (made, or updated, at startup): the defaults of its
   * jobs, e.g. `{ reports: { retryLimit: 3, expireInSeconds: 60 } }`. A queue not named is made
   * with pg-boss's defaults.
   */
  queues?: Readonly<Record<string, TaskQueueOptions>>;
  /**
   * Fair turns across owners (principal and tenant), on every queue (`true`, the default), on
   * none (`false`), or per queue name (`{ reports: false }`; a queue not named is fair). On a fair
   * queue a job's pg-boss priority comes from its owner's rank: 1 + how many of the owner's jobs
   * already wait or run there, so one owner's backlog runs after the first jobs of every other
   * owner. A tool's `priority` job option still orders jobs across levels (higher first, as in
   * pg-boss; an integer from -2047 to 2047), with fair turns within each level.
   */
  fair?: boolean | Readonly<Record<string, boolean>>;
}

const OPTION_KEYS: ReadonlySet<string> = new Set(
  Object.keys({
    connection: true,
    worker: true,
    workers: true,
    queues: true,
    fair: true,
  } satisfies Record<keyof TasksQueueModuleOptions, true>),
);

const WORKER_KEYS: ReadonlySet<string> = new Set(
  Object.keys({ concurrency: true, pollingIntervalSeconds: true } satisfies Record<
    keyof TaskWorkerOptions,
    true
  >),
);

/**
 * Checks the module's options once, at startup: one TasksConfigError lists every problem, an
 * unknown option included (a `@TaskTool()` option says where it belongs).
 */
export function checkQueueOptions(given: unknown): void {
  const { problems: p, options } = queueOptionProblems(given, OPTION_KEYS);
  if (options === undefined) return p.throwIfAny();
  const { connection, workers, queues } = options;
  if (!(typeof connection === 'string' && connection !== '') && !isObject(connection)) {
    p.add(
      'connection must name the PostgreSQL of the queues: a connection string or pg-boss ' +
        `options ({ connectionString, schema, ... }), got ${show(connection)} ` +
        '(e.g. { connection: process.env.POSTGRES_URL })',
    );
  }
  if (workers !== undefined && (!isObject(workers) || !Object.values(workers).every(isObject))) {
    p.add(
      'workers must be an object of worker options by queue name (e.g. ' +
        `{ reports: { concurrency: 4 } }), got ${show(workers)}`,
    );
  } else if (workers !== undefined) {
    for (const [queue, each] of Object.entries(workers) as [string, Record<string, unknown>][]) {
      p.unknownKeys(`workers.${queue}.`, each, WORKER_KEYS);
      const { concurrency, pollingIntervalSeconds: polling } = each;
      if (
        concurrency !== undefined &&
        !(Number.isInteger(concurrency) && (concurrency as number) >= 1)
      ) {
        p.add(`workers.${queue}.concurrency must be an integer >= 1, got ${show(concurrency)}`);
      }
      if (polling !== undefined && !(typeof polling === 'number' && polling >= 0.5)) {
        p.add(
          `workers.${queue}.pollingIntervalSeconds must be a number >= 0.5 (pg-boss's bound), ` +
            `got ${show(polling)}`,
        );
      }
    }
  }
  if (queues !== undefined && (!isObject(queues) || !Object.values(queues).every(isObject))) {
    p.add(
      'queues must be an object of pg-boss queue options by queue name (e.g. ' +
        `{ reports: { retryLimit: 3 } }), got ${show(queues)}`,
    );
  }
  p.throwIfAny();
}
