import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import { ProtocolErrorCode } from '@modelcontextprotocol/server';
import { type JsonRpcErrorObject, SERVER_ERROR } from '../errors.js';
import { BODY_CHUNK_OVERHEAD_BYTES, MAX_REQUEST_ID_LENGTH } from '../tasks.constants.js';
import type { BodyAccount, BodyBudget } from './body-budget.js';
import { sendError } from './json-rpc.js';
import { pathOfTarget } from './request-target.js';

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

function isJson(text: unknown): boolean {
  if (typeof text !== 'string') return false;
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/** The media type the endpoint's Fastify requests carry while routed to our own parser. */
const ENDPOINT_JSON = 'application/vnd.nestjs-mcp-tasks+json';
/** The same, for bodies of any other media type (answered 415 by the endpoint). */
const ENDPOINT_OTHER = 'application/vnd.nestjs-mcp-tasks.other';
/** Where the request's own Content-Type waits meanwhile (restored once the body is parsed). */
const ORIGINAL_TYPE = Symbol('nestjs-mcp-tasks: content-type');

interface TaggedRequest {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  /** The client's address, as Fastify gives it (its trustProxy setting decides). */
  ip?: string;
  raw?: IncomingMessage;
  /** The route Fastify matched the request to (as registered). */
  routeOptions?: { url?: string };
  [ORIGINAL_TYPE]?: string;
  [REPLY]?: FastifyReplyLike;
}
interface FastifyReplyLike {
  raw: ServerResponse;
  hijack(): void;
}
/** Where the endpoint's Fastify request keeps its reply, for a body refused while it is read. */
const REPLY = Symbol('nestjs-mcp-tasks: reply');

/**
 * The media type the endpoint accepts: exactly `application/json`, with any parameters. The SDK's
 * isJsonContentType is not used: it refuses a parameter section with a comma in it
 * (`application/json; a=b, c`), which this accepts, so the two do not draw the same line.
 */
export const JSON_TYPE = /^\s*application\/json\s*(;|$)/i;

interface ExpressLike {
  use(
    path: string,
    handler: (
      error: unknown,
      req: IncomingMessage,
      res: ServerResponse,
      next: (error?: unknown) => void,
    ) => void,
  ): void;
}

interface FastifyLike {
  addHook(
    name: 'onRequest',
    hook: (request: TaggedRequest, reply: FastifyReplyLike, done: () => void) => void,
  ): void;
  addContentTypeParser(
    type: string,
    parser: (
      request: TaggedRequest,
      payload: Readable,
      done: (error: Error | null, body?: unknown) => void,
    ) => void,
  ): void;
}

/** What the endpoint allows a body while it reads it (`maxBodyBytes` and the `bodies` options). */
export interface EndpointBodyLimits {
  readonly maxBytes: number;
  /** What the bodies being read hold, in all and per address. */
  readonly budget: BodyBudget;
  /** The longest a body may take to arrive, in ms. */
  readonly timeoutMs: number;
}

/** The options of readJson for one request of the endpoint's. */
function readOptions(
  limits: EndpointBodyLimits,
  headers: IncomingMessage['headers'],
  address: () => string,
): ReadJsonOptions {
  return {
    maxBytes: limits.maxBytes,
    declaredLength: headers['content-length'],
    account: limits.budget.open(address),
    timeoutMs: limits.timeoutMs,
  };
}

/**
 * Reads a body of another media type to its end and drops it (the endpoint answers 415 whatever
 * it holds), within `timeoutMs`: resolves a RefusedBody (408) when the time is up first.
 */
function drop(payload: Readable, timeoutMs: number): Promise<RefusedBody | undefined> {
  return new Promise((resolve) => {
    const finish = (refused?: RefusedBody): void => {
      clearTimeout(timer);
      payload.off('end', onEnd);
      payload.off('error', onEnd);
      payload.off('close', onEnd);
      resolve(refused);
    };
    const onEnd = (): void => finish();
    const timer = setTimeout(() => finish(bodyTimedOut(timeoutMs)), timeoutMs);
    timer.unref();
    payload.on('end', onEnd);
    payload.on('error', onEnd);
    payload.on('close', onEnd);
    payload.resume();
  });
}

/**
 * Under Express, the endpoint reads its own JSON bodies, with its own limits (`maxBodyBytes`, the
 * `bodies` options), ahead of the app's body parser (which then finds the body read and skips
 * it). Call it before Nest registers its parser; `isEndpoint` is asked per request, so the path
 * may be settled later (a global prefix is set after the module is built). A body refused while
 * it arrives (budget full, too slow) is answered here and the request goes no further.
 */
export function installExpressParser(
  instance: unknown,
  isEndpoint: (pathname: string) => boolean,
  limits: EndpointBodyLimits,
): void {
  (instance as { use(handler: ExpressMiddleware): void }).use((req, res, next) => {
    if (req.method !== 'POST' || !isEndpoint(pathnameOf(req.url ?? ''))) return next();
    const request = req as IncomingMessage & { body?: unknown; ip?: string };
    const type = req.headers['content-type'];
    if (typeof type !== 'string' || !JSON_TYPE.test(type)) {
      // Another media type: the endpoint answers 415 whatever the body, so it is read and dropped
      // here, before the app's parsers (urlencoded, text) refuse it in their own words and limits.
      request.body = UNSUPPORTED_BODY;
      void drop(req, limits.timeoutMs).then((refused) =>
        refused === undefined ? next() : sendRefusal(res, refused),
      );
      return;
    }
    // Express's `ip` follows the app's `trust proxy` setting.
    const address = (): string => request.ip ?? req.socket.remoteAddress ?? '';
    readJson(req, readOptions(limits, req.headers, address)).then(
      (body) => {
        if (body instanceof RefusedBody) return sendRefusal(res, body);
        request.body = body;
        next();
      },
      () => {
        request.body = UNPARSABLE_BODY;
        next();
      },
    );
  });
}

type ExpressMiddleware = (
  req: IncomingMessage,
  res: ServerResponse,
  next: (error?: unknown) => void,
) => void;

/** The request target's path (origin or absolute form, see request-target.ts); '' when none. */
function pathnameOf(url: string): string {
  return pathOfTarget(url) ?? '';
}

/**
 * Makes a body the framework cannot parse reach the endpoint as a JSON-RPC error instead of the
 * framework's own error page: malformed JSON → -32700 (HTTP 400), an oversized body → -32600
 * (HTTP 413). Only requests to the endpoint's path (`undefined`: none) and to the routes
 * `isFronted` names are touched; the app's other routes keep the framework's behaviour.
 *
 * - Express: the endpoint parses its own bodies (installExpressParser); should the app's parser
 *   still get one first, an error-handling middleware on the path, ahead of Nest's exception
 *   handler, translates its errors.
 * - Fastify: the endpoint's JSON requests are parsed by a parser of ours (Fastify's parsers are
 *   per media type, so the request is tagged with a private one on arrival), which hands the
 *   endpoint a marker instead of failing. A fronted route is told by the route Fastify matched
 *   the request to (`isFronted` reads it).
 */
export function installBodyParsing(
  adapterName: string,
  instance: unknown,
  path: string | undefined,
  limits: EndpointBodyLimits,
  isFronted: (request: { routeOptions?: { url?: string } }) => boolean = () => false,
): void {
  if (adapterName === 'express') {
    if (path === undefined) return;
    (instance as ExpressLike).use(path, (error, _req, res, next) => {
      const type = (error as { type?: unknown } | null)?.type;
      if (type === 'entity.parse.failed') {
        // body-parser's strict mode refuses JSON that is not an object or array: valid JSON, but
        // not a JSON-RPC message (-32600) rather than a parse error (-32700).
        const raw = (error as { body?: unknown }).body;
        return sendError(res, null, isJson(raw) ? NOT_A_MESSAGE : PARSE_ERROR);
      }
      if (type === 'entity.too.large') return sendError(res, null, BODY_TOO_LARGE, 413);
      next(error);
    });
    return;
  }
  if (adapterName === 'fastify') {
    const fastify = instance as FastifyLike;
    fastify.addHook('onRequest', (request, reply, done) => {
      if (request.method === 'POST' && (pathnameOf(request.url) === path || isFronted(request))) {
        const type = request.headers['content-type'];
        const json = typeof type === 'string' && JSON_TYPE.test(type);
        request[ORIGINAL_TYPE] = type;
        request[REPLY] = reply;
        request.headers['content-type'] = json ? ENDPOINT_JSON : ENDPOINT_OTHER;
      }
      done();
    });
    // A refused body is answered at once, on the raw response Fastify is told to leave alone
    // (hijacked): Fastify then runs no handler for it, and the parser's done ends its part.
    const refuse = (request: TaggedRequest, refused: RefusedBody): void => {
      const reply = request[REPLY];
      if (reply === undefined) return;
      reply.hijack();
      sendRefusal(reply.raw, refused);
    };
    fastify.addContentTypeParser(ENDPOINT_OTHER, (request, payload, done) => {
      restoreType(request);
      void drop(payload, limits.timeoutMs).then((refused) => {
        if (refused !== undefined) refuse(request, refused);
        done(null, refused ?? UNSUPPORTED_BODY);
      });
    });
    fastify.addContentTypeParser(ENDPOINT_JSON, (request, payload, done) => {
      restoreType(request);
      // Fastify's `ip` follows its trustProxy setting.
      const address = (): string => request.ip ?? request.raw?.socket.remoteAddress ?? '';
      readJson(payload, readOptions(limits, request.headers, address)).then(
        (body) => {
          if (body instanceof RefusedBody) refuse(request, body);
          done(null, body);
        },
        () => done(null, UNPARSABLE_BODY),
      );
    });
  }
}

function restoreType(request: TaggedRequest): void {
  const type = request[ORIGINAL_TYPE];
  if (type === undefined) delete request.headers['content-type'];
  else request.headers['content-type'] = type;
}

/** How readJson reads one body. */
export interface ReadJsonOptions {
  /** The largest body kept, in bytes: past it the rest is read and dropped (OVERSIZED_BODY). */
  maxBytes: number;
  /**
   * The request's Content-Length header, as sent: a body declared over `maxBytes` is dropped from
   * its first byte, and the chunk that completes a declared body is not charged to `account`.
   */
  declaredLength?: string | string[];
  /**
   * What the body holds is charged to (BodyBudget.open), and given back when the read ends,
   * however it ends: a body of known length reserves its declared length at its first chunk,
   * and each further chunk kept costs BODY_CHUNK_OVERHEAD_BYTES; a chunked body costs each
   * chunk's bytes and that. The chunk that completes a body of known length is never charged. A
   * charge the budget refuses ends the read with a RefusedBody (503). None: nothing is counted.
   */
  account?: BodyAccount;
  /**
   * The longest the body may take to arrive, in ms from this call; past it the read ends with a
   * RefusedBody: 408, or 413 for a body already over `maxBytes`. None: no limit.
   */
  timeoutMs?: number;
}

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

/**
 * Reads a JSON body of at most `maxBytes`. Memory stays bounded by the limit whatever the client
 * sends: a body whose Content-Length is over the limit is read and dropped without keeping any of
 * it, and a body that goes over the limit while it streams (chunked) drops what it kept at once;
 * the rest is read and dropped too, so the client still gets its answer. The chunks are decoded
 * and scanned for nesting one by one, with no concatenated copy of the body. Broken JSON is a
 * parse error even when it is also deep (-32700 before -32600); the depth is read from the raw
 * bytes, without walking the parsed value.
 *
 * With an `account` and a `timeoutMs` (the endpoint's `bodies` options), what a body holds while
 * it arrives, and for how long, is bounded too: the read ends early with a RefusedBody, its kept
 * chunks dropped, when the budget refuses a chunk or the time is up. Every way the read ends
 * (its end, an error, the client's close, an oversized body, a refusal, the timeout) gives the
 * account back.
 *
 * Resolves the parsed value, OVERSIZED_BODY, TOO_DEEP_BODY or a RefusedBody; rejects with a
 * SyntaxError for broken JSON, or an Error when the stream ends before the body (client gone).
 */
export function readJson(payload: Readable, options: ReadJsonOptions): Promise<unknown> {
  const { maxBytes, account, timeoutMs } = options;
  const header = options.declaredLength;
  const declared = Number(Array.isArray(header) ? header[0] : (header ?? NaN));
  const known = Number.isSafeInteger(declared) && declared >= 0;
  let chunks: Buffer[] = [];
  let size = known && declared > maxBytes ? maxBytes + 1 : 0;
  // Plain listeners rather than an async iterator: a small body is one chunk, and the iterator's
  // promises and end-of-stream watch cost more than reading it.
  return new Promise((resolve, reject) => {
    if (payload.readableEnded) return reject(new Error('The request body was read already'));
    if (payload.destroyed) return reject(new Error('The request closed before its body ended'));
    let timer: NodeJS.Timeout | undefined;
    const refuse = (refused: RefusedBody): void => {
      done();
      chunks = [];
      resolve(refused);
    };
    const onData = (chunk: Buffer): void => {
      if (size > maxBytes) return;
      size += chunk.length;
      if (size > maxBytes) {
        chunks = [];
        account?.release();
        return;
      }
      // The chunk that completes a body of known length is parsed at once, never kept waiting:
      // it is not charged, so a request that arrives whole passes however full the budget is.
      if (account !== undefined && !(known && size >= declared)) {
        // A body of known length reserves all of it at its first chunk, so that one that cannot
        // fit is refused before more of it is read; each chunk it keeps after that costs its
        // Buffer. A chunked body pays for each chunk as it comes.
        const cost = known
          ? account.held === 0
            ? declared
            : BODY_CHUNK_OVERHEAD_BYTES
          : chunk.length + BODY_CHUNK_OVERHEAD_BYTES;
        const refusal = account.charge(cost);
        if (refusal !== undefined) {
          return refuse(new RefusedBody(503, refusal, refusal.data.retryAfterMs));
        }
      }
      chunks.push(chunk);
    };
    const onEnd = (): void => {
      done();
      try {
        resolve(size > maxBytes ? OVERSIZED_BODY : parseJson(chunks));
      } catch (error) {
        reject(error);
      } finally {
        chunks = [];
      }
    };
    const onError = (error: unknown): void => {
      done();
      chunks = [];
      reject(error);
    };
    // Closed before its end (the client went away): nothing more comes.
    const onClose = (): void => onError(new Error('The request closed before its body ended'));
    const done = (): void => {
      clearTimeout(timer);
      payload.off('data', onData);
      payload.off('end', onEnd);
      payload.off('error', onError);
      payload.off('close', onClose);
      account?.release();
    };
    if (timeoutMs !== undefined) {
      timer = setTimeout(() => {
        refuse(size > maxBytes ? new RefusedBody(413, BODY_TOO_LARGE) : bodyTimedOut(timeoutMs));
      }, timeoutMs);
      timer.unref();
    }
    payload.on('data', onData);
    payload.on('end', onEnd);
    payload.on('error', onError);
    payload.on('close', onClose);
  });
}

/** The JSON value of a body's chunks: decoded and scanned for nesting one by one, no copy. */
function parseJson(chunks: readonly Buffer[]): unknown {
  const decoder = new StringDecoder('utf8');
  const nesting = new NestingScanner(MAX_BODY_DEPTH);
  let text = '';
  for (const chunk of chunks) {
    nesting.scan(chunk);
    text += decoder.write(chunk);
  }
  text += decoder.end();
  const body = JSON.parse(text) as unknown;
  return nesting.deepest > MAX_BODY_DEPTH ? TOO_DEEP_BODY : body;
}

/**
 * The deepest nesting of arrays and objects in JSON text, read from its UTF-8 bytes (brackets inside
 * strings do not count), stopping past `limit`. For valid JSON it is the depth of the parsed value;
 * it allocates nothing.
 */
export function nestingOf(bytes: Uint8Array, limit: number): number {
  const scanner = new NestingScanner(limit);
  scanner.scan(bytes);
  return scanner.deepest;
}

/** nestingOf over text that arrives in chunks: the scan's state carries from one to the next. */
export class NestingScanner {
  deepest = 0;
  private depth = 0;
  private inString = false;
  /** The previous chunk ended inside a string on a backslash: the next byte is escaped. */
  private escaped = false;

  constructor(private readonly limit: number) {}

  scan(bytes: Uint8Array): void {
    if (this.deepest > this.limit || bytes.length === 0) return;
    let { depth, deepest, inString } = this;
    let i = 0;
    if (this.escaped) {
      this.escaped = false;
      i = 1;
    }
    for (; i < bytes.length; i++) {
      const byte = bytes[i];
      if (inString) {
        // A backslash escapes the next byte; a quote ends the string.
        if (byte === 0x5c) {
          if (++i === bytes.length) this.escaped = true;
        } else if (byte === 0x22) inString = false;
      } else if (byte === 0x22) {
        inString = true;
      } else if (byte === 0x5b || byte === 0x7b) {
        if (++depth > deepest && (deepest = depth) > this.limit) break;
      } else if (byte === 0x5d || byte === 0x7d) {
        depth--;
      }
    }
    this.depth = depth;
    this.deepest = deepest;
    this.inString = inString;
  }
}
