import { ConfigurableModuleBuilder, type DynamicModule } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import type {
  TasksModuleExtras,
  TasksModuleOptions,
} from './interfaces/tasks-module-options.interface.js';
import { checkConsole } from './console/console.config.js';
import { createConsoleController } from './console/console.controller.js';
import { consoleProviders } from './console/console.providers.js';
import { createMcpController } from './mcp/mcp.controller.js';
import { checkPath } from './tasks-extras.config.js';
import { registrationProviders } from './tasks.providers.js';
import { EXPORTED_TOKENS, TasksRegistration } from './tasks.registration.js';

/**
 * TasksModule's base class, options token and option types, from Nest's ConfigurableModuleBuilder:
 * `forRoot(options)` / `forRootAsync(...)`, each with the registration extras beside the options.
 */
export const {
  ConfigurableModuleClass,
  MODULE_OPTIONS_TOKEN: TASKS_MODULE_OPTIONS,
  OPTIONS_TYPE,
  ASYNC_OPTIONS_TYPE,
} = new ConfigurableModuleBuilder<TasksModuleOptions>({ moduleName: 'Tasks' })
  .setClassMethodName('forRoot')
  .setExtras<TasksModuleExtras>(
    {
      isGlobal: true,
      store: undefined,
      notifier: undefined,
      path: undefined,
      guards: undefined,
      console: undefined,
    },
    (definition: DynamicModule, extras: TasksModuleExtras): DynamicModule => {
      const path = checkPath(extras.path);
      const consoleSettings = checkConsole(extras.console, path);
      return {
        ...definition,
        global: extras.isGlobal !== false,
        imports: [DiscoveryModule, ...(definition.imports ?? [])],
        providers: [
          TasksRegistration,
          ...(definition.providers ?? []),
          ...registrationProviders(TASKS_MODULE_OPTIONS, extras, path),
          ...consoleProviders(consoleSettings),
        ],
        controllers: [
          ...(path === false ? [] : [createMcpController(path)]),
          ...(consoleSettings === false ? [] : [createConsoleController(consoleSettings.path)]),
        ],
        exports: [...EXPORTED_TOKENS, TasksRegistration],
      };
    },
  )
  .build();
