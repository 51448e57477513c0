import { request } from 'node:http';
import { connect } from 'node:net';
import {
  declaredCapabilities,
  envelope,
  type JsonRpcMessage,
  parseMessage,
  PROTOCOL_VERSION,
} from './wire.js';

/**
 * Raw HTTP for the MCP endpoint: requests written by hand (standard headers, `params._meta`
 * envelope) and responses read to the end as text, so tests can look at every byte the server
 * sends, including what a malformed request gets back.
 */

/** A response read to the end. `json` is the parsed body, `undefined` when it is not JSON. */
export interface RawResponse {
  status: number;
  /** Lower-case header names. */
  headers: Record<string, string>;
  text: string;
  json: JsonRpcMessage | undefined;
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
  const capabilities = options.capabilities ?? declaredCapabilities(options.tasks !== false);
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
    params: { ...params, _meta: envelope(capabilities, 'errors-e2e') },
  });
  return { headers, body };
}

/** POSTs with `fetch`. */
export async function post(url: string, { headers, body }: RawRequest): Promise<RawResponse> {
  const response = await fetch(url, { method: 'POST', headers, body });
  const text = await response.text();
  return {
    status: response.status,
    headers: Object.fromEntries(response.headers),
    text,
    json: parseMessage(text),
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
          resolve({ status: res.statusCode ?? 0, headers: flat, text, json: parseMessage(text) });
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

/** One HTTP/1.1 exchange written byte for byte on its own connection (see `exchange`). */
export interface RawExchange {
  /** The request method as sent, any token (`LOCK`, a made-up one). */
  method: string;
  /** The request target as sent: `/mcp`, `http://host/mcp`, `*`, `/MCP/`… */
  target: string;
  /** Header lines in order (repeated names stay repeated); `Connection: close` is added. */
  headers: ReadonlyArray<readonly [string, string]>;
  body?: string | Buffer;
}

/** An answer read to the end; `status` 0 when the server closed the connection without one. */
export interface RawAnswer extends RawResponse {
  /** Repeated header lines joined with ", " (lower-case names). */
  raw: string;
}

function decodeChunked(body: Buffer): Buffer {
  const out: Buffer[] = [];
  let at = 0;
  for (;;) {
    const end = body.indexOf('\r\n', at);
    if (end === -1) break;
    const size = parseInt(body.subarray(at, end).toString('latin1'), 16);
    if (!Number.isFinite(size) || size === 0) break;
    out.push(body.subarray(end + 2, end + 2 + size));
    at = end + 2 + size + 2;
  }
  return Buffer.concat(out);
}

/**
 * Sends one request exactly as written (method, request target, header lines, body with a
 * Content-Length) on a fresh connection to `port` on loopback, and reads the answer until the
 * server closes it. For what `fetch` and `http.request` will not send: absolute-form and `*`
 * targets, `CONNECT`, methods Node's parser refuses, headers in any case and repeated.
 */
export function exchange(
  port: number,
  request: RawExchange,
  timeoutMs = 10_000,
): Promise<RawAnswer> {
  return new Promise((resolve) => {
    const body =
      typeof request.body === 'string' ? Buffer.from(request.body, 'utf8') : (request.body ?? null);
    const lines = [`${request.method} ${request.target} HTTP/1.1`];
    for (const [name, value] of request.headers) lines.push(`${name}: ${value}`);
    lines.push('Connection: close');
    if (body !== null) lines.push(`Content-Length: ${body.length}`);
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.setTimeout(timeoutMs, () => socket.destroy());
    socket.on('error', () => socket.destroy());
    socket.on('close', () => {
      const all = Buffer.concat(chunks);
      const split = all.indexOf('\r\n\r\n');
      const head = (split === -1 ? all : all.subarray(0, split)).toString('latin1');
      const [statusLine = '', ...headerLines] = head.split('\r\n');
      const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine)?.[1] ?? 0);
      const headers: Record<string, string> = {};
      for (const line of headerLines) {
        const colon = line.indexOf(':');
        if (colon === -1) continue;
        const name = line.slice(0, colon).trim().toLowerCase();
        const value = line.slice(colon + 1).trim();
        headers[name] = headers[name] === undefined ? value : `${headers[name]}, ${value}`;
      }
      let payload: Buffer = split === -1 ? Buffer.alloc(0) : all.subarray(split + 4);
      if (/chunked/i.test(headers['transfer-encoding'] ?? '')) payload = decodeChunked(payload);
      const text = payload.toString('utf8');
      resolve({ status, headers, text, json: parseMessage(text), raw: all.toString('utf8') });
    });
    socket.write(`${lines.join('\r\n')}\r\n\r\n`);
    if (body !== null) socket.write(body);
  });
}
