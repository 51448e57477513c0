/** Wire mapping: a stored record as the Task and DetailedTask of the protocol. */
import type { JsonRpcErrorObject } from '../errors.js';
import type { DetailedTask, StoredCallToolResult, TaskRecord, WireTask } from './record.js';

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
