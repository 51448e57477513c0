/**
 * The task model: the stored record, every lifecycle rule as a pure function, and the wire
 * mapping. Nothing here performs I/O; stores and the service build on these functions.
 */
import {
  DuplicateInputKeyError,
  InvalidTaskParamsError,
  type JsonRpcErrorObject,
  show,
  TaskError,
  TaskNotFoundError,
  TaskTerminalError,
} from './errors.js';

export type TaskStatus = 'working' | 'input_required' | 'completed' | 'failed' | 'cancelled';
export type TerminalTaskStatus = 'completed' | 'failed' | 'cancelled';

/** How `cancel` behaves: at once, or as a request the worker honours. */
export type CancellationMode = 'immediate' | 'cooperative';

/** Who a task belongs to. Compared exactly: principal and tenant both must match. */
export interface TaskOwner {
  readonly principal: string | null;
  readonly tenant?: string | null;
}

/** A request the server sends the client through `inputRequests` (elicitation, sampling, roots). */
export type InputRequest =
  | { method: 'elicitation/create'; params: Record<string, unknown> }
  | { method: 'sampling/createMessage'; params: Record<string, unknown> }
  | { method: 'roots/list'; params?: Record<string, unknown> };

/** The client's answer to one input request, as delivered by `tasks/update`. */
export type InputResponse = Record<string, unknown>;

/** What `tools/call` would have returned; stored on a completed task. */
export interface CallToolResult {
  content: unknown[];
  structuredContent?: unknown;
  isError?: boolean;
  _meta?: Record<string, unknown>;
  [key: string]: unknown;
}

/** The stored result always carries `resultType: "complete"` (clients settle on it). */
export type StoredCallToolResult = CallToolResult & { resultType: 'complete' };

/** The stored task. Timestamps are epoch milliseconds; `version` orders writes. */
export interface TaskRecord {
  readonly taskId: string;
  readonly owner: Required<TaskOwner>;
  readonly status: TaskStatus;
  readonly statusMessage?: string;
  readonly createdAt: number;
  readonly lastUpdatedAt: number;
  /** Lifetime from creation in milliseconds; `null` keeps the task until the janitor's terminal TTL. */
  readonly ttlMs: number | null;
  readonly pollIntervalMs?: number;
  /** The input requests outstanding now (present only while `input_required`). */
  readonly inputRequests?: Readonly<Record<string, InputRequest>>;
  /** Every input key this task has ever requested: keys are unique over a task's life. */
  readonly usedInputKeys?: readonly string[];
  /** Answers received through `tasks/update` and not yet taken by the worker. */
  readonly inputResponses?: Readonly<Record<string, InputResponse>>;
  readonly result?: StoredCallToolResult;
  readonly error?: JsonRpcErrorObject;
  /** Cooperative cancellation: the caller asked, the worker has not yet honoured it. */
  readonly cancelRequested?: boolean;
  readonly version: number;
}

/** The bare Task fields of the wire (CreateTaskResult without `resultType`). */
export interface Task {
  taskId: string;
  status: TaskStatus;
  statusMessage?: string;
  createdAt: string;
  lastUpdatedAt: string;
  ttlMs: number | null;
  pollIntervalMs?: number;
}

/** What `tasks/get` returns (without `resultType`) and what `notifications/tasks` carries. */
export type DetailedTask =
  | (Task & { status: 'working' | 'cancelled' })
  | (Task & { status: 'input_required'; inputRequests: Record<string, InputRequest> })
  | (Task & { status: 'completed'; result: StoredCallToolResult })
  | (Task & { status: 'failed'; error: JsonRpcErrorObject });

export interface NewTaskParams {
  ttlMs: number | null;
  pollIntervalMs?: number;
  statusMessage?: string;
}

/** The module's TTL settings that decide a new task's TTL (see `resolveTtlMs`). */
export interface TtlLimits {
  readonly defaultTtlMs: number | null;
  readonly maxTtlMs: number | null;
}

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

/** A transition either yields the next record (the same object when nothing changes) or an error. */
export type TransitionResult = TaskRecord | TaskError;

const TERMINAL: ReadonlySet<TaskStatus> = new Set(['completed', 'failed', 'cancelled']);
const INPUT_METHODS: ReadonlySet<string> = new Set([
  'elicitation/create',
  'sampling/createMessage',
  'roots/list',
]);

export function isTerminal(status: TaskStatus): status is TerminalTaskStatus {
  return TERMINAL.has(status);
}

/** Owners are equal when principal and tenant are equal; an absent tenant is `null`. */
export function normalizeOwner(owner: TaskOwner): Required<TaskOwner> {
  return { principal: owner.principal, tenant: owner.tenant ?? null };
}

