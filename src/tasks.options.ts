/*
 * The former home of the option types and of resolveTasksConfig, kept so that the files that
 * still import them from here build: the types now live in interfaces/tasks-module-options.interface.ts,
 * the checks in tasks.config.ts.
 */
export type {
  PartProvider,
  TasksConfig,
  TasksJanitorOptions,
  TasksListenOptions,
  TasksModuleExtras,
  TasksModuleOptions,
} from './interfaces/tasks-module-options.interface.js';
export { resolveTasksConfig } from './tasks.config.js';
