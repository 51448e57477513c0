import {
  ConfigurableModuleBuilder,
  type DynamicModule,
  type Provider,
  type Type,
} from '@nestjs/common';
import { show, TasksConfigError } from './errors.js';
import { ListenNotifier } from './notify/listen.notifier.js';
import { isTaskNotifier, TaskNotifier } from './notify/task-notifier.js';
import { InMemoryTaskStore } from './store/in-memory.task-store.js';
import { missingStoreMethods, TaskStore } from './store/task-store.js';
import { LISTEN_FEED, MCP_PATH, TASKS_CONFIG } from './tasks.constants.js';
import { createMcpController } from './mcp/mcp.controller.js';
import { DiscoveryModule } from '@nestjs/core';
import { ListenHandler } from './mcp/listen.handler.js';
import { MCP_GUARDS } from './mcp/mcp-app.guard.js';
import { BodyParsingInstaller } from './mcp/body-parsing.installer.js';
import { McpEndpoint } from './mcp/mcp-endpoint.js';
import { McpHostGuard } from './mcp/mcp-host.guard.js';
import { McpServerFactory } from './mcp/mcp-server.factory.js';
import { TaskToolCallHandler } from './mcp/task-tool-call.handler.js';
import { TasksMethodsHandler } from './mcp/tasks-methods.handler.js';
import { TaskEvents } from './notify/task-events.js';
import { TaskToolExplorer } from './tools/task-tool.explorer.js';
import { TaskToolRegistry } from './tools/task-tool.registry.js';
import { TaskToolRunner } from './tools/task-tool.runner.js';
import { TasksJanitor } from './janitor/tasks.janitor.js';
import { EXPORTED_TOKENS, TasksRegistration } from './tasks.registration.js';
import { TasksService } from './tasks.service.js';
import {
  checkPath,
  type PartProvider,
  resolveTasksConfig,
  type TasksModuleExtras,
  type TasksModuleOptions,
} from './tasks.options.js';

const RECIPE_KEYS = ['useClass', 'useValue', 'useExisting', 'useFactory'] as const;

/**
 * Turns a `store` / `notifier` extra into Nest providers for `token`: an instance becomes
 * `useValue`, a class `useClass` (built through DI), a recipe passes through. The part is provided
 * under a private token first and checked once, at startup, on its way to the public one.
 */
export function partProviders<T>(
  key: string,
  token: symbol,
  part: PartProvider<T>,
  problemWith: (value: unknown) => string | null,
): Provider[] {
  const given = Symbol(`${key} as given`);
  let source: Provider;
  if (typeof part === 'function') {
    source = { provide: given, useClass: part as Type<T> };
  } else {
    const recipe =
      part !== null && typeof part === 'object' ? RECIPE_KEYS.filter((name) => name in part) : [];
    if (recipe.length > 1) {
      throw new TasksConfigError(`${key} names ${recipe.join(' and ')}; give one of them`);
    }
    source =
      recipe.length === 1
        ? ({ ...(part as object), provide: given } as Provider)
        : { provide: given, useValue: part };
  }
  const checked = (value: unknown): T => {
    const problem = problemWith(value);
    if (problem !== null) throw new TasksConfigError(`${key} ${problem}, got ${show(value)}`);
    return value as T;
  };
  return [source, { provide: token, useFactory: checked, inject: [given] }];
}

export const {
  ConfigurableModuleClass,
  MODULE_OPTIONS_TOKEN: TASKS_MODULE_OPTIONS,
  OPTIONS_TYPE,
  ASYNC_OPTIONS_TYPE,
} = new ConfigurableModuleBuilder<TasksModuleOptions>({ moduleName: 'Tasks' })
  .setClassMethodName('forRoot')
  .setExtras<TasksModuleExtras>(
    { isGlobal: true, store: undefined, notifier: undefined, path: undefined, guards: undefined },
    (definition: DynamicModule, extras: TasksModuleExtras): DynamicModule => {
      const path = checkPath(extras.path);
      return {
        ...definition,
        global: extras.isGlobal !== false,
        imports: [DiscoveryModule, ...(definition.imports ?? [])],
        providers: [
          TasksRegistration,
          ...(definition.providers ?? []),
          ...coreProviders(),
          ...storeProviders(extras.store),
          ...notifierProviders(extras.notifier),
          { provide: MCP_PATH, useValue: path },
          { provide: MCP_GUARDS, useValue: checkGuards(extras.guards) },
        ],
        controllers: path === false ? [] : [createMcpController(path)],
        exports: [...EXPORTED_TOKENS, TasksRegistration],
      };
    },
  )
  .build();

/** What every registration provides, whatever its extras. */
function coreProviders(): Provider[] {
  return [
    TaskEvents,
    { provide: LISTEN_FEED, useFactory: () => new TaskEvents() },
    ListenHandler,
    TaskToolRegistry,
    TaskToolExplorer,
    TaskToolRunner,
    McpServerFactory,
    TasksMethodsHandler,
    TaskToolCallHandler,
    McpEndpoint,
    McpHostGuard,
    BodyParsingInstaller,
    {
      provide: TASKS_CONFIG,
      useFactory: (options: TasksModuleOptions) => resolveTasksConfig(options),
      inject: [TASKS_MODULE_OPTIONS],
    },
    TasksService,
    TasksJanitor,
  ];
}

function storeProviders(store: TasksModuleExtras['store']): Provider[] {
  if (store === undefined) {
    return [{ provide: TaskStore, useFactory: () => new InMemoryTaskStore() }];
  }
  return partProviders('store', TaskStore, store, (value) => {
    const missing = missingStoreMethods(value);
    return missing.length === 0 ? null : `must implement TaskStore (missing ${missing.join(', ')})`;
  });
}

function notifierProviders(notifier: TasksModuleExtras['notifier']): Provider[] {
  if (notifier === undefined) return [{ provide: TaskNotifier, useClass: ListenNotifier }];
  if (notifier === null) return [{ provide: TaskNotifier, useValue: null }];
  return partProviders('notifier', TaskNotifier, notifier, (value) =>
    isTaskNotifier(value) ? null : 'must implement TaskNotifier (a notify method)',
  );
}

function checkGuards(
  guards: TasksModuleExtras['guards'],
): NonNullable<TasksModuleExtras['guards']> {
  if (guards === undefined) return [];
  if (
    !Array.isArray(guards) ||
    !guards.every(
      (guard) =>
        typeof guard === 'function' ||
        (guard !== null && typeof guard === 'object' && typeof guard.canActivate === 'function'),
    )
  ) {
    throw new TasksConfigError(
      `guards must be an array of guard classes or instances, got ${show(guards)}`,
    );
  }
  return guards;
}