export function isOwnedBy(record: TaskRecord, owner: TaskOwner): boolean {
  return (
    record.owner.principal === owner.principal && record.owner.tenant === (owner.tenant ?? null)
  );
}

/** The instant a task with a TTL expires, or `null` when it has none. */
export function expiresAt(record: Pick<TaskRecord, 'createdAt' | 'ttlMs'>): number | null {
  return record.ttlMs === null ? null : record.createdAt + record.ttlMs;
}

export function isExpired(record: TaskRecord, now: number): boolean {
  const at = expiresAt(record);
  return at !== null && at <= now;
}

/**
 * A finished task without a TTL is kept until `terminalTtlMs` after it finished: the instant it
 * finished (its last update, final once terminal), or `null` for a task this rule does not keep
 * (it has a TTL, or it is still live).
 */
export function terminalSince(
  record: Pick<TaskRecord, 'ttlMs' | 'status' | 'lastUpdatedAt'>,
): number | null {
  return record.ttlMs === null && isTerminal(record.status) ? record.lastUpdatedAt : null;
}

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
  return record;
}

/**
 * Copies `task` with `changes`, a fresh `lastUpdatedAt` and the next version. (Object.assign, not
 * spread: on Node 20 a spread that adds keys takes a slow path, and this is the hot path.)
 */
function next(task: TaskRecord, changes: Partial<TaskRecord>, now: number): TaskRecord {
  const copy: Mutable<TaskRecord> = Object.assign({}, task, changes);
  copy.lastUpdatedAt = Math.max(now, task.lastUpdatedAt);
  copy.version = task.version + 1;
  return copy;
}

/** A terminal record keeps no pending input or cancellation request. */
function settle(
  task: TaskRecord,
  changes: Partial<TaskRecord> & { status: TerminalTaskStatus },
  now: number,
): TaskRecord {
  const { inputRequests, inputResponses, cancelRequested, ...kept } = task;
  return next(kept as TaskRecord, changes, now);
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
  if (isTerminal(task.status)) return new TaskTerminalError(task.status);
  return settle(task, { status: 'completed', result, ...withMessage(options.statusMessage) }, now);
}

export function failTask(
  task: TaskRecord,
  error: JsonRpcErrorObject,
  options: { statusMessage?: string },
  now: number,
): TransitionResult {
  if (isTerminal(task.status)) return new TaskTerminalError(task.status);
  return settle(
    task,
    { status: 'failed', error, statusMessage: options.statusMessage ?? error.message },
    now,
  );
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
  const { inputRequests, statusMessage, ...kept } = task;
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
  if (isTerminal(task.status)) return new TaskTerminalError(task.status);
  return settle(task, { status: 'cancelled', statusMessage: 'Cancelled' }, now);
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
export function takeInputResponsesTask(task: TaskRecord): TaskRecord {
  if (task.inputResponses === undefined) return task;
  const { inputResponses, ...kept } = task;
  return { ...kept, version: task.version + 1 };
}

/** Whether every one of `keys` was answered: none of them is an outstanding input request. */
export function isAnswered(
  task: Pick<TaskRecord, 'inputRequests'>,
  keys: readonly string[],
): boolean {
  const outstanding = task.inputRequests;
  return outstanding === undefined || keys.every((key) => !Object.hasOwn(outstanding, key));
}

export function isCancellationRequested(task: TaskRecord): boolean {
  return task.status === 'cancelled' || task.cancelRequested === true;
}

// ---------------------------------------------------------------------------------------------
// Validation of what workers hand in. Pure: each returns the normalized value or throws.
// ---------------------------------------------------------------------------------------------

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
}

/** A task id is a string; anything else names no task, and gets the answer an unknown id gets. */
export function validateTaskId(taskId: unknown): string {
  if (typeof taskId !== 'string') throw new TaskNotFoundError();
  return taskId;
}

/**
 * The TTL of a new task: none requested gives `defaultTtlMs`; a request is a positive integer or
 * `null` (unlimited), and `maxTtlMs` caps it (an unlimited request gets `maxTtlMs`).
 */
export function resolveTtlMs(requested: unknown, limits: TtlLimits): number | null {
  const { defaultTtlMs, maxTtlMs } = limits;
  if (requested === undefined) return defaultTtlMs;
  if (requested !== null && !(Number.isSafeInteger(requested) && (requested as number) > 0)) {
    throw new InvalidTaskParamsError('ttlMs must be a positive integer or null');
  }
  if (maxTtlMs === null) return requested as number | null;
  return requested === null ? maxTtlMs : Math.min(requested as number, maxTtlMs);
}

