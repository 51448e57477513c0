import { queueModuleDefinition } from '../tools/queue-module-definition.js';
import { BullTaskQueue } from './bull-task-queue.js';
import { TASKS_QUEUE_OPTIONS, type TasksQueueModuleOptions } from './tasks-queue.options.js';
import { TaskQueueWorkers } from './task-queue.workers.js';

// One export at a time below, not `export const { … } = …`: see tasks.module-definition.ts.
const definitions = queueModuleDefinition<TasksQueueModuleOptions>(
  TASKS_QUEUE_OPTIONS,
  BullTaskQueue,
  TaskQueueWorkers,
);

/**
 * TasksQueueModule's base class: `forRoot(options)` / `forRootAsync(...)`. The registration is
 * global, so the TasksModule registration finds the TaskQueue it binds.
 */
export const ConfigurableModuleClass = definitions.ConfigurableModuleClass;
/** The type of `forRoot`'s argument (use as `typeof OPTIONS_TYPE`). */
export const OPTIONS_TYPE = definitions.OPTIONS_TYPE;
/** The type of `forRootAsync`'s argument (use as `typeof ASYNC_OPTIONS_TYPE`). */
export const ASYNC_OPTIONS_TYPE = definitions.ASYNC_OPTIONS_TYPE;
