import type { AuthProvider, FetchLike } from '@modelcontextprotocol/client';
import type { JsonValue } from '@modelcontextprotocol/ext-tasks/core';
import {
  DispatchError,
  type DispatchOptions,
  type JsonRpcResponse,
  type RawClientDispatch,
} from '@modelcontextprotocol/ext-tasks/client';
import {
  Backoff,
  connectionOutage,
  DEFAULT_RETRY,
  type RetryPolicy,
  statusOutage,
  TaskServerUnreachableError,
} from './retry.js';
import { isObject } from '../object-shape.js';

/** The protocol revision the client speaks (the Tasks extension's era). */
export const PROTOCOL_VERSION = '2026-07-28';

/** A JSON object as the official packages type it. */
type JsonObject = { readonly [key: string]: JsonValue };

/** Which params field `Mcp-Name` mirrors, for the methods the raw path sends. */
const NAME_FIELD: Readonly<Record<string, string>> = {
  'tools/call': 'name',
  'tasks/get': 'taskId',
  'tasks/update': 'taskId',
  'tasks/cancel': 'taskId',
};

/**
 * Methods whose repetition changes nothing (`tasks/update` answers input keys the server takes
 * once): they are tried again while the server is away. `tools/call` is not: only a connection
 * refused, which sent nothing, is tried again.
 */
const IDEMPOTENT = new Set(['tasks/get', 'tasks/update', 'tasks/cancel']);

/** A header value as sent: plain when it is printable ASCII, else the `=?base64?…?=` form. */
function headerValue(value: string): string {
  return /^[\x20-\x7e]*$/.test(value) && value.trim() === value
    ? value
    : `=?base64?${Buffer.from(value, 'utf8').toString('base64')}?=`;
}

/** The JSON-RPC response with `id` in a reply body: plain JSON, or an SSE stream of messages. */
function findResponse(contentType: string, text: string, id: string): unknown {
  if (!/^text\/event-stream/i.test(contentType)) return JSON.parse(text) as unknown;
  for (const event of text.split(/\r?\n\r?\n/)) {
    const data = event
      .split(/\r?\n/)
      .filter((line) => line.startsWith('data:'))
      .map((line) => line.slice(5).replace(/^ /, ''))
      .join('\n');
    if (data === '') continue;
    const message = JSON.parse(data) as unknown;
    if (isObject(message) && message.id === id && ('result' in message || 'error' in message)) {
      return message;
    }
  }
  return undefined;
}

/** Turns a parsed reply into the session port's response shape, or explains why it cannot. */
function toPortResponse(reply: unknown, id: string, status: number): JsonRpcResponse {
  if (!isObject(reply) || reply.jsonrpc !== '2.0' || reply.id !== id) {
    throw new DispatchError(`The endpoint answered HTTP ${status} without a JSON-RPC response`);
  }
  const { error, result } = reply;
  if (isObject(error)) {
    if (!Number.isInteger(error.code) || typeof error.message !== 'string') {
      throw new DispatchError('The endpoint answered a malformed JSON-RPC error');
    }
    return {
      kind: 'error',
      error: {
        code: error.code as number,
        message: error.message,
        ...(error.data !== undefined && { data: error.data as JsonValue }),
      },
    };
  }
  if (!isObject(result)) {
    throw new DispatchError('The endpoint answered a result that is no object');
  }
  return { kind: 'result', result: result as JsonObject };
}

/** How the raw path reaches the endpoint: headers, an `AuthProvider`, a fetch. */
export interface RawDispatchOptions {
  /** Sent on every request (the per-request `context.headers` of the session win). */
  headers?: Readonly<Record<string, string>>;
  /**
   * `token()` is asked before every request and sent as `Authorization: Bearer <token>` (over a
   * static `Authorization` header, as the SDK transport does). On HTTP 401, `onUnauthorized()` is
   * awaited once and the request retried once.
   */
  authProvider?: AuthProvider;
  /** The fetch to use; the global one by default. */
  fetch?: FetchLike;
  /** How long and how often a request is tried again while the server is away (`DEFAULT_RETRY`). */
  retry?: RetryPolicy;
  /** Once aborted, a failed request is no longer tried again (the client is closing). */
  stopRetries?: AbortSignal;
}

