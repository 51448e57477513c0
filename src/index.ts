export { TasksModule } from './tasks.module.js';
export { TASKS_MODULE_OPTIONS } from './tasks.module-definition.js';
export { TasksService, type CreateTaskParams, type StatusMessageOption } from './tasks.service.js';
export {
  resolveTasksConfig,
  type PartProvider,
  type TasksConfig,
  type TasksJanitorOptions,
  type TasksListenOptions,
  type TasksModuleExtras,
  type TasksModuleOptions,
} from './tasks.options.js';
export {
  DEFAULT_JANITOR_INTERVAL_MS,
  DEFAULT_MAX_ROWS,
  DEFAULT_TERMINAL_TTL_MS,
  DEFAULT_TTL_MS,
  TASKS_CONFIG,
  LISTEN_FEED,
  TASKS_EXTENSION_ID,
} from './tasks.constants.js';
export {
  DuplicateInputKeyError,
  InvalidTaskParamsError,
  TASK_ERROR_CODES,
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
  cancelTask,
  completeTask,
  failTask,
  isCancellationRequested,
  isExpired,
  isOwnedBy,
  isTerminal,
  markCancelledTask,
  newTask,
  progressTask,
  requireInputTask,
  takeInputResponsesTask,
  toJsonRpcError,
  toStoredResult,
  toTask,
  toWire,
  updateTask,
  validateInputRequests,
  type CallToolResult,
  type CancellationMode,
  type DetailedTask,
  type InputRequest,
  type InputResponse,
  type NewTaskParams,
  type StoredCallToolResult,
  type Task,
  type TaskFailure,
  type TaskOwner,
  type TaskRecord,
  type TaskStatus,
  type TerminalTaskStatus,
  type TransitionResult,
} from './task.js';
export {
  InjectTaskStore,
  TaskStore,
  type TaskStoreCleanupOptions,
  type TaskStoreCreateOptions,
} from './store/task-store.js';
export { InMemoryTaskStore } from './store/in-memory.task-store.js';
export { InjectTaskNotifier, NoopTaskNotifier, TaskNotifier } from './notify/task-notifier.js';
export { ListenNotifier } from './notify/listen.notifier.js';
export { TasksJanitor } from './janitor/tasks.janitor.js';
export {
  TaskTool,
  type TaskToolAnnotations,
  type TaskToolOptions,
  type WhenClientLacksTasks,
} from './tools/task-tool.decorator.js';
export type { TaskContext } from './tools/task-context.js';
export { toToolInputSchema, type TaskToolInput } from './tools/input-schema.js';
export { TaskEvents, type TaskListener } from './notify/task-events.js';
export { defaultPrincipal, type PrincipalResolver } from './principal.js';
export { RedisTaskStore } from './redis/redis.task-store.js';
export { RedisTaskNotifier, redisNotifier } from './redis/redis.notifier.js';
export type { RedisConnectionOptions } from './redis/redis-connection.js';
