/**
 * The library's errors, and the rules that put an error on the wire:
 *
 * - JSON-RPC codes are the SDK's ProtocolErrorCode, plus the two it has no name for, declared
 *   here (HEADER_MISMATCH, SERVER_ERROR);
 * - each kind of TaskError has its code here (TASK_ERROR_CODES) and nowhere else;
 * - the HTTP status an error object is answered with, on the MCP endpoint and from a REST route,
 *   is httpStatusOf's; only answers about the HTTP exchange itself (405, 413, 415, the host
 *   guard's 403 and 404, a failing endpoint's 500) carry a status of their own. The answers are
 *   written by mcp/json-rpc.ts.
 */
import { ProtocolErrorCode } from '@modelcontextprotocol/server';

/** The kinds of TaskError; each has its JSON-RPC code in TASK_ERROR_CODES. */
export type TaskErrorKind =
  | 'not_found'
  | 'invalid_params'
  | 'terminal'
  | 'duplicate_input_key'
  | 'store_full'
  | 'quota'
  | 'too_large'
  | 'conflict'
  | 'internal'
  | 'step'
  | 'shutting_down';

/** The standard headers disagree with the body (Streamable HTTP, 2026-07-28); HTTP 400. */
export const HEADER_MISMATCH = -32020;
/**
 * JSON-RPC's implementation-defined server error, which the SDK's own HTTP answers (405) and the
 * endpoint's answers about the HTTP exchange (403, 404, 405) carry.
 */
export const SERVER_ERROR = -32000;

/** The message of every fault whose detail stays in the process. */
export const INTERNAL_ERROR_MESSAGE = 'Internal error';

export const TASK_ERROR_CODES: Readonly<Record<TaskErrorKind, number>> = {
  not_found: ProtocolErrorCode.InvalidParams,
  invalid_params: ProtocolErrorCode.InvalidParams,
  terminal: ProtocolErrorCode.InvalidParams,
  duplicate_input_key: ProtocolErrorCode.InvalidParams,
  store_full: ProtocolErrorCode.InternalError,
  quota: ProtocolErrorCode.InternalError,
  too_large: ProtocolErrorCode.InvalidParams,
  conflict: ProtocolErrorCode.InternalError,
  internal: ProtocolErrorCode.InternalError,
  step: ProtocolErrorCode.InternalError,
  shutting_down: SERVER_ERROR,
};

/** A JSON-RPC error object as it appears on the wire and in a failed task. */
export interface JsonRpcErrorObject {
  code: number;
  message: string;
  data?: unknown;
}

export class TaskError extends Error {
  readonly code: number;

  constructor(
    readonly kind: TaskErrorKind,
    message: string,
    readonly data?: unknown,
  ) {
    super(message);
    this.name = new.target.name;
    this.code = TASK_ERROR_CODES[kind];
  }

  /** The JSON-RPC error object for this error: code, message and data, never a stack. */
  toJsonRpcError(): JsonRpcErrorObject {
    return this.data === undefined
      ? { code: this.code, message: this.message }
      : { code: this.code, message: this.message, data: this.data };
  }
}

/** A missing, expired or foreign task: one message for all, so the answer reveals nothing. */
export class TaskNotFoundError extends TaskError {
  constructor() {
    super('not_found', 'Task not found');
  }
}

/** Malformed arguments to a task operation (input requests, results, errors, messages). */
export class InvalidTaskParamsError extends TaskError {
  constructor(message: string) {
    super('invalid_params', message);
  }
}

/** The task has reached a terminal status; nothing may change it any more. */
export class TaskTerminalError extends TaskError {
  constructor(readonly status: string) {
    super('terminal', `Task is already ${status}`);
  }
}

/**
 * A step of a task tool (`TaskContext.step`) failed for good: its function threw on every attempt.
 * The cause, logged by the server, stays in the process. The task fails with it: -32603, a message
 * naming the step, and `data: { step, attempts }`.
 */
export class TaskStepError extends TaskError {
  declare readonly data: { step: string; attempts: number };

  constructor(step: string, attempts: number, message: string, options?: { cause?: unknown }) {
    super('step', message, { step, attempts });
    if (options?.cause !== undefined) this.cause = options.cause;
  }
}

/** requireInput named keys the task has used before; keys are unique over a task's life. */
export class DuplicateInputKeyError extends TaskError {
  constructor(readonly keys: readonly string[]) {
    super(
      'duplicate_input_key',
      `Input request keys already used by this task: ${keys.join(', ')}`,
      {
        keys: [...keys],
      },
    );
  }
}

/**
 * What a limit refusal carries in `data`: the option that set the limit and its value. Never a
 * task id, never another owner's figure.
 */
export interface TaskLimitData {
  limit: string;
  max: number;
}

/**
 * The store holds as much as it may: `maxRows` tasks (the default), or, for a store that caps its
 * bytes (the in-memory store's `maxBytes`), that many bytes of records.
 */
export class TaskStoreFullError extends TaskError {
  declare readonly data: TaskLimitData;

  constructor(
    readonly maxRows: number,
    limit = 'maxRows',
  ) {
    super('store_full', `Task store is full (${limit} ${maxRows})`, { limit, max: maxRows });
  }
}

/**
 * The owner (principal and tenant) holds `maxTasksPerOwner` tasks that are all still running or
 * waiting for input: a finished task would have made room (see TaskStoreCreateOptions).
 */
export class TaskQuotaError extends TaskError {
  declare readonly data: TaskLimitData;

  constructor(readonly max: number) {
    super('quota', `Task quota reached (maxTasksPerOwner ${max})`, {
      limit: 'maxTasksPerOwner',
      max,
    });
  }
}

