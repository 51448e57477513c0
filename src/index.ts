/**
 * `nestjs-mcp-tasks`: what a NestJS app author writes every day. The module and its service, task
 * tools, who asks, a task as TasksService answers it, and the errors an app catches or throws.
 * Every public name is in exactly one entry; other files of the package are internal and may
 * change.
 *
 * The other entries, each for one kind of work:
 * - `nestjs-mcp-tasks/options`: the parts of TasksModuleOptions as types of their own;
 * - `nestjs-mcp-tasks/store`: writing a TaskStore or TaskNotifier, or using the store directly;
 * - `nestjs-mcp-tasks/front`: McpTasksFront, McpServerNotifier, task errors as HTTP answers;
 * - `nestjs-mcp-tasks/redis`, `/postgres`: the stores and notifiers for several instances;
 * - `nestjs-mcp-tasks/bullmq`: TasksQueueModule, the BullMQ TaskQueue for queue-run tools;
 * - `nestjs-mcp-tasks/health`: the @nestjs/terminus health indicator;
 * - `nestjs-mcp-tasks/rekog`: task tools on @rekog/mcp-nest's endpoint;
 * - `nestjs-mcp-tasks/client`: a Node client for task tools;
 * - `nestjs-mcp-tasks/testing`: runTaskTool and the TaskStore contract suite.
 */

// ----- The module and its service -----------------------------------------------------------------
// TasksModule.forRoot / forRootAsync register the endpoint, the service, the store and the janitor;
// the registration exports TasksService, TaskStore, TaskNotifier, McpServerNotifier and McpTasksFront (also
// through a bare `imports: [TasksModule]`).
export { TasksModule } from './tasks.module.js';
export type { TasksModuleOptions } from './interfaces/tasks-module-options.interface.js';
export {
  TasksService,
  type CreateTaskOptions,
  type CreateTaskParams,
  type ListAllTasksOptions,
  type ListTasksOptions,
  type StatusMessageOption,
} from './tasks.service.js';
export { TASKS_EXTENSION_ID } from './tasks.constants.js';

// ----- Task tools -----------------------------------------------------------------------------------
// @TaskTool() turns a provider method into an MCP tool that answers with a task; the method gets
// its validated input and a TaskContext (progress, requireInput, step, signal, handOff). On a
// request-scoped provider each call gets a DI sub-tree of its own, kept until the method ends.
export {
  TaskTool,
  type TaskToolAnnotations,
  type TaskToolOptions,
  type TaskToolQueue,
  type WhenClientLacksTasks,
} from './tools/task-tool.decorator.js';
export type { TaskContext } from './tools/task-context.js';
// `task.step(name, run, options)`: a step's result is journaled in its task, and a later run of
// the method gets it back instead of running it again.
export type { TaskStepAttempt, TaskStepOptions } from './tools/task-steps.js';
// What `@Inject(REQUEST)` gives a request-scoped provider during a task tool's call.
export type { TaskRequest } from './tools/scoped-calls.js';
// Queue-run tools (`@TaskTool({ queue })`) send their calls to the TaskQueue port: bound by
// TasksQueueModule of `nestjs-mcp-tasks/bullmq`, or by an app's own queue.
export { type QueuedCall, TaskQueue } from './tools/task-queue.js';
export type { TaskToolInput } from './tools/input-schema.js';

// ----- Who asks -----------------------------------------------------------------------------------
// The principal (and tenant) a request acts for: every task belongs to one, and only it sees it.
export { defaultPrincipal, type PrincipalResolver } from './principal.js';

// ----- A task, as TasksService answers it -------------------------------------------------------------
// The readings a custom store needs, and the wire form, are in `nestjs-mcp-tasks/store`.
export {
  isTerminal,
  type DetailedTask,
  type TaskRecord,
  type TaskState,
  type TerminalTaskState,
} from './task.js';
// Hear every change this process writes beside the notifier (audit logs, metrics).
export { OnTaskChange } from './notify/task-change.listeners.js';

// ----- Errors an app catches or throws ------------------------------------------------------------
// TaskErrorFilter answers them on REST routes; what a store throws (TaskStoreFullError,
// TaskInternalError) is in `nestjs-mcp-tasks/store`, the HTTP mapping in `nestjs-mcp-tasks/front`.
export {
  DuplicateInputKeyError,
  InvalidTaskParamsError,
  ServerShuttingDownError,
  TaskConflictError,
  TaskError,
  TaskNotFoundError,
  TaskQuotaError,
  TaskStepError,
  TaskStoreUnreachableError,
  TaskTerminalError,
  TaskTooLargeError,
  TasksConfigError,
  type TaskErrorKind,
} from './errors.js';
export { TaskErrorFilter } from './http/task-error.filter.js';
