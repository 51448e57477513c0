/**
 * Wire mapping: a stored record as the Task and DetailedTask of the protocol (2026-07-28), and as
 * the Task of the 2025-11-25 revision.
 */
import type { JsonRpcErrorObject } from '../errors.js';
import type {
  DetailedTask,
  StoredCallToolResult,
  TaskRecord,
  TaskState,
  WireTask,
} from './record.js';

/** The bare Task fields: what a CreateTaskResult carries beside `resultType: "task"`. */
export function toWireTask(record: TaskRecord): WireTask {
  const task: WireTask = {
    taskId: record.taskId,
    status: record.status,
    createdAt: new Date(record.createdAt).toISOString(),
    lastUpdatedAt: new Date(record.lastUpdatedAt).toISOString(),
    ttlMs: record.ttlMs,
  };
  if (record.statusMessage !== undefined) task.statusMessage = record.statusMessage;
  if (record.pollIntervalMs !== undefined) task.pollIntervalMs = record.pollIntervalMs;
  return task;
}

/** The DetailedTask: what `tasks/get` returns (beside `resultType`) and notifications carry. */
export function toWire(record: TaskRecord): DetailedTask {
  const task = toWireTask(record);
  switch (record.status) {
    case 'input_required':
      return { ...task, status: 'input_required', inputRequests: { ...record.inputRequests } };
    case 'completed':
      return { ...task, status: 'completed', result: record.result as StoredCallToolResult };
    case 'failed':
      return { ...task, status: 'failed', error: record.error as JsonRpcErrorObject };
    default:
      return task as DetailedTask;
  }
}

// ----- The 2025-11-25 wire ------------------------------------------------------------------------

/** The Task of the 2025-11-25 revision (SEP-1686): `ttl` and `pollInterval`, in milliseconds. */
export interface Task2025 {
  taskId: string;
  status: TaskState;
  statusMessage?: string;
  createdAt: string;
  lastUpdatedAt: string;
  ttl: number | null;
  pollInterval?: number;
}

/**
 * A record on the 2025-11-25 wire. Same task, same status, with one rule of that revision: a tool
 * call whose result has `isError: true` is a `failed` task there (its result is still what
 * `tasks/result` answers). A failed task without a status message shows its error's message.
 */
export function toTask2025(record: TaskRecord): Task2025 {
  const failedTool = record.status === 'completed' && record.result?.isError === true;
  const status: TaskState = failedTool ? 'failed' : record.status;
  const task: Task2025 = {
    taskId: record.taskId,
    status,
    createdAt: new Date(record.createdAt).toISOString(),
    lastUpdatedAt: new Date(record.lastUpdatedAt).toISOString(),
    ttl: record.ttlMs,
  };
  const message =
    record.statusMessage ?? (record.status === 'failed' ? record.error?.message : undefined);
  if (message !== undefined) task.statusMessage = message;
  if (record.pollIntervalMs !== undefined) task.pollInterval = record.pollIntervalMs;
  return task;
}
