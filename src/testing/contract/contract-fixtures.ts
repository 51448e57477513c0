/**
 * What the contract rules share: the owners they write as, and records built by hand as a
 * TasksService would write them (stores never apply lifecycle rules).
 */
import { randomBytes } from 'node:crypto';
import type { TaskRecord, TaskState } from '../../index.js';
import type { TaskOwner, TaskStore } from '../../entries/store.js';
import { alice } from './contract-owners.js';

/** An hour in milliseconds: the TTL of most records. */
export const HOUR = 3_600_000;
/** Store limits that never refuse a create. */
export const unlimited = { maxRows: null };

/** A fresh task id, as random as the service's. */
export const newId = (): string => randomBytes(32).toString('base64url');

/** A new `working` task, version 1, as `TasksService.create` stores it. */
export function record(
  owner: TaskOwner = alice,
  ttlMs: number | null = HOUR,
  createdAt = Date.now(),
) {
  const task: TaskRecord = {
    taskId: newId(),
    owner: { principal: owner.principal, tenant: owner.tenant ?? null },
    status: 'working',
    createdAt,
    lastUpdatedAt: createdAt,
    ttlMs,
    version: 1,
  };
  return task;
}

/** The next version of `task` with a new status message (a progress write). */
export function changed(task: TaskRecord, message: string): TaskRecord {
  return {
    ...task,
    statusMessage: message,
    lastUpdatedAt: Math.max(Date.now(), task.lastUpdatedAt),
    version: task.version + 1,
  };
}

/**
 * The next version of `task`, completed at `at` (no pending input, no cancel request, no journal
 * of steps left).
 */
export function completed(task: TaskRecord, at: number): TaskRecord {
  const { inputRequests, inputResponses, cancelRequested, steps, ...kept } = task;
  return {
    ...kept,
    status: 'completed',
    result: { content: [], resultType: 'complete' },
    lastUpdatedAt: Math.max(at, task.lastUpdatedAt),
    version: task.version + 1,
  };
}

/** Every state a task can be in, in the order `inEveryState` gives them. */
const STATES: readonly TaskState[] = [
  'working',
  'completed',
  'failed',
  'cancelled',
  'input_required',
];

/**
 * `count` records created from a minute ago, 10 ms apart (oldest first), the i-th of
 * `ownerOf(i)`, their statuses cycling through every state (a store keeps the status it is given).
 */
export function inEveryState(count: number, ownerOf: (i: number) => TaskOwner): TaskRecord[] {
  const t0 = Date.now() - 60_000;
  return Array.from({ length: count }, (_, i) => ({
    ...record(ownerOf(i), HOUR, t0 + i * 10),
    status: STATES[i % STATES.length]!,
  }));
}

/** A completed task of `owner` whose TTL of an hour ended an hour ago: no listing shows it. */
export function expiredCompleted(owner: TaskOwner): TaskRecord {
  return { ...record(owner, HOUR, Date.now() - 2 * HOUR), status: 'completed' };
}

/** The ids of `tasks` in listing order: newest first, by `createdAt`, then id. */
export function newestFirst(tasks: readonly TaskRecord[]): string[] {
  return tasks
    .slice()
    .sort((a, b) => b.createdAt - a.createdAt || (a.taskId < b.taskId ? 1 : -1))
    .map((task) => task.taskId);
}

/** One rule of the contract: its name, and the check it runs on a fresh store. */
export type ContractRule = readonly [name: string, check: (store: TaskStore) => Promise<void>];
