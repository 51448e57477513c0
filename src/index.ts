/**
 * `nestjs-mcp-tasks`: what a NestJS app uses. The Redis store and notifier live in
 * `nestjs-mcp-tasks/redis`, the Node client in `nestjs-mcp-tasks/client`, the test helpers in
 * `nestjs-mcp-tasks/testing`.
 */
export { TasksModule } from './tasks.module.js';
export { TasksService, type CreateTaskParams, type StatusMessageOption } from './tasks.service.js';
export type {
  PartProvider,
  TasksJanitorOptions,
  TasksListenOptions,
  TasksModuleExtras,
  TasksModuleOptions,
} from './interfaces/tasks-module-options.interface.js';
export { TASKS_EXTENSION_ID } from './tasks.constants.js';
export {
  DuplicateInputKeyError,
  InvalidTaskParamsError,
  TaskConflictError,
  TaskError,
  TaskInternalError,
  TaskNotFoundError,
  TaskStoreFullError,
  TaskTerminalError,
  TasksConfigError,
  type JsonRpcErrorObject,
  type TaskErrorKind,
} from './errors.js';
export {
  TASK_ERROR_HTTP_STATUS,
  TaskErrorFilter,
  taskErrorBody,
  taskErrorStatus,
  type TaskErrorBody,
} from './http/task-error.filter.js';
export {
  isExpired,
  isOwnedBy,
  isTerminal,
  toTask,
  toWire,
  type CallToolResult,
  type CancellationMode,
  type DetailedTask,
  type InputRequest,
  type InputResponse,
  type StoredCallToolResult,
  type Task,
  type TaskFailure,
  type TaskOwner,
  type TaskRecord,
  type TaskStatus,
  type TerminalTaskStatus,
} from './task.js';
export {
  InjectTaskStore,
  TaskStore,
  type TaskStoreCleanupOptions,
  type TaskStoreCreateOptions,
} from './store/task-store.js';
export { InMemoryTaskStore } from './store/in-memory.task-store.js';
export { InjectTaskNotifier, TaskNotifier } from './notify/task-notifier.js';
export { ListenNotifier } from './notify/listen.notifier.js';
export {
  TaskTool,
  type TaskToolAnnotations,
  type TaskToolOptions,
  type WhenClientLacksTasks,
} from './tools/task-tool.decorator.js';
export type { TaskContext } from './tools/task-context.js';
export type { TaskToolInput } from './tools/input-schema.js';
export { defaultPrincipal, type PrincipalResolver } from './principal.js';
