/**
 * The lifecycle: a new task and every transition, as pure functions. A transition returns the
 * next record (the same object when nothing changes) or the TaskError that refuses it.
 */
import {
  DuplicateInputKeyError,
  InvalidTaskParamsError,
  type JsonRpcErrorObject,
  type TaskError,
  TaskTerminalError,
} from '../errors.js';
import {
  type CancellationMode,
  type InputRequest,
  type InputResponse,
  isAnswered,
  isTerminal,
  type NewTaskParams,
  normalizeOwner,
  type StoredCallToolResult,
  type TaskOwner,
  type TaskRecord,
  type TaskStepEntry,
  type TerminalTaskState,
} from './record.js';
import { inputResponseProblem } from './rules.js';

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

/** A transition either yields the next record (the same object when nothing changes) or an error. */
export type TransitionResult = TaskRecord | TaskError;

export function newTask(
  taskId: string,
  owner: TaskOwner,
  params: NewTaskParams,
  now: number,
): TaskRecord {
  const record: Mutable<TaskRecord> = {
    taskId,
    owner: normalizeOwner(owner),
    status: 'working',
    createdAt: now,
    lastUpdatedAt: now,
    ttlMs: params.ttlMs,
    version: 1,
  };
  if (params.pollIntervalMs !== undefined) record.pollIntervalMs = params.pollIntervalMs;
  if (params.statusMessage !== undefined) record.statusMessage = params.statusMessage;
  if (params.heldBy !== undefined) record.heldBy = params.heldBy;
  if (params.toolName !== undefined) record.toolName = params.toolName;
  if (params.arguments !== undefined) record.arguments = params.arguments;
  if (params.call !== undefined) {
    record.call = params.call;
    record.runs = 1;
  }
  return record;
}

/** Versions per millisecond of a writer's clock (see `nextVersion`). */
const VERSIONS_PER_MS = 1_000;
/** The clock part of versions stops here (the year 2255), below 2^53. */
const MAX_CLOCK_VERSION = 8_000_000_000_000_000;

/**
 * The version of the write after one at `version`, made at `now` (epoch ms): the next integer, or
 * the clock in microseconds when that is higher. A version is never given to two different states,
 * even after a store lost its latest writes: the next write is made later, so its clock part is
 * above theirs (given writers whose clocks agree within the time the failover took; a terminal
 * state is news after any live one regardless, see `deliveryMark`).
 */
export function nextVersion(version: number, now: number): number {
  const clock = Math.min(Math.floor(now) * VERSIONS_PER_MS, MAX_CLOCK_VERSION);
  return clock > version ? clock : version + 1;
}

/**
 * Copies `task` with `changes`, a fresh `lastUpdatedAt` and the next version. (Object.assign, not
 * spread: on Node 20 a spread that adds keys takes a slow path, and this is the hot path.)
 */
function next(task: TaskRecord, changes: Partial<TaskRecord>, now: number): TaskRecord {
  const copy: Mutable<TaskRecord> = Object.assign({}, task, changes);
  copy.lastUpdatedAt = Math.max(now, task.lastUpdatedAt);
  copy.version = nextVersion(task.version, now);
  return copy;
}

/**
 * Copies `task` with `changes` and the next version, `lastUpdatedAt` kept: a change the wire does
 * not show (a step journaled, a task held by another instance).
 */
function nextUnseen(task: TaskRecord, changes: Partial<TaskRecord>, now: number): TaskRecord {
  const copy: Mutable<TaskRecord> = Object.assign({}, task, changes);
  copy.version = nextVersion(task.version, now);
  return copy;
}

/**
 * A terminal record keeps no pending input, cancellation request, journal of steps, or what a
 * durable call kept to run again. A task that has none (most
 * tasks) is copied once, without the rest pattern's copy before it.
 */
function settle(
  task: TaskRecord,
  changes: Partial<TaskRecord> & { status: TerminalTaskState },
  now: number,
): TaskRecord {
  if (
    !('inputRequests' in task) &&
    !('inputResponses' in task) &&
    !('cancelRequested' in task) &&
    !('inputRequiredSince' in task) &&
    !('steps' in task) &&
    !('call' in task) &&
    !('answers' in task)
  ) {
    return next(task, changes, now);
  }
  const {
    inputRequests,
    inputResponses,
    cancelRequested,
    inputRequiredSince,
    steps,
    call,
    answers,
    ...kept
  } = task;
  return next(kept as TaskRecord, changes, now);
}

