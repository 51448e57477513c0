/**
 * `nestjs-mcp-tasks`: the public surface of the module, complete. Everything a NestJS app uses is
 * named here and nothing else is: other files of the package are internal and may change.
 *
 * Other entries: `nestjs-mcp-tasks/redis` (the Redis store and notifier), `nestjs-mcp-tasks/client`
 * (a Node client for task tools), `nestjs-mcp-tasks/testing` (runTaskTool and the store contract).
 */

// ----- The module and its service -----------------------------------------------------------------
// TasksModule.forRoot / forRootAsync register the endpoint, the service, the store and the janitor;
// the registration exports TasksService, TaskStore, TaskNotifier, McpServerNotifier and McpTasksFront (also
// through a bare `imports: [TasksModule]`).
export { TasksModule } from './tasks.module.js';
export type {
  PartProvider,
  TasksConsoleOptions,
  TasksJanitorOptions,
  TasksLeaseOptions,
  TasksListenOptions,
  TasksModuleExtras,
  TasksModuleOptions,
  TasksResultWaitsOptions,
  TasksServerOptions,
  TasksShutdownOptions,
  TasksTelemetryOptions,
} from './interfaces/tasks-module-options.interface.js';
export {
  TasksService,
  type CreateTaskOptions,
  type CreateTaskParams,
  type ListAllTasksOptions,
  type ListTasksOptions,
  type StatusMessageOption,
} from './tasks.service.js';
export { TASKS_EXTENSION_ID } from './tasks.constants.js';
export { McpServerNotifier } from './mcp/mcp-server.notifier.js';
// The part that answers task traffic (tasks methods, listen, task-tool calls, input answers), to
// put in front of an MCP handler of one's own: the endpoint and the `/rekog` entry use it.
export { type FrontRequest, McpTasksFront } from './mcp/tasks-front.js';

// ----- Task tools -----------------------------------------------------------------------------------
// @TaskTool() turns a provider method into an MCP tool that answers with a task; the method gets
// its validated input and a TaskContext (progress, requireInput, signal, handOff).
export {
  TaskTool,
  type TaskToolAnnotations,
  type TaskToolOptions,
  type TaskToolQueue,
  type WhenClientLacksTasks,
} from './tools/task-tool.decorator.js';
export type { TaskContext } from './tools/task-context.js';
// Queue-run tools (`@TaskTool({ queue })`) send their calls to the TaskQueue port: bound by
// TasksQueueModule of `nestjs-mcp-tasks/bullmq`, or by an app's own queue.
export { type QueuedCall, TaskQueue } from './tools/task-queue.js';
export type { TaskToolInput } from './tools/input-schema.js';

// ----- Who asks -----------------------------------------------------------------------------------
// The principal (and tenant) a request acts for: every task belongs to one, and only it sees it.
export { defaultPrincipal, type PrincipalResolver } from './principal.js';

// ----- Errors, on the wire and on REST routes -------------------------------------------------------
export {
  DuplicateInputKeyError,
  InvalidTaskParamsError,
  ServerShuttingDownError,
  TaskConflictError,
  TaskError,
  TaskInternalError,
  TaskNotFoundError,
  TaskQuotaError,
  TaskStoreFullError,
  TaskStoreUnreachableError,
  TaskTerminalError,
  TaskTooLargeError,
  TasksConfigError,
  type JsonRpcErrorObject,
  type ShuttingDownData,
  type TaskErrorKind,
  type TaskLimitData,
} from './errors.js';
export {
  TASK_ERROR_HTTP_STATUS,
  TaskErrorFilter,
  taskErrorBody,
  taskErrorStatus,
  type TaskErrorBody,
} from './http/task-error.filter.js';

// ----- Task records and their wire form ---------------------------------------------------------------
// What TasksService answers and a TaskStore keeps, and the readings a custom store needs. The MCP
// types a task carries (CallToolResult, InputRequest, InputResponse) are the SDK's own, re-exported.
export {
  expiresAt,
  isExpired,
  isOwnedBy,
  isTerminal,
  toWire,
  toWireTask,
  type CallToolResult,
  type CancellationMode,
  type DetailedTask,
  type InputRequest,
  type InputResponse,
  type StoredCallToolResult,
  type TaskFailure,
  type TaskOwner,
  type TaskRecord,
  type TaskState,
  type TerminalTaskState,
  type WireTask,
} from './task.js';

// ----- Ports: where tasks are kept, who hears of changes ------------------------------------------------
// Both are injection tokens and abstract classes: bind your own through the module's options.
export {
  InjectTaskStore,
  TaskStore,
  type TaskStoreCleanupOptions,
  type TaskListPage,
  type TaskStoreCreateOptions,
  type TaskStoreLeases,
  type TaskStoreListAllOptions,
  type TaskStoreListOptions,
} from './store/task-store.js';
export { InMemoryTaskStore } from './store/in-memory.task-store.js';
export { InjectTaskNotifier, TaskNotifier } from './notify/task-notifier.js';
export { ListenNotifier } from './notify/listen.notifier.js';
// Hear every change this process writes beside the notifier (audit logs, metrics).
export { OnTaskChange } from './notify/task-change.listeners.js';
