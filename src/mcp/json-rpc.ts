import type { ServerResponse } from 'node:http';
import type { Logger } from '@nestjs/common';
import { SERVER_INFO_META_KEY } from '@modelcontextprotocol/server';
import { JSONRPC_INTERNAL_ERROR, type JsonRpcErrorObject, TaskError } from '../errors.js';
import { TASKS_EXTENSION_ID } from '../tasks.constants.js';

export type RequestId = string | number | null;

export const CLIENT_CAPABILITIES_KEY = 'io.modelcontextprotocol/clientCapabilities';
export const MISSING_CAPABILITY = -32021;
export const HEADER_MISMATCH = -32020;

/** The id of a JSON-RPC request body, or `null` when there is none to echo. */
export function idOf(body: unknown): RequestId {
  const id = (body as { id?: unknown } | null)?.id;
  return typeof id === 'string' || (typeof id === 'number' && Number.isFinite(id)) ? id : null;
}

/** Whether the request declared the tasks extension in its own `_meta` (nothing is inferred). */
export function declaresTasks(params: unknown): boolean {
  const meta = (params as { _meta?: unknown } | null)?._meta;
  const capabilities = (meta as Record<string, unknown> | null | undefined)?.[
    CLIENT_CAPABILITIES_KEY
  ];
  const extensions = (capabilities as { extensions?: unknown } | null | undefined)?.extensions;
  const declared = (extensions as Record<string, unknown> | null | undefined)?.[TASKS_EXTENSION_ID];
  return declared !== null && typeof declared === 'object' && !Array.isArray(declared);
}

/** The -32021 error for a request that needs the tasks extension and did not declare it. */
export function missingTasksCapability(what: string): JsonRpcErrorObject {
  return {
    code: MISSING_CAPABILITY,
    message: `Missing required client capability: ${what} requires the ${TASKS_EXTENSION_ID} extension`,
    data: { requiredCapabilities: { extensions: { [TASKS_EXTENSION_ID]: {} } } },
  };
}

/** The SDK's answer to an HTTP method it does not serve (HTTP 405), byte for byte. */
export const METHOD_NOT_ALLOWED = {
  jsonrpc: '2.0',
  error: { code: -32000, message: 'Method not allowed.' },
  id: null,
};

export function sendJson(res: ServerResponse, status: number, payload: unknown): void {
  const body = JSON.stringify(payload);
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(body),
  });
  res.end(body);
}

export function sendResult(res: ServerResponse, id: RequestId, result: unknown): void {
  sendJson(res, 200, { jsonrpc: '2.0', id, result });
}

export function sendError(
  res: ServerResponse,
  status: number,
  id: RequestId,
  error: JsonRpcErrorObject,
): void {
  sendJson(res, status, { jsonrpc: '2.0', id, error });
}

/** The `_meta` every result of ours carries: the server's identity, as the SDK's own results do. */
export function resultMeta(serverInfo: unknown): Record<string, unknown> {
  return { [SERVER_INFO_META_KEY]: serverInfo };
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
  if (error instanceof TaskError) return sendError(res, 200, id, error.toJsonRpcError());
  logger.error(`${what} failed: ${(error as Error)?.stack ?? String(error)}`);
  sendError(res, 200, id, { code: JSONRPC_INTERNAL_ERROR, message: 'Internal error' });
}
