/**
 * `nestjs-mcp-tasks/store`: for writing a TaskStore or a TaskNotifier of one's own, or for using
 * the store directly (`@InjectTaskStore()`). The ports and their option types, the in-memory
 * implementations, the readings of a record a store needs, and the errors a store throws. The
 * TaskStore contract suite that checks a store is in `nestjs-mcp-tasks/testing`.
 *
 * (The three entries that gather names from several folders live in src/entries/, so their
 * imports do not bend the folder layering that test/architecture.spec.ts checks.)
 */

// ----- Where tasks are kept -------------------------------------------------------------------------
// An injection token and an abstract class in one: bind your own through TasksModule's `store`.
export {
  InjectTaskStore,
  TaskStore,
  type TaskListPage,
  type TaskStoreCleanupOptions,
  type TaskStoreCreateOptions,
  type TaskStoreLeases,
  type TaskStoreListAllOptions,
  type TaskStoreListOptions,
  type TaskStoreWriteOptions,
} from '../store/task-store.js';
export { InMemoryTaskStore } from '../store/in-memory.task-store.js';

// ----- Who hears of changes -------------------------------------------------------------------------
// Likewise a token and an abstract class: bind your own through TasksModule's `notifier`.
export { InjectTaskNotifier, TaskNotifier } from '../notify/task-notifier.js';
export { ListenNotifier } from '../notify/listen.notifier.js';

// ----- A record and what a store reads off it -----------------------------------------------------
// TaskRecord and TaskState are the root entry's (what TasksService answers). The MCP types a task
// carries (CallToolResult, InputRequest, InputResponse) are the SDK's own, re-exported.
export {
  expiresAt,
  isExpired,
  isOwnedBy,
  toWire,
  toWireTask,
  type CallToolResult,
  type CancellationMode,
  type InputRequest,
  type InputResponse,
  type StoredCallToolResult,
  type TaskFailure,
  type TaskOwner,
  type TaskStepEntry,
  type WireTask,
} from '../task.js';

// ----- What a store throws ------------------------------------------------------------------------
// The errors every app meets (TaskQuotaError, TaskNotFoundError…) are the root entry's.
export { TaskInternalError, TaskStoreFullError, type TaskLimitData } from '../errors.js';
