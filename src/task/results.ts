/**
 * Results and failures: what a task completes or fails with, normalized for storage, and what a
 * tool method's return value or throw amounts to.
 */
import { ProtocolErrorCode } from '@modelcontextprotocol/server';
import { InvalidTaskParamsError, type JsonRpcErrorObject, show, TaskError } from '../errors.js';
import type { CallToolResult, StoredCallToolResult } from './record.js';
import { isPlainObject } from './rules.js';

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
  stored.content = result.content ?? [];
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
    code = Number.isInteger(failure.code) ? failure.code : ProtocolErrorCode.InternalError;
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
