import { HEADER_MISMATCH, type JsonRpcErrorObject } from '../errors.js';

/** The request headers the Streamable HTTP binding standardises. */
export interface StandardHeaders {
  protocolVersion?: string;
  method?: string;
  name?: string;
}

/** A request header's value as one string: the first of a repeated header. */
export function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

/** Which params field `Mcp-Name` mirrors, per method. */
const NAME_SOURCE: Readonly<Record<string, string>> = {
  'tools/call': 'name',
  'prompts/get': 'name',
  'resources/read': 'uri',
  'tasks/get': 'taskId',
  'tasks/update': 'taskId',
  'tasks/cancel': 'taskId',
};

const BASE64_SENTINEL = /^=\?base64\?([A-Za-z0-9+/]*={0,2})\?=$/;

/** Decodes a `=?base64?…?=` header value; plain values pass; a broken sentinel is `undefined`. */
function decodeHeaderValue(value: string): string | undefined {
  if (!value.startsWith('=?base64?')) return value;
  const match = BASE64_SENTINEL.exec(value);
  if (!match || match[1]!.length % 4 !== 0) return undefined;
  const decoded = Buffer.from(match[1]!, 'base64');
  const text = decoded.toString('utf8');
  return Buffer.from(text, 'utf8').equals(decoded) ? text : undefined;
}

/** The most of a client's value an answer echoes (a task id may be long: see MAX_TASK_ID_LENGTH). */
const SHOWN_CHARS = 64;

/** `value`, cut to SHOWN_CHARS characters with an ellipsis when longer. */
function shown(value: string): string {
  return value.length <= SHOWN_CHARS ? value : `${value.slice(0, SHOWN_CHARS)}…`;
}

function mismatch(header: string, detail: string): JsonRpcErrorObject {
  return {
    code: HEADER_MISMATCH,
    message: `Bad Request: the request headers and body disagree: ${detail}`,
    data: { mismatch: { header, body: detail } },
  };
}

/**
 * The presence and `Mcp-Name` half of the standard-header checks (-32020, HTTP 400) for a
 * request served before the SDK, matching what the SDK answers for the requests it serves:
 * `MCP-Protocol-Version` and `Mcp-Method` must be present, and `Mcp-Name` must mirror
 * `params.name` / `params.uri` / `params.taskId` where the method has one. (The SDK's classifier
 * already refuses a header that contradicts the body's method or protocol version.)
 */
export function checkStandardHeaders(
  headers: StandardHeaders,
  method: string,
  params: unknown,
  revision: string | undefined,
): JsonRpcErrorObject | undefined {
  if (headers.protocolVersion === undefined) {
    return mismatch(
      '(missing)',
      revision === undefined
        ? 'the body carries a modern per-request envelope but the required MCP-Protocol-Version header is absent'
        : `the body envelope names protocol version ${revision} but the required MCP-Protocol-Version header is absent`,
    );
  }
  if (headers.method === undefined) {
    return mismatch(
      '(missing)',
      `the body names method ${method} but the required Mcp-Method header is absent`,
    );
  }
  const field = Object.hasOwn(NAME_SOURCE, method) ? NAME_SOURCE[method]! : undefined;
  if (field === undefined) return undefined;
  const raw = (params as Record<string, unknown> | null | undefined)?.[field];
  const bodyValue = typeof raw === 'string' ? raw : undefined;
  if (headers.name === undefined) {
    if (bodyValue === undefined) return undefined;
    return mismatch(
      '(missing)',
      `the body carries params.${field}="${shown(bodyValue)}" but the required Mcp-Name header is absent`,
    );
  }
  const name = headers.name.trim();
  const decoded = decodeHeaderValue(name);
  if (decoded === undefined) {
    return mismatch(shown(name), 'the Mcp-Name header carries an invalid Base64 sentinel value');
  }
  if (bodyValue !== undefined && decoded !== bodyValue) {
    return mismatch(
      shown(name),
      `the body carries params.${field}="${shown(bodyValue)}" but the Mcp-Name header names "${shown(decoded)}"`,
    );
  }
  return undefined;
}
