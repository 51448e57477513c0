import { Module } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { McpEndpoint } from './mcp/mcp-endpoint.js';
import { McpHostGuard } from './mcp/mcp-host.guard.js';
import { McpServerFactory } from './mcp/mcp-server.factory.js';
import { TaskToolCalls } from './mcp/task-tool-calls.js';
import { TasksMethods } from './mcp/tasks-methods.js';
import { TaskEvents } from './notify/task-events.js';
import { TaskToolExplorer } from './tools/task-tool.explorer.js';
import { TaskToolRegistry } from './tools/task-tool.registry.js';
import { TaskToolRunner } from './tools/task-tool.runner.js';
import { TasksJanitor } from './janitor/tasks.janitor.js';
import { TaskNotifier } from './notify/task-notifier.js';
import { TaskStore } from './store/task-store.js';
import { LISTEN_FEED, TASKS_CONFIG } from './tasks.constants.js';
import { ListenRouter } from './listen/listen.router.js';
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
  imports: [DiscoveryModule],
  providers: [
    TaskEvents,
    { provide: LISTEN_FEED, useFactory: () => new TaskEvents() },
    ListenRouter,
    TaskToolRegistry,
    TaskToolExplorer,
    TaskToolRunner,
    McpServerFactory,
    TasksMethods,
    TaskToolCalls,
    McpEndpoint,
    McpHostGuard,
    {
      provide: TASKS_CONFIG,
      useFactory: (options: TasksModuleOptions) => resolveTasksConfig(options),
      inject: [TASKS_MODULE_OPTIONS],
    },
    TasksService,
    TasksJanitor,
  ],
  exports: [TasksService, TaskStore, TaskNotifier, TaskEvents, TASKS_CONFIG],
})
export class TasksModule extends ConfigurableModuleClass {}
