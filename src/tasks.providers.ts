import type { InjectionToken, Provider, Type } from '@nestjs/common';
import type {
  PartProvider,
  TasksModuleExtras,
  TasksModuleOptions,
} from './interfaces/tasks-module-options.interface.js';
import { TasksJanitor } from './janitor/tasks.janitor.js';
import { HeldTaskResumer } from './janitor/held-task-resumer.js';
import { TasksLease } from './janitor/tasks.lease.js';
import { StoreStartup } from './janitor/store-startup.js';
import { BodyParsingInstaller } from './mcp/body-parsing.installer.js';
import { ListenHandler } from './mcp/listen.handler.js';
import { MCP_GUARDS } from './mcp/mcp-app.guard.js';
import { McpEndpoint } from './mcp/mcp-endpoint.js';
import { McpTasksFront } from './mcp/tasks-front.js';
import { McpHostGuard } from './mcp/mcp-host.guard.js';
import { McpServerFactory } from './mcp/mcp-server.factory.js';
import { LegacyTasksHandler } from './mcp/legacy-tasks.handler.js';
import { McpServerNotifier } from './mcp/mcp-server.notifier.js';
import { TaskToolCallHandler } from './mcp/task-tool-call.handler.js';
import { TasksMethodsHandler } from './mcp/tasks-methods.handler.js';
import { ListenNotifier } from './notify/listen.notifier.js';
import { ListenFeed } from './notify/listen-feed.js';
import { TaskNotifier } from './notify/task-notifier.js';
import { TaskChangeListeners } from './notify/task-change.listeners.js';
import { WaiterFeed } from './notify/waiter-feed.js';
import { InMemoryTaskStore } from './store/in-memory.task-store.js';
import { TaskStore } from './store/task-store.js';
import { resolveTasksConfig } from './tasks.config.js';
import {
  checkGuards,
  checkPart,
  isPartRecipe,
  notifierProblem,
  storeProblem,
} from './tasks-extras.config.js';
import { MCP_PATH, TASKS_CONFIG } from './tasks.constants.js';
import { TasksService } from './tasks.service.js';
import { TasksTelemetry } from './telemetry/tasks.telemetry.js';
import { TaskToolExplorer } from './tools/task-tool.explorer.js';
import { ScopedToolCalls } from './tools/scoped-calls.js';
import { TaskToolRegistry } from './tools/task-tool.registry.js';
import { TaskToolRunner } from './tools/task-tool.runner.js';

/**
 * The providers of one registration, after the module options (under `optionsToken`, resolved
 * into TASKS_CONFIG) and TasksRegistration: the core every registration has, the store and the
 * notifier its extras name, and the endpoint's path and guards.
 */
export function registrationProviders(
  optionsToken: InjectionToken,
  extras: TasksModuleExtras,
  path: string | false,
): Provider[] {
  return [
    ...coreProviders(optionsToken),
    ...storeProviders(extras.store),
    ...notifierProviders(extras.notifier),
    { provide: MCP_PATH, useValue: path },
    { provide: MCP_GUARDS, useValue: checkGuards(extras.guards) },
  ];
}

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
    source = isPartRecipe(key, part)
      ? ({ ...(part as object), provide: given } as Provider)
      : { provide: given, useValue: part };
  }
  const checked = (value: unknown): T => checkPart<T>(key, value, problemWith);
  return [source, { provide: token, useFactory: checked, inject: [given] }];
}

/** What every registration provides, whatever its extras. */
function coreProviders(optionsToken: InjectionToken): Provider[] {
  return [
    WaiterFeed,
    TaskChangeListeners,
    ListenFeed,
    ListenHandler,
    TaskToolRegistry,
    ScopedToolCalls,
    TaskToolExplorer,
    TaskToolRunner,
    { provide: HeldTaskResumer, useExisting: TaskToolRunner },
    McpServerFactory,
    TasksMethodsHandler,
    TaskToolCallHandler,
    LegacyTasksHandler,
    McpServerNotifier,
    McpTasksFront,
    McpEndpoint,
    McpHostGuard,
    BodyParsingInstaller,
    {
      provide: TASKS_CONFIG,
      useFactory: (options: TasksModuleOptions) => resolveTasksConfig(options),
      inject: [optionsToken],
    },
    TasksService,
    TasksTelemetry,
    TasksJanitor,
    StoreStartup,
    TasksLease,
  ];
}

function storeProviders(store: TasksModuleExtras['store']): Provider[] {
  if (store === undefined) {
    return [{ provide: TaskStore, useFactory: () => new InMemoryTaskStore() }];
  }
  return partProviders('store', TaskStore, store, storeProblem);
}

function notifierProviders(notifier: TasksModuleExtras['notifier']): Provider[] {
  if (notifier === undefined) return [{ provide: TaskNotifier, useClass: ListenNotifier }];
  if (notifier === null) return [{ provide: TaskNotifier, useValue: null }];
  return partProviders('notifier', TaskNotifier, notifier, notifierProblem);
}
