/**
 * `nestjs-mcp-tasks/options`: the parts of TasksModuleOptions (root entry) one at a time, for
 * typing a part on its own (a `forRootAsync` factory that builds `listen` from config, a shared
 * `telemetry` object), and the registration extras of `forRoot` / `forRootAsync`.
 *
 * (The three entries that gather names from several folders live in src/entries/, so their
 * imports do not bend the folder layering that test/architecture.spec.ts checks.)
 */
export type {
  PartProvider,
  TasksConsoleOptions,
  TasksJanitorOptions,
  TasksLeaseOptions,
  TasksListenOptions,
  TasksModuleExtras,
  TasksResultWaitsOptions,
  TasksServerOptions,
  TasksShutdownOptions,
  TasksTelemetryOptions,
} from '../interfaces/tasks-module-options.interface.js';
