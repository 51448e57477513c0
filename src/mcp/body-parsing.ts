import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import { ProtocolErrorCode } from '@modelcontextprotocol/server';
import { MAX_REQUEST_ID_LENGTH } from '../tasks.constants.js';
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
  [ORIGINAL_TYPE]?: string;
}
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
    hook: (request: TaggedRequest, reply: unknown, done: () => void) => void,
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

/**
 * Under Express, the endpoint reads its own JSON bodies, with its own limit (`maxBodyBytes`),
 * ahead of the app's body parser (which then finds the body read and skips it). Call it before
 * Nest registers its parser; `isEndpoint` is asked per request, so the path may be settled later
 * (a global prefix is set after the module is built).
 */
export function installExpressParser(
  instance: unknown,
  isEndpoint: (pathname: string) => boolean,
  maxBytes: number,
): void {
  (instance as { use(handler: ExpressMiddleware): void }).use((req, _res, next) => {
    if (req.method !== 'POST' || !isEndpoint(pathnameOf(req.url ?? ''))) return next();
    const type = req.headers['content-type'];
    if (typeof type !== 'string' || !JSON_TYPE.test(type)) {
      // Another media type: the endpoint answers 415 whatever the body, so it is read and dropped
      // here, before the app's parsers (urlencoded, text) refuse it in their own words and limits.
      (req as IncomingMessage & { body?: unknown }).body = UNSUPPORTED_BODY;
      req.resume();
      req.once('end', () => next());
      req.once('error', () => next());
      return;
    }
    readJson(req, maxBytes, req.headers['content-length']).then(
      (body) => {
        (req as IncomingMessage & { body?: unknown }).body = body;
        next();
      },
      () => {
        (req as IncomingMessage & { body?: unknown }).body = UNPARSABLE_BODY;
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
 * (HTTP 413). Only requests to the endpoint's path are touched; the app's other routes keep the
 * framework's behaviour.
 *
 * - Express: the endpoint parses its own bodies (installExpressParser); should the app's parser
 *   still get one first, an error-handling middleware on the path, ahead of Nest's exception
 *   handler, translates its errors.
 * - Fastify: the endpoint's JSON requests are parsed by a parser of ours (Fastify's parsers are
 *   per media type, so the request is tagged with a private one on arrival), which hands the
 *   endpoint a marker instead of failing.
 */
export function installBodyParsing(
  adapterName: string,
  instance: unknown,
  path: string,
  maxBytes: number,
): void {
  if (adapterName === 'express') {
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
    fastify.addHook('onRequest', (request, _reply, done) => {
      if (request.method === 'POST' && pathnameOf(request.url) === path) {
        const type = request.headers['content-type'];
        const json = typeof type === 'string' && JSON_TYPE.test(type);
        request[ORIGINAL_TYPE] = type;
        request.headers['content-type'] = json ? ENDPOINT_JSON : ENDPOINT_OTHER;
      }
      done();
    });
    fastify.addContentTypeParser(ENDPOINT_OTHER, (request, payload, done) => {
      restoreType(request);
      payload.resume();
      payload.once('end', () => done(null, UNSUPPORTED_BODY));
      payload.once('error', () => done(null, UNSUPPORTED_BODY));
    });
    fastify.addContentTypeParser(ENDPOINT_JSON, (request, payload, done) => {
      restoreType(request);
      readJson(payload, maxBytes, request.headers['content-length']).then(
        (body) => done(null, body),
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

/**
 * Reads a JSON body of at most `maxBytes`. Memory stays bounded by the limit whatever the client
 * sends: a body whose Content-Length is over the limit is read and dropped without keeping any of
 * it, and a body that goes over the limit while it streams (chunked) drops what it kept at once;
 * the rest is read and dropped too, so the client still gets its answer. The chunks are decoded
 * and scanned for nesting one by one, with no concatenated copy of the body. Broken JSON is a
 * parse error even when it is also deep (-32700 before -32600); the depth is read from the raw
 * bytes, without walking the parsed value.
 */
export function readJson(
  payload: Readable,
  maxBytes: number,
  declaredLength?: string | string[],
): Promise<unknown> {
  const declared = Number(Array.isArray(declaredLength) ? declaredLength[0] : declaredLength);
  let chunks: Buffer[] = [];
  let size = declared > maxBytes ? maxBytes + 1 : 0;
  // Plain listeners rather than an async iterator: a small body is one chunk, and the iterator's
  // promises and end-of-stream watch cost more than reading it.
  return new Promise((resolve, reject) => {
    if (payload.readableEnded) return reject(new Error('The request body was read already'));
    const onData = (chunk: Buffer): void => {
      if (size > maxBytes) return;
      size += chunk.length;
      if (size <= maxBytes) chunks.push(chunk);
      else chunks = [];
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
      payload.off('data', onData);
      payload.off('end', onEnd);
      payload.off('error', onError);
      payload.off('close', onClose);
    };
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