/** Settles a live task; a task already terminal is refused (its status is final). */
function settleLive(
  task: TaskRecord,
  changes: Partial<TaskRecord> & { status: TerminalTaskState },
  now: number,
): TransitionResult {
  return isTerminal(task.status) ? new TaskTerminalError(task.status) : settle(task, changes, now);
}

function withMessage(statusMessage: string | undefined): { statusMessage?: string } {
  return statusMessage === undefined ? {} : { statusMessage };
}

export function completeTask(
  task: TaskRecord,
  result: StoredCallToolResult,
  options: { statusMessage?: string },
  now: number,
): TransitionResult {
  const changes = { status: 'completed' as const, result, ...withMessage(options.statusMessage) };
  return settleLive(task, changes, now);
}

export function failTask(
  task: TaskRecord,
  error: JsonRpcErrorObject,
  options: { statusMessage?: string },
  now: number,
): TransitionResult {
  const statusMessage = options.statusMessage ?? error.message;
  return settleLive(task, { status: 'failed', error, statusMessage }, now);
}

/** Adds input requests; a key this task has used before is refused, naming the duplicates. */
export function requireInputTask(
  task: TaskRecord,
  requests: Readonly<Record<string, InputRequest>>,
  options: { statusMessage?: string },
  now: number,
): TransitionResult {
  if (isTerminal(task.status)) return new TaskTerminalError(task.status);
  const keys = Object.keys(requests);
  const used = task.usedInputKeys ?? [];
  const duplicates = keys.filter((key) => used.includes(key));
  if (duplicates.length > 0) return new DuplicateInputKeyError(duplicates);
  return next(
    task,
    {
      status: 'input_required',
      inputRequests: { ...task.inputRequests, ...requests },
      usedInputKeys: [...used, ...keys],
      inputRequiredSince: task.inputRequiredSince ?? Math.max(now, task.lastUpdatedAt),
      ...withMessage(options.statusMessage),
    },
    now,
  );
}

/**
 * Delivers answers. Only keys outstanding now are taken; the rest are ignored. When no key is
 * left outstanding the task is `working` again. Anything else leaves the task as it was.
 */
export function updateTask(
  task: TaskRecord,
  responses: Readonly<Record<string, InputResponse>>,
  now: number,
): TransitionResult {
  const outstanding = task.inputRequests;
  if (task.status !== 'input_required' || outstanding === undefined) return task;
  const accepted = Object.keys(responses).filter((key) => Object.hasOwn(outstanding, key));
  if (accepted.length === 0) return task;
  for (const key of accepted) {
    const problem = inputResponseProblem(outstanding[key]!, responses[key]);
    if (problem !== undefined) {
      return new InvalidTaskParamsError(
        `Invalid params: input response ${JSON.stringify(key)} ${problem}`,
      );
    }
  }
  const remaining = Object.fromEntries(
    Object.entries(outstanding).filter(([key]) => !accepted.includes(key)),
  );
  const received = {
    ...task.inputResponses,
    ...Object.fromEntries(accepted.map((key) => [key, responses[key] as InputResponse])),
  };
  if (Object.keys(remaining).length > 0) {
    return next(task, { inputRequests: remaining, inputResponses: received }, now);
  }
  // Back to work: the status message described the wait, so it goes with it.
  const { inputRequests, statusMessage, inputRequiredSince, ...kept } = task;
  return next(kept as TaskRecord, { status: 'working', inputResponses: received }, now);
}

/**
 * `immediate`: a live task becomes `cancelled` now. `cooperative`: the request is recorded and
 * the worker decides (see `markCancelledTask`). A terminal task is left as it is.
 */
export function cancelTask(
  task: TaskRecord,
  mode: CancellationMode,
  now: number,
): TransitionResult {
  if (isTerminal(task.status)) return task;
  if (mode === 'immediate') {
    return settle(task, { status: 'cancelled', statusMessage: 'Cancelled' }, now);
  }
  if (task.cancelRequested) return task;
  return next(task, { cancelRequested: true, statusMessage: 'Cancellation requested' }, now);
}

/** The worker acknowledges cancellation (or cancels on its own). */
export function markCancelledTask(task: TaskRecord, now: number): TransitionResult {
  if (task.status === 'cancelled') return task;
  return settleLive(task, { status: 'cancelled', statusMessage: 'Cancelled' }, now);
}

