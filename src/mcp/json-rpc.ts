import type { ServerResponse } from 'node:http';
import type { Logger } from '@nestjs/common';
import {
  CLIENT_CAPABILITIES_META_KEY,
  CLIENT_INFO_META_KEY,
  ProtocolErrorCode,
  SERVER_INFO_META_KEY,
} from '@modelcontextprotocol/server';
import {
  httpStatusOf,
  INTERNAL_ERROR_MESSAGE,
  type JsonRpcErrorObject,
  SERVER_ERROR,
  ServerShuttingDownError,
  SHUTDOWN_RETRY_AFTER_MS,
  TaskError,
} from '../errors.js';
import { isPlainObject, type TaskOwner, type TaskRecord, toWireTask } from '../task.js';
import { TASKS_EXTENSION_ID } from '../tasks.constants.js';

/**
 * How the endpoint's answers are written: the JSON-RPC envelopes, the error answers (their HTTP
 * status from httpStatusOf, errors.ts, unless the answer is about the HTTP exchange itself), and
 * the results built in front of the SDK with the `_meta` they carry.
 */

export type RequestId = string | number | null;

/**
 * A request of a tasks method, as the front hands it to the handler that answers it: where the
 * answer goes (`res`, `id`), the method and its params, and the owner it acts for.
 */
export interface MethodCall {
  readonly res: ServerResponse;
  readonly id: RequestId;
  readonly method: string;
  readonly params: unknown;
  readonly owner: TaskOwner;
}

/** The id of a JSON-RPC request body, or `null` when there is none to echo. */
export function idOf(body: unknown): RequestId {
  const id = (body as { id?: unknown } | null)?.id;
  return typeof id === 'string' || (typeof id === 'number' && Number.isFinite(id)) ? id : null;
}

/** Whether a body is a JSON-RPC response (a result or an error, no method). */
export function isJsonRpcResponse(body: unknown): body is {
  id: unknown;
  result?: unknown;
  error?: unknown;
} {
  return isPlainObject(body) && body.method === undefined && ('result' in body || 'error' in body);
}

/** Whether the request declared the tasks extension in its own `_meta` (nothing is inferred). */
export function declaresTasks(params: unknown): boolean {
  const meta = (params as { _meta?: unknown } | null)?._meta;
  const capabilities = (meta as Record<string, unknown> | null | undefined)?.[
    CLIENT_CAPABILITIES_META_KEY
  ];
  const extensions = (capabilities as { extensions?: unknown } | null | undefined)?.extensions;
  const declared = (extensions as Record<string, unknown> | null | undefined)?.[TASKS_EXTENSION_ID];
  return declared !== null && typeof declared === 'object' && !Array.isArray(declared);
}

/** Whether a request's per-request envelope names its client (`clientInfo`, an object). */
export function namesClient(params: unknown): boolean {
  const meta = (params as { _meta?: unknown } | null)?._meta;
  const info = (meta as Record<string, unknown> | null | undefined)?.[CLIENT_INFO_META_KEY];
  return info !== null && typeof info === 'object' && !Array.isArray(info);
}

/** The -32021 error for a request that needs the tasks extension and did not declare it. */
export function missingTasksCapability(what: string): JsonRpcErrorObject {
  return {
    code: ProtocolErrorCode.MissingRequiredClientCapability,
    message: `Missing required client capability: ${what} requires the ${TASKS_EXTENSION_ID} extension`,
    data: { requiredCapabilities: { extensions: { [TASKS_EXTENSION_ID]: {} } } },
  };
}

/** -32603 "Internal error": a fault whose detail stays in the process. */
export const INTERNAL_ERROR: Readonly<JsonRpcErrorObject> = {
  code: ProtocolErrorCode.InternalError,
  message: INTERNAL_ERROR_MESSAGE,
};

/** The SDK's answer to an HTTP method it does not serve (HTTP 405), byte for byte. */
export const METHOD_NOT_ALLOWED = {
  jsonrpc: '2.0',
  error: { code: SERVER_ERROR, message: 'Method not allowed.' },
  id: null,
};

export function sendJson(
  res: ServerResponse,
  status: number,
  payload: unknown,
  headers?: Record<string, string>,
): void {
  const body = JSON.stringify(payload);
  res.writeHead(status, {
    ...headers,
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(body),
  });
  res.end(body);
}

