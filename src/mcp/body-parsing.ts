import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import type { BodyBudget } from './body-budget.js';
import { readJson, type ReadJsonOptions } from './body-reader.js';
import {
  BODY_TOO_LARGE,
  bodyTimedOut,
  JSON_TYPE,
  NOT_A_MESSAGE,
  PARSE_ERROR,
  RefusedBody,
  sendRefusal,
  UNPARSABLE_BODY,
  UNSUPPORTED_BODY,
} from './body-refusals.js';
import { sendError } from './json-rpc.js';
import { pathOfTarget } from './request-target.js';

/*
 * How the endpoint's POST bodies reach it under each framework: the Express middleware and the
 * Fastify parser that read them with readJson (body-reader.ts) within the endpoint's limits, and
 * the translation of the framework's own parse errors. What is refused, and how it is answered,
 * is in body-refusals.ts.
 */

/** Whether `text` is valid JSON (body-parser keeps the text of a body its strict mode refused). */
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
