import type { IncomingMessage, ServerResponse } from 'node:http';
import { ProtocolErrorCode } from '@modelcontextprotocol/server';
import { type JsonRpcErrorObject, SERVER_ERROR } from '../errors.js';
import { MAX_REQUEST_ID_LENGTH } from '../tasks.constants.js';
import { sendError } from './json-rpc.js';

/*
 * What the endpoint refuses in a POST's body, and how it answers: the markers its reader puts in
 * place of a body it could not take, the JSON-RPC errors and HTTP statuses of each refusal, and
 * the answer to a body refused while it arrived (RefusedBody).
 */

/** What the endpoint finds in place of a body the framework could not parse. */
export const UNPARSABLE_BODY = Symbol('nestjs-mcp-tasks: unparsable body');
export const OVERSIZED_BODY = Symbol('nestjs-mcp-tasks: oversized body');
export const TOO_DEEP_BODY = Symbol('nestjs-mcp-tasks: body nested too deeply');
/** A body of another media type, read and dropped (Fastify), so the endpoint answers 415 itself. */
export const UNSUPPORTED_BODY = Symbol('nestjs-mcp-tasks: unsupported media type');

/** The deepest nesting of arrays and objects a body may have. */
export const MAX_BODY_DEPTH = 64;

export const PARSE_ERROR = {
  code: ProtocolErrorCode.ParseError,
  message: 'Parse error: the request body is not valid JSON',
};
/** Answered with HTTP 413. */
export const BODY_TOO_LARGE = {
  code: ProtocolErrorCode.InvalidRequest,
  message: 'Request body too large',
};
/** Answered with HTTP 415. */
export const UNSUPPORTED_MEDIA_TYPE = {
  code: ProtocolErrorCode.InvalidRequest,
  message: 'Unsupported Media Type: Content-Type must be application/json',
};
export const TOO_DEEP = {
  code: ProtocolErrorCode.InvalidRequest,
  message: `Bad Request: the request body nests deeper than ${MAX_BODY_DEPTH} levels`,
};
/** Answered with HTTP 400. */
export const ID_TOO_LONG = {
  code: ProtocolErrorCode.InvalidRequest,
  message: `Bad Request: the JSON-RPC id is longer than ${MAX_REQUEST_ID_LENGTH} characters`,
};

/**
 * Whether a parsed body is a request (it has a method) whose string id is longer than
 * MAX_REQUEST_ID_LENGTH, or a batch holding one: answered ID_TOO_LONG before anything reads it.
 * A response's id is the server's own (a 2025-11-25 input request's, which names the tool's input
 * key): one that is not is dropped as unknown, and nothing keeps it.
 */
export function hasLongId(body: unknown): boolean {
  if (Array.isArray(body)) return body.some(hasLongId);
  const { id, method } = (body ?? {}) as { id?: unknown; method?: unknown };
  return method !== undefined && typeof id === 'string' && id.length > MAX_REQUEST_ID_LENGTH;
}

/** Why the endpoint refuses a POST's body, and the HTTP status it answers with. */
export interface BodyRefusal {
  readonly error: { readonly code: number; readonly message: string };
  readonly status: number;
}

/**
 * What the endpoint answers, with no id, a POST whose body it refuses before any handler reads
 * it, or `undefined`; in order: a body the parser refused while it arrived (a RefusedBody, which
 * the parser answered), a media type other than JSON (415), a body over `maxBytes` by its
 * Content-Length or as read (413), broken JSON (-32700, 400), nesting deeper than MAX_BODY_DEPTH
 * (-32600, 400), a request id longer than MAX_REQUEST_ID_LENGTH (-32600, 400). `body` is what
 * the endpoint's reader made of the body: the parsed value, or the marker of what was wrong.
 *
 * The package's own endpoint and a rekog route fronted by TaskHttpTransport both answer with it
 * (sendBodyRefusal), their bodies read by the same reader, so the two refuse a malformed request
 * alike.
 */
