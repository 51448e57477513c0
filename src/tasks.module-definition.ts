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

// Named one export at a time below rather than by `export const { … } = …`: a destructuring
// export becomes one multi-name `export declare const` in the declarations, whose names the
// declaration bundler of `npm run build` (rolldown-plugin-dts) loses.
const definitions = new ConfigurableModuleBuilder<TasksModuleOptions>({ moduleName: 'Tasks' })
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

/**
 * TasksModule's base class, from Nest's ConfigurableModuleBuilder: `forRoot(options)` /
 * `forRootAsync(...)`, each with the registration extras beside the options.
 */
export const ConfigurableModuleClass = definitions.ConfigurableModuleClass;
/** The token TasksModule's options are provided under. */
export const TASKS_MODULE_OPTIONS = definitions.MODULE_OPTIONS_TOKEN;
/** The type of `forRoot`'s argument (use as `typeof OPTIONS_TYPE`). */
export const OPTIONS_TYPE = definitions.OPTIONS_TYPE;
/** The type of `forRootAsync`'s argument (use as `typeof ASYNC_OPTIONS_TYPE`). */
export const ASYNC_OPTIONS_TYPE = definitions.ASYNC_OPTIONS_TYPE;