/** A status message handed in with a change: a string, or absent. */
export function validateStatusMessage(statusMessage: unknown): string | undefined {
  if (statusMessage === undefined || typeof statusMessage === 'string') return statusMessage;
  throw new InvalidTaskParamsError('statusMessage must be a string');
}

/** What a new task is created with, checked in this order: TTL, poll interval, status message. */
export function validateNewTaskParams(
  params: { ttlMs?: unknown; pollIntervalMs?: unknown; statusMessage?: unknown },
  limits: TtlLimits,
): NewTaskParams {
  const ttlMs = resolveTtlMs(params.ttlMs, limits);
  const pollIntervalMs = params.pollIntervalMs;
  if (
    pollIntervalMs !== undefined &&
    !(Number.isSafeInteger(pollIntervalMs) && (pollIntervalMs as number) > 0)
  ) {
    throw new InvalidTaskParamsError('pollIntervalMs must be a positive integer');
  }
  return {
    ttlMs,
    pollIntervalMs: pollIntervalMs as number | undefined,
    statusMessage: validateStatusMessage(params.statusMessage),
  };
}

/** A progress message: a string, or `null` to clear the status message. */
export function validateProgressMessage(message: unknown): string | null {
  if (message !== null && typeof message !== 'string') {
    throw new InvalidTaskParamsError('A progress message must be a string or null');
  }
  return message;
}

/**
 * The answers `tasks/update` delivers: an object by input key. Each answer is checked against its
 * request when it is taken (see `updateTask`).
 */
export function validateInputResponses(
  responses: unknown,
): Readonly<Record<string, InputResponse>> {
  if (!isPlainObject(responses)) {
    throw new InvalidTaskParamsError('inputResponses must be an object');
  }
  return responses as Record<string, InputResponse>;
}

/** Checks input requests against the shapes the client accepts; refuses an empty set. */
export function validateInputRequests(requests: unknown): Record<string, InputRequest> {
  if (!isPlainObject(requests)) {
    throw new InvalidTaskParamsError(`Input requests must be an object, got ${show(requests)}`);
  }
  const keys = Object.keys(requests);
  if (keys.length === 0) throw new InvalidTaskParamsError('Input requests must not be empty');
  for (const key of keys) {
    if (key.length === 0) throw new InvalidTaskParamsError('Input request keys must not be empty');
    const request = requests[key];
    const where = `Input request ${JSON.stringify(key)}`;
    if (!isPlainObject(request) || typeof request.method !== 'string') {
      throw new InvalidTaskParamsError(`${where} must be an object with a method`);
    }
    if (!INPUT_METHODS.has(request.method)) {
      throw new InvalidTaskParamsError(
        `${where} has method ${JSON.stringify(request.method)}; expected one of ${[...INPUT_METHODS].join(', ')}`,
      );
    }
    const params = request.params;
    if (request.method === 'roots/list') {
      if (params !== undefined && !isPlainObject(params)) {
        throw new InvalidTaskParamsError(`${where} params must be an object`);
      }
      continue;
    }
    if (!isPlainObject(params)) throw new InvalidTaskParamsError(`${where} needs params`);
    if (request.method === 'elicitation/create') {
      const url = params.mode === 'url';
      const ok =
        typeof params.message === 'string' &&
        (url ? typeof params.url === 'string' : isPlainObject(params.requestedSchema)) &&
        (params.mode === undefined || params.mode === 'form' || url);
      if (!ok) {
        throw new InvalidTaskParamsError(
          `${where} needs params.message and params.requestedSchema (form) or params.url (url mode)`,
        );
      }
    } else if (!Array.isArray(params.messages) || !Number.isInteger(params.maxTokens)) {
      throw new InvalidTaskParamsError(
        `${where} needs params.messages and integer params.maxTokens`,
      );
    }
  }
  return requests as Record<string, InputRequest>;
}

const ELICIT_ACTIONS: ReadonlySet<unknown> = new Set(['accept', 'decline', 'cancel']);

/** Why `response` is not an answer to `request` (the client's result shapes), or `undefined`. */
export function inputResponseProblem(request: InputRequest, response: unknown): string | undefined {
  if (!isPlainObject(response)) return 'must be an object';
  switch (request.method) {
    case 'elicitation/create': {
      if (!ELICIT_ACTIONS.has(response.action))
        return 'needs action "accept", "decline" or "cancel"';
      const content = response.content;
      if (content === undefined) return undefined;
      if (!isPlainObject(content)) return 'content must be an object';
      const ok = Object.values(content).every(
        (value) =>
          ['string', 'number', 'boolean'].includes(typeof value) ||
          (Array.isArray(value) && value.every((item) => typeof item === 'string')),
      );
      return ok ? undefined : 'content values must be strings, numbers, booleans or string arrays';
    }
    case 'sampling/createMessage':
      return typeof response.model === 'string' &&
        (response.role === 'user' || response.role === 'assistant') &&
        response.content !== null &&
        typeof response.content === 'object'
        ? undefined
        : 'needs model, role and content';
    case 'roots/list':
      return Array.isArray(response.roots) &&
        response.roots.every((root) => isPlainObject(root) && typeof root.uri === 'string')
        ? undefined
        : 'needs roots, each with a uri';
  }
}