export function bodyRefusal(
  contentType: string | undefined,
  declaredLength: string | undefined,
  body: unknown,
  maxBytes: number,
): BodyRefusal | RefusedBody | undefined {
  if (body instanceof RefusedBody) return body;
  if (!JSON_TYPE.test(contentType ?? '')) return { error: UNSUPPORTED_MEDIA_TYPE, status: 415 };
  if (body === OVERSIZED_BODY || Number(declaredLength ?? 0) > maxBytes) {
    return { error: BODY_TOO_LARGE, status: 413 };
  }
  if (body === UNPARSABLE_BODY) return { error: PARSE_ERROR, status: 400 };
  if (body === TOO_DEEP_BODY) return { error: TOO_DEEP, status: 400 };
  if (hasLongId(body)) return { error: ID_TOO_LONG, status: 400 };
  return undefined;
}

/** Answers a bodyRefusal; a RefusedBody only if its parser has not (see sendRefusal). */
export function sendBodyRefusal(res: ServerResponse, refusal: BodyRefusal | RefusedBody): void {
  if (refusal instanceof RefusedBody) {
    if (!res.writableEnded) sendRefusal(res, refusal);
    return;
  }
  sendError(res, null, refusal.error, refusal.status);
}

export const NOT_A_MESSAGE = {
  code: ProtocolErrorCode.InvalidRequest,
  message: 'Bad Request: the request body is not a valid JSON-RPC message',
};

/**
 * The media type the endpoint accepts: exactly `application/json`, with any parameters. The SDK's
 * isJsonContentType is not used: it refuses a parameter section with a comma in it
 * (`application/json; a=b, c`), which this accepts, so the two do not draw the same line.
 */
export const JSON_TYPE = /^\s*application\/json\s*(;|$)/i;

/**
 * A body the reader stopped reading before its end: its request is answered with this at once
 * (sendRefusal), and its connection closed, since the rest of the body is still on the way.
 * Nothing of it is kept.
 */
export class RefusedBody {
  constructor(
    /** 408 (too slow), 413 (over the size limit and too slow to drop), 503 (budget full). */
    readonly status: 408 | 413 | 503,
    readonly error: JsonRpcErrorObject,
    /** For 503: when the client may send again (`Retry-After`, rounded up to seconds). */
    readonly retryAfterMs?: number,
  ) {}
}

/** The refusal of a body that did not arrive within `timeoutMs`. */
export function bodyTimedOut(timeoutMs: number): RefusedBody {
  return new RefusedBody(408, {
    code: SERVER_ERROR,
    message: `Request body not received in time (bodies.timeoutMs ${timeoutMs})`,
    data: { limit: 'bodies.timeoutMs', max: timeoutMs },
  });
}

/**
 * How long a refused request's connection stays open after its answer, at most: closing a socket
 * with unread bytes makes the kernel reset the connection, and a client still writing its body
 * could lose the answer with it. Meanwhile nothing more of the body is read (the request is
 * paused, so the socket stops reading once a few KiB wait): the refused body costs no more memory.
 */
export const REFUSAL_LINGER_MS = 1_000;

/**
 * Answers a refused body (HTTP 408, 413 or 503, with `Retry-After` for 503) with a JSON-RPC error
 * and `id: null`, and closes the connection (`Connection: close`): the answer is written at once,
 * whole (its Content-Length tells the client it is complete), and the response is ended, which
 * makes Node close the socket, when the client closes or after REFUSAL_LINGER_MS. A slow client
 * holds no socket longer than that. A response already under way is cut instead.
 */
export function sendRefusal(res: ServerResponse, refused: RefusedBody): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = JSON.stringify({ jsonrpc: '2.0', id: null, error: refused.error });
  const headers: Record<string, string | number> = {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(body),
  };
  // HTTP/2 has no Connection header (and refuses one); its stream ends with the answer.
  if (res.req?.httpVersionMajor === 1) headers.connection = 'close';
  if (refused.retryAfterMs !== undefined) {
    headers['retry-after'] = String(Math.ceil(refused.retryAfterMs / 1000));
  }
  res.writeHead(refused.status, headers);
  res.write(body);
  const req = res.req as IncomingMessage | undefined;
  if (req === undefined || req.readableEnded || req.destroyed) {
    res.end();
    return;
  }
  const end = (): void => {
    clearTimeout(timer);
    req.off('close', end);
    req.off('error', end);
    res.end();
  };
  const timer = setTimeout(end, REFUSAL_LINGER_MS);
  timer.unref();
  req.on('close', end);
  req.on('error', end);
  req.pause();
}
