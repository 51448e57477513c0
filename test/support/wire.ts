/**
 * The MCP wire as the e2e tests write it by hand: the protocol version, the tasks extension id, the
 * `_meta` keys, the per-request envelope a 2026-07-28 client puts in `params._meta`, the standard
 * headers and the JSON-RPC message the tests read back. raw.ts (single requests, raw HTTP), sse.ts
 * (listen streams) and the fuzz generators (fuzz/) build on it.
 *
 * The values are literals on purpose, not imported from src/ or the SDK: the tests pin the wire.
 */

export const PROTOCOL_VERSION = '2026-07-28';
/** The previous revision (SEP-1686 tasks), which the endpoint also serves. */
export const LEGACY_PROTOCOL_VERSION = '2025-11-25';
export const TASKS_EXTENSION = 'io.modelcontextprotocol/tasks';

/** `params._meta` keys. */
export const PROTOCOL_VERSION_KEY = 'io.modelcontextprotocol/protocolVersion';
export const CLIENT_INFO_KEY = 'io.modelcontextprotocol/clientInfo';
export const CLIENT_CAPABILITIES_KEY = 'io.modelcontextprotocol/clientCapabilities';
export const SUBSCRIPTION_ID_KEY = 'io.modelcontextprotocol/subscriptionId';

/** A JSON-RPC message (request, notification or response), as far as the tests read it. */
export interface JsonRpcMessage {
  jsonrpc?: unknown;
  id?: unknown;
  method?: string;
  params?: Record<string, unknown> & { _meta?: Record<string, unknown> };
  result?: Record<string, unknown> & { _meta?: Record<string, unknown> };
  error?: { code: number; message: string; data?: unknown };
}

/** The client capabilities that declare the tasks extension, or none. */
export function declaredCapabilities(declareTasks: boolean): Record<string, unknown> {
  return declareTasks ? { extensions: { [TASKS_EXTENSION]: {} } } : {};
}

/** The per-request envelope a 2026-07-28 client named `clientName` puts in `params._meta`. */
export function envelope(
  clientCapabilities: Record<string, unknown>,
  clientName: string,
): Record<string, unknown> {
  return {
    [PROTOCOL_VERSION_KEY]: PROTOCOL_VERSION,
    [CLIENT_INFO_KEY]: { name: clientName, version: '1.0.0' },
    [CLIENT_CAPABILITIES_KEY]: clientCapabilities,
  };
}

/** The well-formed standard headers of a request (`Mcp-Name` when given). */
export function standardHeaders(method: string, name?: string): Record<string, string> {
  return {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': PROTOCOL_VERSION,
    'mcp-method': method,
    ...(name !== undefined && { 'mcp-name': name }),
  };
}

/** The headers of a 2025-11-25 request (no standard headers in that revision), as `principal`. */
export function legacyHeaders(
  principal: string,
  accept = 'application/json, text/event-stream',
): Record<string, string> {
  return {
    'content-type': 'application/json',
    accept,
    'mcp-protocol-version': LEGACY_PROTOCOL_VERSION,
    authorization: `Bearer ${principal}`,
  };
}

/** A body parsed as a JSON-RPC message; `undefined` when it is not JSON. */
export function parseMessage(text: string): JsonRpcMessage | undefined {
  try {
    return JSON.parse(text) as JsonRpcMessage;
  } catch {
    return undefined;
  }
}
