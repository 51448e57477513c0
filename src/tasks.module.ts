import { Module } from '@nestjs/common';
import { TasksJanitor } from './janitor/tasks.janitor.js';
import { TaskNotifier } from './notify/task-notifier.js';
import { TaskStore } from './store/task-store.js';
import { TASKS_CONFIG } from './tasks.constants.js';
import { ConfigurableModuleClass, TASKS_MODULE_OPTIONS } from './tasks.module-definition.js';
import { resolveTasksConfig, type TasksModuleOptions } from './tasks.options.js';
import { TasksService } from './tasks.service.js';

/**
 * The MCP Tasks extension for a NestJS app.
 *
 * ```ts
 * TasksModule.forRoot({ cancellation: 'cooperative', maxRows: 50_000 })
 * TasksModule.forRootAsync({
 *   imports: [ConfigModule],
 *   inject: [ConfigService],
 *   useFactory: (config: ConfigService) => ({ defaultTtlMs: config.get('TASK_TTL_MS') }),
 *   store: { useExisting: MY_STORE },
 *   isGlobal: true,
 * })
 * ```
 */
@Module({
  providers: [
    {
      provide: TASKS_CONFIG,
      useFactory: (options: TasksModuleOptions) => resolveTasksConfig(options),
      inject: [TASKS_MODULE_OPTIONS],
    },
    TasksService,
    TasksJanitor,
  ],
  exports: [TasksService, TaskStore, TaskNotifier, TASKS_CONFIG],
})
export class TasksModule extends ConfigurableModuleClass {}
