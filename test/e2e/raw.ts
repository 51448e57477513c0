import { request } from 'node:http';

/**
 * Raw HTTP for the MCP endpoint: requests written by hand (standard headers, `params._meta`
 * envelope) and responses read to the end as text, so tests can look at every byte the server
 * sends, including what a malformed request gets back.
 */

export const PROTOCOL_VERSION = '2026-07-28';
export const TASKS_EXTENSION = 'io.modelcontextprotocol/tasks';
export const CLIENT_CAPABILITIES_KEY = 'io.modelcontextprotocol/clientCapabilities';

/** A JSON-RPC response body, as far as the tests read it. */
export interface JsonRpcBody {
  jsonrpc?: unknown;
  id?: unknown;
  result?: Record<string, unknown>;
  error?: { code: number; message: string; data?: unknown };
}

/** A response read to the end. `json` is the parsed body, `undefined` when it is not JSON. */
export interface RawResponse {
  status: number;
  /** Lower-case header names. */
  headers: Record<string, string>;
  text: string;
  json: JsonRpcBody | undefined;
}

/** An HTTP request to send as is. */
export interface RawRequest {
  headers: Record<string, string>;
  body: string;
}

export interface McpRequestOptions {
  /** The JSON-RPC id. Default 1. */
  id?: string | number;
  /** Declare the tasks extension in the envelope. Default true. */
  tasks?: boolean;
  /** The client capabilities to declare instead (overrides `tasks`). */
  capabilities?: Record<string, unknown>;
  /** `Authorization: Bearer <principal>` (the demo's principal); none = anonymous. */
  principal?: string;
  /** `Mcp-Name`; default `params.name` or `params.taskId`; `null` leaves the header out. */
  name?: string | null;
  /** `Mcp-Method`; default the body's method; `null` leaves the header out. */
  methodHeader?: string | null;
  /** `MCP-Protocol-Version`; default 2026-07-28; `null` leaves the header out. */
  protocolVersion?: string | null;
  /** More headers, applied last. */
  headers?: Record<string, string>;
}

/** The per-request envelope a 2026-07-28 client puts in `params._meta`. */
export function envelope(capabilities: Record<string, unknown>): Record<string, unknown> {
  return {
    'io.modelcontextprotocol/protocolVersion': PROTOCOL_VERSION,
    'io.modelcontextprotocol/clientInfo': { name: 'errors-e2e', version: '1.0.0' },
    [CLIENT_CAPABILITIES_KEY]: capabilities,
  };
}

/** What a client sends in `Mcp-Name` for these params: the tool name or the task id. */
function defaultName(params: Record<string, unknown>): string | undefined {
  for (const value of [params.name, params.taskId]) {
    if (typeof value === 'string') return value;
    if (typeof value === 'number') return String(value);
  }
  return undefined;
}

/** A well-formed MCP request (headers and body), unless the options take something away. */
export function mcpRequest(
  method: string,
  params: Record<string, unknown>,
  options: McpRequestOptions = {},
): RawRequest {
  const capabilities =
    options.capabilities ??
    (options.tasks === false ? {} : { extensions: { [TASKS_EXTENSION]: {} } });
  const name = options.name === undefined ? defaultName(params) : options.name;
  const methodHeader = options.methodHeader === undefined ? method : options.methodHeader;
  const version =
    options.protocolVersion === undefined ? PROTOCOL_VERSION : options.protocolVersion;
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
  };
  if (version !== null) headers['mcp-protocol-version'] = version;
  if (methodHeader !== null) headers['mcp-method'] = methodHeader;
  if (name !== null && name !== undefined) headers['mcp-name'] = name;
  if (options.principal !== undefined) headers.authorization = `Bearer ${options.principal}`;
  Object.assign(headers, options.headers);
  const body = JSON.stringify({
    jsonrpc: '2.0',
    id: options.id ?? 1,
    method,
    params: { ...params, _meta: envelope(capabilities) },
  });
  return { headers, body };
}

/** The well-formed standard headers for a body the test writes by hand. */
export function standardHeaders(method: string, name?: string): Record<string, string> {
  return {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': PROTOCOL_VERSION,
    'mcp-method': method,
    ...(name !== undefined && { 'mcp-name': name }),
  };
}

function parse(text: string): JsonRpcBody | undefined {
  try {
    return JSON.parse(text) as JsonRpcBody;
  } catch {
    return undefined;
  }
}

/** POSTs with `fetch`. */
export async function post(url: string, { headers, body }: RawRequest): Promise<RawResponse> {
  const response = await fetch(url, { method: 'POST', headers, body });
  const text = await response.text();
  return {
    status: response.status,
    headers: Object.fromEntries(response.headers),
    text,
    json: parse(text),
  };
}

/**
 * POSTs with `node:http`, which sends every header as given: `fetch` will not send a `Host` of the
 * caller's choosing, and DNS rebinding is all about that header.
 */
export function postRaw(url: string, { headers, body }: RawRequest): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method: 'POST',
        headers: { 'content-length': String(Buffer.byteLength(body)), ...headers },
        agent: false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('error', reject);
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          const flat: Record<string, string> = {};
          for (const [key, value] of Object.entries(res.headers)) {
            if (value !== undefined) flat[key] = Array.isArray(value) ? value.join(', ') : value;
          }
          resolve({ status: res.statusCode ?? 0, headers: flat, text, json: parse(text) });
        });
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** A line of a stack trace (`    at fn (file:line:col)`) anywhere in a text. */
const STACK_LINE = /(?:^|\n|\\n)\s*at\s+\S|\bat\s[^"\n]*?:\d+:\d+\b/;
/** A source file path (POSIX or Windows), a `file:` URL or node_modules. */
const FILE_PATH =
  /(?:[A-Za-z]:\\|\/)(?:[\w.@-]+[\\/])+[\w.@-]+\.(?:[cm]?[jt]s|json)\b|node_modules|file:\/\//;

/** Why a response body leaks server internals, or `undefined` when it does not. */
export function leak(text: string): string | undefined {
  if (STACK_LINE.test(text)) return `a stack trace line: ${STACK_LINE.exec(text)![0]}`;
  if (FILE_PATH.test(text)) return `a file path: ${FILE_PATH.exec(text)![0]}`;
  if (/"stack"\s*:/.test(text)) return 'a "stack" property';
  if (/<html|<!doctype/i.test(text)) return 'HTML';
  return undefined;
}
