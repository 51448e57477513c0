/**
 * The one family of task errors. Every kind has its JSON-RPC code here and nowhere else,
 * so what reaches the wire is decided in one place.
 */
export type TaskErrorKind =
  | 'not_found'
  | 'invalid_params'
  | 'terminal'
  | 'duplicate_input_key'
  | 'store_full'
  | 'conflict'
  | 'internal';

export const JSONRPC_INVALID_PARAMS = -32602;
export const JSONRPC_INTERNAL_ERROR = -32603;

export const TASK_ERROR_CODES: Readonly<Record<TaskErrorKind, number>> = {
  not_found: JSONRPC_INVALID_PARAMS,
  invalid_params: JSONRPC_INVALID_PARAMS,
  terminal: JSONRPC_INVALID_PARAMS,
  duplicate_input_key: JSONRPC_INVALID_PARAMS,
  store_full: JSONRPC_INTERNAL_ERROR,
  conflict: JSONRPC_INTERNAL_ERROR,
  internal: JSONRPC_INTERNAL_ERROR,
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

/** The store holds maxRows tasks already. */
export class TaskStoreFullError extends TaskError {
  constructor(readonly maxRows: number) {
    super('store_full', `Task store is full (maxRows ${maxRows})`);
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
  constructor(message = 'Internal error', options?: { cause?: unknown }) {
    super('internal', message);
    if (options?.cause !== undefined) this.cause = options.cause;
  }
}

/** A bad module option, raised once at startup and naming the key and the value. */
export class TasksConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TasksConfigError';
  }
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