/**
 * The raw HTTP path the official Tasks session needs on a 2026-07-28 server: the SDK `Client`
 * refuses a `resultType: "task"`, so `tools/call` and `tasks/*` are POSTed here. The session hands
 * over the framed request (method and params, `_meta` envelope included); this adds the JSON-RPC id
 * and the standard headers (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`) and returns the
 * JSON-RPC response of a JSON or SSE reply.
 */
export function createRawDispatch(
  url: string | URL,
  options: RawDispatchOptions = {},
): RawClientDispatch {
  const endpoint = new URL(url);
  const fetchImpl: FetchLike = options.fetch ?? ((input, init) => fetch(input, init));
  const { authProvider } = options;
  let sequence = 0;

  const post = async (
    headers: Headers,
    body: string,
    signal: AbortSignal | undefined,
  ): Promise<Response> => {
    const sent = new Headers(headers);
    const token = authProvider === undefined ? undefined : await authProvider.token();
    if (token !== undefined) sent.set('Authorization', `Bearer ${token}`);
    return fetchImpl(endpoint, {
      method: 'POST',
      headers: sent,
      body,
      ...(signal !== undefined && { signal }),
    });
  };

  return async (request: JsonValue, dispatch: DispatchOptions = {}): Promise<JsonRpcResponse> => {
    if (!isObject(request) || typeof request.method !== 'string') {
      throw new DispatchError('A JSON-RPC request needs a method');
    }
    const method = request.method;
    const params = isObject(request.params) ? request.params : undefined;
    const id = `tasks-${++sequence}`;

    const headers = new Headers(options.headers);
    for (const [name, value] of Object.entries(dispatch.context?.headers ?? {})) {
      headers.set(name, value);
    }
    headers.set('Content-Type', 'application/json');
    headers.set('Accept', 'application/json, text/event-stream');
    headers.set('MCP-Protocol-Version', PROTOCOL_VERSION);
    headers.set('Mcp-Method', method);
    const field = Object.hasOwn(NAME_FIELD, method) ? NAME_FIELD[method] : undefined;
    const name = field === undefined ? undefined : params?.[field];
    if (typeof name === 'string') headers.set('Mcp-Name', headerValue(name));
    else headers.delete('Mcp-Name');
    const body = JSON.stringify({ jsonrpc: '2.0', id, ...request });

    /** One try: the answer, or why there is none. */
    const send = async (): Promise<{ response: Response; text: string } | { failure: unknown }> => {
      try {
        let response = await post(headers, body, dispatch.signal);
        if (response.status === 401 && authProvider?.onUnauthorized !== undefined) {
          await authProvider.onUnauthorized({
            response,
            serverUrl: endpoint,
            fetchFn: fetchImpl,
          });
          response = await post(headers, body, dispatch.signal);
        }
        return { response, text: await response.text() };
      } catch (error) {
        if (dispatch.signal?.aborted) throw error;
        return { failure: error };
      }
    };

    const backoff = new Backoff(options.retry ?? DEFAULT_RETRY);
    let answer = await send();
    for (;;) {
      const outage =
        'failure' in answer
          ? connectionOutage(answer.failure)
          : statusOutage(answer.response.status);
      if (outage === undefined || !(IDEMPOTENT.has(method) || outage.refused)) break;
      if (await backoff.next(dispatch.signal, options.stopRetries)) {
        answer = await send();
        continue;
      }
      const taskId = method.startsWith('tasks/') ? params?.taskId : undefined;
      throw new TaskServerUnreachableError(
        {
          url: endpoint.href,
          method,
          taskId: typeof taskId === 'string' ? taskId : undefined,
          outage,
          attempts: backoff.failed,
          waitedMs: backoff.waitedMs,
        },
        'failure' in answer ? { cause: answer.failure } : undefined,
      );
    }
    if ('failure' in answer) {
      throw new DispatchError(
        `${method}: the request to ${endpoint.href} failed`,
        IDEMPOTENT.has(method),
        { cause: answer.failure },
      );
    }
    const { response, text } = answer;
    if (response.status === 401) {
      throw new DispatchError(`${method}: ${endpoint.href} answered HTTP 401 (unauthorized)`);
    }
    let reply: unknown;
    try {
      reply = findResponse(response.headers.get('content-type') ?? '', text, id);
    } catch (error) {
      throw new DispatchError(
        `${method}: the endpoint answered HTTP ${response.status} that is no JSON`,
        false,
        { cause: error },
      );
    }
    return toPortResponse(reply, id, response.status);
  };
}