/**
 * A write would make the task's record larger than `maxTaskBytes` (its JSON, in UTF-8 bytes):
 * what a client or a tool handed in is too large, and nothing was written.
 */
export class TaskTooLargeError extends TaskError {
  declare readonly data: TaskLimitData;

  constructor(
    readonly max: number,
    readonly bytes: number,
  ) {
    super(
      'too_large',
      `Invalid params: the task would hold ${bytes} bytes, over maxTaskBytes (${max})`,
      {
        limit: 'maxTaskBytes',
        max,
      },
    );
  }
}

/** Compare-and-set kept losing to other writers; the transition was not applied. */
export class TaskConflictError extends TaskError {
  constructor(attempts: number) {
    super('conflict', `Task changed concurrently; gave up after ${attempts} attempts`);
  }
}

/** A failure inside the server (store, notifier); the message is safe to send. */
export class TaskInternalError extends TaskError {
  constructor(message = INTERNAL_ERROR_MESSAGE, options?: { cause?: unknown }) {
    super('internal', message);
    if (options?.cause !== undefined) this.cause = options.cause;
  }
}

/**
 * A running tool call gave up on the task store: it could not reach it for longer than the
 * `storeOutageMs` window. The call's signal fires with it, and its task fails with it (code
 * -32603, `data: { reason: 'storeUnreachable', outageMs }`) once the store answers again: the
 * task says its store was away, not that its tool failed.
 */
export class TaskStoreUnreachableError extends TaskError {
  constructor(readonly outageMs: number) {
    super(
      'internal',
      `Task store unreachable for ${Math.round(outageMs / 1000)} s: the call was stopped`,
      { reason: 'storeUnreachable', outageMs },
    );
  }
}

/**
 * A call a shared store's connection could not serve (PostgreSQL, Redis), naming where the store
 * was sought: `address`, and in the message what went wrong and what to check. The original error
 * is its `cause`. Each store has its own subclass, whose name the error carries.
 */
export class StoreUnavailableError extends Error {
  constructor(
    readonly address: string,
    message: string,
    options: { cause: unknown },
  ) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** What a refused call carries in `data`: how soon to call again (on another instance). */
export interface ShuttingDownData {
  reason: 'shutting_down';
  retryAfterMs: number;
}

/** How soon a call refused at shutdown may be made again: at once, on another instance. */
export const SHUTDOWN_RETRY_AFTER_MS = 1_000;

/**
 * This instance is shutting down (its graceful drain): it starts no new task-tool call, and says
 * so with -32000 so that the caller makes the call again, where another instance takes it.
 * Nothing was created or run.
 */
export class ServerShuttingDownError extends TaskError {
  declare readonly data: ShuttingDownData;

  constructor() {
    super(
      'shutting_down',
      'The server is shutting down and starts no new task: call the tool again',
      { reason: 'shutting_down', retryAfterMs: SHUTDOWN_RETRY_AFTER_MS },
    );
  }
}

/** The HTTP status of each kind of TaskError, for REST controllers that call TasksService. */
export const TASK_ERROR_HTTP_STATUS: Readonly<Record<TaskErrorKind, number>> = {
  not_found: 404,
  invalid_params: 400,
  // The request was well formed but the task's state forbids it (finished, key used before).
  terminal: 409,
  duplicate_input_key: 409,
  conflict: 409,
  store_full: 503,
  quota: 429,
  too_large: 413,
  internal: 503,
  // A tool's step failed for good: the server's own fault, not the caller's.
  step: 500,
  shutting_down: 503,
};

/**
 * The JSON-RPC codes of a request the MCP endpoint cannot take as it was sent: answered with
 * HTTP 400, before any method runs.
 */
const REFUSED_REQUEST_CODES: ReadonlySet<number> = new Set([
  ProtocolErrorCode.ParseError,
  ProtocolErrorCode.InvalidRequest,
  ProtocolErrorCode.MissingRequiredClientCapability,
  ProtocolErrorCode.UnsupportedProtocolVersion,
  HEADER_MISMATCH,
]);

/** Where an error is answered: on the MCP endpoint, or by an ordinary (REST) route. */
export type ErrorSurface = 'endpoint' | 'rest';

/**
 * The HTTP status an error is answered with; the one rule, for both surfaces:
 *
 * - on the MCP endpoint, by JSON-RPC code: a request the endpoint cannot take as sent (parse error,
 *   invalid request, a missing client capability, an unsupported protocol revision, headers that
 *   disagree with the body) is 400; any other error (invalid params, every TaskError, a fault met
 *   while serving the method) is answered in band, 200;
 * - from a REST route, a TaskError by kind (TASK_ERROR_HTTP_STATUS): 404, 400, 409 or 503.
 */
export function httpStatusOf(
  error: TaskError | JsonRpcErrorObject,
  surface: ErrorSurface = 'endpoint',
): number {
  if (surface === 'rest') {
    return error instanceof TaskError ? (TASK_ERROR_HTTP_STATUS[error.kind] ?? 500) : 500;
  }
  return REFUSED_REQUEST_CODES.has(error.code) ? 400 : 200;
}

/** A bad module option, raised once at startup and naming the key and the value. */
export class TasksConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TasksConfigError';
  }
}

/** The message of something thrown, for a log line: its `message`, else the value as text. */
export function messageOf(error: unknown): string {
  return (error as Error)?.message ?? String(error);
}

/** Formats a value for an error message: `-5`, `"x"`, `null`, `an object`. */
export function show(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') {
    return String(value);
  }
  if (value === null || value === undefined) return String(value);
  if (typeof value === 'function') return `a function${value.name ? ` (${value.name})` : ''}`;
  return Array.isArray(value) ? 'an array' : 'an object';
}