/** Normalizes a tool result for storage: `content` defaults to `[]`, `resultType` is "complete". */
export function toStoredResult(result: unknown): StoredCallToolResult {
  if (!isPlainObject(result)) {
    throw new InvalidTaskParamsError(`A task result must be an object, got ${show(result)}`);
  }
  if (result.content !== undefined && !Array.isArray(result.content)) {
    throw new InvalidTaskParamsError('A task result content must be an array');
  }
  if (result.isError !== undefined && typeof result.isError !== 'boolean') {
    throw new InvalidTaskParamsError('A task result isError must be a boolean');
  }
  const stored = Object.assign({}, result) as StoredCallToolResult;
  stored.content = (result.content as unknown[] | undefined) ?? [];
  stored.resultType = 'complete';
  return stored;
}

/**
 * What a tool method's return value completes its task with: nothing gives no content, a string
 * one text block, a CallToolResult (an object with a `content` array) is itself; anything else
 * is its JSON as text and itself as `structuredContent`. `toStoredResult` then checks it.
 */
export function toCallToolResult(value: unknown): CallToolResult {
  if (value === undefined || value === null) return { content: [] };
  if (typeof value === 'string') return { content: [{ type: 'text', text: value }] };
  if (isPlainObject(value) && Array.isArray(value.content)) return value as CallToolResult;
  return { content: [{ type: 'text', text: JSON.stringify(value) }], structuredContent: value };
}

/** What `fail` accepts: a JSON-RPC error object, `[code, message]`, or an Error. */
export type TaskFailure =
  | JsonRpcErrorObject
  | readonly [code: number, message: string]
  | (Error & { code?: unknown; data?: unknown });

/**
 * Normalizes a failure to a JSON-RPC error object. An Error with an integer `code` keeps its
 * code, message and data; any other Error becomes -32603 with its message.
 */
export function toJsonRpcError(failure: TaskFailure): JsonRpcErrorObject {
  let code: unknown;
  let message: unknown;
  let data: unknown;
  if (Array.isArray(failure)) {
    [code, message] = failure;
  } else if (failure instanceof Error) {
    code = Number.isInteger(failure.code) ? failure.code : -32603;
    message = failure.message;
    data = failure.data;
  } else if (failure !== null && typeof failure === 'object') {
    ({ code, message, data } = failure as JsonRpcErrorObject);
  }
  if (!Number.isInteger(code)) {
    throw new InvalidTaskParamsError(`A task error code must be an integer, got ${show(code)}`);
  }
  if (typeof message !== 'string') {
    throw new InvalidTaskParamsError(`A task error message must be a string, got ${show(message)}`);
  }
  return jsonRpcErrorObject(code as number, message, data);
}

/**
 * The JSON-RPC error a thrown value carries, or `undefined`. A TaskError gives its own; any other
 * object (an Error or not) carries one when it has an integer `code` and a string `message`
 * (`data` kept). An Error without a code carries none: its message is not meant for the client.
 */
export function thrownJsonRpcError(thrown: unknown): JsonRpcErrorObject | undefined {
  if (thrown instanceof TaskError) return thrown.toJsonRpcError();
  if (thrown === null || typeof thrown !== 'object') return undefined;
  const { code, message, data } = thrown as { code?: unknown; message?: unknown; data?: unknown };
  if (!Number.isInteger(code) || typeof message !== 'string') return undefined;
  return jsonRpcErrorObject(code as number, message, data);
}

/** `{ code, message }`, with `data` when there is some. */
function jsonRpcErrorObject(code: number, message: string, data: unknown): JsonRpcErrorObject {
  const error: JsonRpcErrorObject = { code, message };
  if (data !== undefined) error.data = data;
  return error;
}

// ---------------------------------------------------------------------------------------------
// Wire mapping.
// ---------------------------------------------------------------------------------------------

/** The bare Task fields: what a CreateTaskResult carries beside `resultType: "task"`. */
export function toTask(record: TaskRecord): Task {
  const task: Task = {
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
  const task = toTask(record);
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
