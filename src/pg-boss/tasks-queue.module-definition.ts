import { queueModuleDefinition } from '../tools/queue-module-definition.js';
import { PgBossTaskQueue } from './pg-boss-task-queue.js';
import { TASKS_PG_BOSS_OPTIONS, type TasksQueueModuleOptions } from './tasks-queue.options.js';
import { TaskQueueWorkers } from './task-queue.workers.js';

// One export at a time below, not `export const { … } = …`: see tasks.module-definition.ts.
const definitions = queueModuleDefinition<TasksQueueModuleOptions>(
  TASKS_PG_BOSS_OPTIONS,
  PgBossTaskQueue,
  TaskQueueWorkers,
);

/**
 * TasksQueueModule's base class (pg-boss): `forRoot(options)` / `forRootAsync(...)`. The
 * registration is global, so the TasksModule registration finds the TaskQueue it binds.
 */
export const ConfigurableModuleClass = definitions.ConfigurableModuleClass;
/** The type of `forRoot`'s argument (use as `typeof OPTIONS_TYPE`). */
export const OPTIONS_TYPE = definitions.OPTIONS_TYPE;
/** The type of `forRootAsync`'s argument (use as `typeof ASYNC_OPTIONS_TYPE`). */
export const ASYNC_OPTIONS_TYPE = definitions.ASYNC_OPTIONS_TYPE;