/**
 * Sets the status message of a live task, or clears it (`null`); the same message again, or
 * clearing a task without one, changes nothing.
 */
export function progressTask(
  task: TaskRecord,
  message: string | null,
  now: number,
): TransitionResult {
  if (isTerminal(task.status)) return new TaskTerminalError(task.status);
  if (message === null) {
    if (task.statusMessage === undefined) return task;
    const { statusMessage, ...kept } = task;
    return next(kept as TaskRecord, {}, now);
  }
  if (task.statusMessage === message) return task;
  return next(task, { statusMessage: message }, now);
}

/** Removes the received answers from the record; the caller hands them to the worker. */
export function takeInputResponsesTask(task: TaskRecord, now = Date.now()): TaskRecord {
  if (task.inputResponses === undefined) return task;
  const { inputResponses, ...kept } = task;
  return { ...kept, version: nextVersion(task.version, now) };
}

/**
 * Records a completed step in the task's journal (see `TaskRecord.steps`). A step already
 * recorded (by another run of the method that got there first) is left as it is: the caller reads
 * the entry that stays. A terminal task is refused. The wire sees nothing of it, so
 * `lastUpdatedAt` stays.
 */
export function recordStepTask(
  task: TaskRecord,
  name: string,
  entry: TaskStepEntry,
  now: number,
): TransitionResult {
  if (isTerminal(task.status)) return new TaskTerminalError(task.status);
  if (task.steps !== undefined && Object.hasOwn(task.steps, name)) return task;
  const steps: Record<string, TaskStepEntry> = Object.assign({}, task.steps);
  Object.defineProperty(steps, name, { value: entry, enumerable: true, writable: true });
  return nextUnseen(task, { steps }, now);
}

/**
 * Another instance takes over a durable call whose instance died (see `TaskRecord.call`): the
 * task is held by `instanceId` from now on, and its method's runs count one more. A task no
 * longer held by `from` (another instance took it over first) is left as it is; a terminal task
 * is refused. The wire sees nothing of it.
 */
export function resumeTask(
  task: TaskRecord,
  from: string | undefined,
  instanceId: string,
  now: number,
): TransitionResult {
  if (isTerminal(task.status)) return new TaskTerminalError(task.status);
  if (task.heldBy !== from) return task;
  // Woken from a park (a long sleep), the call did not stop: its runs stay as they were.
  const runs = (task.runs ?? 1) + (from !== undefined && isParkId(from) ? 0 : 1);
  return nextUnseen(task, { heldBy: instanceId, runs }, now);
}

/** Keeps the answers a durable call's method took (see `TaskRecord.answers`), for a later run. */
export function keepAnswersTask(
  task: TaskRecord,
  answers: Readonly<Record<string, InputResponse>>,
  now: number,
): TransitionResult {
  if (isTerminal(task.status)) return new TaskTerminalError(task.status);
  return nextUnseen(task, { answers: Object.assign({}, task.answers, answers) }, now);
}

/** What the ids of parked tasks' holders start with (see `parkId`). */
const PARK_PREFIX = 'park:';

/**
 * The holder of a parked task (a durable call sleeping out of memory, see `parkTask`): a lease of
 * its own, which no one renews and which runs out when the sleep ends; the instance that finds it
 * run out wakes the task. Never a real instance's id (those are UUIDs).
 */
export function parkId(taskId: string): string {
  return `${PARK_PREFIX}${taskId}`;
}

/** Whether a holder is a parked task's (see `parkId`). */
export function isParkId(holder: string): boolean {
  return holder.startsWith(PARK_PREFIX);
}

/**
 * Parks a durable call's task (see `parkId`): held by its park's lease instead of `from`, the
 * instance whose call leaves memory. A task no longer held by `from`, or (`waitingFor`, a park
 * for input) whose input keys are all answered already, is left as it is; a terminal task is
 * refused. The wire sees nothing of it.
 */
export function parkTask(
  task: TaskRecord,
  from: string,
  now: number,
  waitingFor?: readonly string[],
): TransitionResult {
  if (isTerminal(task.status)) return new TaskTerminalError(task.status);
  if (task.heldBy !== from) return task;
  // Answered meanwhile: nothing to wait for, so no park (the answer's write saw no park to wake).
  if (waitingFor !== undefined && isAnswered(task, waitingFor)) return task;
  return nextUnseen(task, { heldBy: parkId(task.taskId) }, now);
}