export function sendResult(res: ServerResponse, id: RequestId, result: unknown): void {
  sendJson(res, 200, { jsonrpc: '2.0', id, result });
}

/**
 * Answers with a JSON-RPC error, with the HTTP status httpStatusOf gives its code; `status` is
 * given only for an answer about the HTTP exchange itself (413, 415, a failing endpoint's 500, or
 * a status the SDK's classifier decided).
 */
export function sendError(
  res: ServerResponse,
  id: RequestId,
  error: JsonRpcErrorObject,
  status: number = httpStatusOf(error),
): void {
  sendJson(res, status, { jsonrpc: '2.0', id, error });
}

/**
 * The answer to a task-tool call while this instance shuts down (ServerShuttingDownError: -32000,
 * `data: { reason: 'shutting_down', retryAfterMs }`); nothing was created.
 *
 * - 2026-07-28: HTTP 503 with `Retry-After`, so that the client or a load balancer makes the call
 *   again on another instance, and (HTTP/1) `Connection: close`, so that a client whose
 *   connection is pinned to this instance opens one that may reach another.
 * - 2025-11-25: HTTP 200. Clients of that era take any other status for a broken transport and
 *   would lose the error (and may drop their session), so the error is the call's answer, in band;
 *   its message says to call again.
 */
export function sendShuttingDown(
  res: ServerResponse,
  id: RequestId,
  era: 'modern' | 'legacy',
): void {
  const error = new ServerShuttingDownError().toJsonRpcError();
  if (era === 'legacy') return sendError(res, id, error);
  const headers: Record<string, string> = {
    'retry-after': String(Math.ceil(SHUTDOWN_RETRY_AFTER_MS / 1000)),
  };
  if (res.req?.httpVersionMajor === 1) headers.connection = 'close';
  sendJson(res, 503, { jsonrpc: '2.0', id, error }, headers);
}

/** The endpoint itself failed before it could answer: HTTP 500, -32603 "Internal error". */
export function sendFault(res: ServerResponse): void {
  sendError(res, null, INTERNAL_ERROR, 500);
}

/**
 * Answers a failed request in band (HTTP 200): a TaskError with its own code and message, anything
 * else -32603 "Internal error", logged here with its detail (which never leaves the process).
 */
export function sendFailure(
  res: ServerResponse,
  id: RequestId,
  error: unknown,
  logger: Logger,
  what: string,
): void {
  if (error instanceof TaskError) return sendError(res, id, error.toJsonRpcError());
  logger.error(`${what} failed: ${(error as Error)?.stack ?? String(error)}`);
  sendError(res, id, INTERNAL_ERROR);
}

// ----- results ----------------------------------------------------------------------------------

/** The `_meta` every result of ours carries: the server's identity, as the SDK's own results do. */
export function resultMeta(serverInfo: unknown): Record<string, unknown> {
  return { [SERVER_INFO_META_KEY]: serverInfo };
}

/** A complete result: its fields, `resultType: 'complete'` and the result `_meta`. */
export function completeResult(
  meta: Record<string, unknown>,
  fields?: object,
): Record<string, unknown> {
  return { ...fields, resultType: 'complete', _meta: meta };
}

/**
 * The CreateTaskResult of a task tool's call: the task, `resultType: 'task'`, no content, and the
 * result `_meta` when the endpoint answers itself (the SDK adds its own when it answers).
 */
export function createTaskResult(
  record: TaskRecord,
  meta?: Record<string, unknown>,
): Record<string, unknown> {
  const result: Record<string, unknown> = {
    ...toWireTask(record),
    resultType: 'task',
    content: [],
  };
  if (meta !== undefined) result._meta = meta;
  return result;
}

/** The tool error result of a call whose arguments fail the tool's schema, as the SDK words it. */
export function invalidArgumentsResult(
  tool: string,
  detail: string,
  meta: Record<string, unknown>,
): Record<string, unknown> {
  return {
    content: [
      {
        type: 'text',
        text: `Input validation error: Invalid arguments for tool ${tool}: ${detail}`,
      },
    ],
    isError: true,
    resultType: 'complete',
    _meta: meta,
  };
}
