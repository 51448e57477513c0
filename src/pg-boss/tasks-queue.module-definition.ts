import { ConfigurableModuleBuilder, type DynamicModule } from '@nestjs/common';
import { TaskQueue } from '../tools/task-queue.js';
import { PgBossTaskQueue } from './pg-boss-task-queue.js';
import { TASKS_PG_BOSS_OPTIONS, type TasksQueueModuleOptions } from './tasks-queue.options.js';
import { TaskQueueWorkers } from './task-queue.workers.js';

// One export at a time below, not `export const { … } = …`: see tasks.module-definition.ts.
const definitions = new ConfigurableModuleBuilder<TasksQueueModuleOptions>({
  moduleName: 'TasksQueue',
  optionsInjectionToken: TASKS_PG_BOSS_OPTIONS,
})
  .setClassMethodName('forRoot')
  .setExtras({}, (definition: DynamicModule): DynamicModule => ({
    ...definition,
    global: true,
    providers: [
      ...(definition.providers ?? []),
      PgBossTaskQueue,
      { provide: TaskQueue, useExisting: PgBossTaskQueue },
      TaskQueueWorkers,
    ],
    exports: [TaskQueue],
  }))
  .build();

/**
 * TasksQueueModule's base class (pg-boss): `forRoot(options)` / `forRootAsync(...)`. The
 * registration is global, so the TasksModule registration finds the TaskQueue it binds.
 */
export const ConfigurableModuleClass = definitions.ConfigurableModuleClass;
/** The type of `forRoot`'s argument (use as `typeof OPTIONS_TYPE`). */
export const OPTIONS_TYPE = definitions.OPTIONS_TYPE;
/** The type of `forRootAsync`'s argument (use as `typeof ASYNC_OPTIONS_TYPE`). */
export const ASYNC_OPTIONS_TYPE = definitions.ASYNC_OPTIONS_TYPE;
