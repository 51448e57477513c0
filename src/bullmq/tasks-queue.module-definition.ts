import { ConfigurableModuleBuilder, type DynamicModule } from '@nestjs/common';
import { TaskQueue } from '../tools/task-queue.js';
import { BullTaskQueue } from './bull-task-queue.js';
import { TASKS_QUEUE_OPTIONS, type TasksQueueModuleOptions } from './tasks-queue.options.js';
import { TaskQueueWorkers } from './task-queue.workers.js';

/**
 * TasksQueueModule's base class and options token: `forRoot(options)` / `forRootAsync(...)`. The
 * registration is global, so the TasksModule registration finds the TaskQueue it binds.
 */
export const { ConfigurableModuleClass, OPTIONS_TYPE, ASYNC_OPTIONS_TYPE } =
  new ConfigurableModuleBuilder<TasksQueueModuleOptions>({
    moduleName: 'TasksQueue',
    optionsInjectionToken: TASKS_QUEUE_OPTIONS,
  })
    .setClassMethodName('forRoot')
    .setExtras({}, (definition: DynamicModule): DynamicModule => ({
      ...definition,
      global: true,
      providers: [
        ...(definition.providers ?? []),
        BullTaskQueue,
        { provide: TaskQueue, useExisting: BullTaskQueue },
        TaskQueueWorkers,
      ],
      exports: [TaskQueue],
    }))
    .build();
