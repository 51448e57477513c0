import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  Inject,
  Injectable,
  Logger,
  type OnApplicationShutdown,
  type OnModuleInit,
  Optional,
} from '@nestjs/common';
import { ApplicationConfig, HttpAdapterHost } from '@nestjs/core';
import {
  type AuthInfo,
  classifyInboundRequest,
  createMcpHandler,
  type McpHttpHandler,
  UnsupportedProtocolVersionError,
} from '@modelcontextprotocol/server';
import { ownerOf } from '../principal.js';
import { MCP_PATH, TASKS_CONFIG } from '../tasks.constants.js';
import {
  BODY_TOO_LARGE,
  installBodyParsing,
  installExpressParser,
  JSON_TYPE,
  TOO_DEEP,
  TOO_DEEP_BODY,
  OVERSIZED_BODY,
  PARSE_ERROR,
  UNPARSABLE_BODY,
} from './body-parsing.js';
import type { TasksConfig } from '../tasks.options.js';
import { ListenRouter } from '../listen/listen.router.js';
import { TaskToolRegistry } from '../tools/task-tool.registry.js';
import { declaresTasks, idOf, missingTasksCapability, sendError, sendJson } from './json-rpc.js';
import {
  type EndpointRequestInfo,
  McpServerFactory,
  REQUEST_INFO_KEY,
} from './mcp-server.factory.js';
import { requestTarget } from './request-target.js';
import { serveWithSdk } from './sdk-bridge.js';
import { checkStandardHeaders, type StandardHeaders } from './standard-headers.js';
import { TaskToolCalls } from './task-tool-calls.js';
import { TASK_METHODS, TasksMethods } from './tasks-methods.js';

/** The framework's request and response: Express's are Node's own; Fastify's wrap them. */
export interface FrameworkRequest {
  raw?: IncomingMessage;
  body?: unknown;
  headers: IncomingMessage['headers'];
}
export interface FrameworkReply {
  raw?: ServerResponse;
  hijack?: () => void;
}

function header(request: FrameworkRequest, name: string): string | undefined {
  const value = request.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/**
 * The HTTP methods the SDK answers itself (405 today; they were the 2025 era's session
 * operations). Every other method but POST is answered here the same way: the SDK would turn
 * some of them (TRACE) into a 500 while building its web Request.
 */
const SDK_METHODS: ReadonlySet<string> = new Set(['GET', 'DELETE']);

const METHOD_NOT_ALLOWED = {
  jsonrpc: '2.0',
  error: { code: -32000, message: 'Method not allowed.' },
  id: null,
};

/** What the SDK answers a method it does not serve, byte for byte, with `Allow: POST`. */
function methodNotAllowed(res: ServerResponse): void {
  res.setHeader('allow', 'POST');
  sendJson(res, 405, METHOD_NOT_ALLOWED);
}

type ExpressMiddleware = (req: IncomingMessage, res: ServerResponse, next: () => void) => void;

interface FastifyLike {
  supportedMethods: string[];
  addHook(
    name: 'onRequest',
    hook: (
      request: { raw: IncomingMessage },
      reply: {
        code(status: number): FastifyReplyLike;
      },
      done: () => void,
    ) => void,
  ): void;
}
interface FastifyReplyLike {
  code(status: number): FastifyReplyLike;
  header(name: string, value: string): FastifyReplyLike;
  send(payload: string): unknown;
}

/** The protocol revisions served on the modern path (what the SDK's own gate accepts). */
const MODERN_REVISIONS: readonly string[] = ['2026-07-28'];

/**
 * One request to the MCP endpoint, in order: the body and the SDK's classification (envelope,
 * era, JSON-RPC shape); the standard headers; then the route:
 * - `tasks/get|update|cancel` → the lean path (TasksMethods);
 * - `subscriptions/listen` → the listen router (an SSE stream);
 * - `tools/call` of a task tool: from a client with the tasks extension → TaskToolCalls (the task
 *   is created and answered in front of the SDK); without it → -32021 (HTTP 400), unless the
 *   tool runs inline (then the SDK serves it);
 * - everything else → the official SDK handler with a per-request McpServer.
 * No error leaves with a stack: faults are logged and answered -32603.
 */
@Injectable()
export class McpEndpoint implements OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger('McpEndpoint');
  private handler!: McpHttpHandler;
  /** The endpoint's full path (global prefix included), settled at module init. */
  private fullPath: string | undefined;

  constructor(
    @Inject(TASKS_CONFIG) private readonly config: TasksConfig,
    private readonly registry: TaskToolRegistry,
    private readonly factory: McpServerFactory,
    private readonly methods: TasksMethods,
    private readonly listen: ListenRouter,
    private readonly toolCalls: TaskToolCalls,
    @Inject(MCP_PATH) private readonly path: string | false,
    @Optional() private readonly adapterHost?: HttpAdapterHost,
    @Optional() private readonly appConfig?: ApplicationConfig,
  ) {
    // As soon as the HTTP adapter exists, and so before Nest registers its body parser: under
    // Express the endpoint reads its own bodies, with its own size limit.
    adapterHost?.init$.subscribe(() => {
      const adapter = adapterHost.httpAdapter;
      if (path === false || adapter?.getType() !== 'express') return;
      // First of all, so that no body parser reads (and refuses) the body of a method the
      // endpoint does not serve.
      (adapter.getInstance() as { use(handler: ExpressMiddleware): void }).use((req, res, next) => {
        if (this.refusesMethod(req)) methodNotAllowed(res);
        else next();
      });
      installExpressParser(
        adapter.getInstance(),
        (pathname) => pathname === this.fullPath,
        config.maxBodyBytes,
      );
    });
  }

  onModuleInit(): void {
    const onerror = (error: Error): void => this.logger.debug(`MCP: ${error.message}`);
    const maxRequestBodySize = this.config.maxBodyBytes;
    this.handler = createMcpHandler(this.factory.create, { onerror, maxRequestBodySize });
    // What the server advertises decides which core listen filters are honoured.
    this.listen.attach(this.handler.bus, this.factory.create().server.getCapabilities());
    const adapter = this.adapterHost?.httpAdapter;
    if (this.path !== false && adapter) {
      this.fullPath = `/${[this.appConfig?.getGlobalPrefix() ?? '', this.path].join('/')}`
        .replace(/\/{2,}/g, '/')
        .replace(/(.)\/$/, '$1');
      installBodyParsing(
        adapter.getType(),
        adapter.getInstance(),
        this.fullPath,
        maxRequestBodySize,
      );
      if (adapter.getType() === 'fastify') this.answerUnroutedMethods(adapter.getInstance());
    }
  }

  /**
   * Under Fastify, a method the endpoint does not serve is answered at the endpoint's path in an
   * onRequest hook, before Fastify reads a body for it: its JSON parser would answer a PUT with an
   * empty or broken JSON body 400 in its own words, and a method it cannot route (PURGE, LINK…)
   * would end in the app's 404. (Under Express a first middleware does the same.)
   */
  private answerUnroutedMethods(instance: unknown): void {
    const fastify = instance as FastifyLike;
    fastify.addHook('onRequest', (request, reply, done) => {
      if (!this.refusesMethod(request.raw)) return done();
      reply
        .code(405)
        .header('allow', 'POST')
        .header('content-type', 'application/json')
        .send(JSON.stringify(METHOD_NOT_ALLOWED));
    });
  }

  /**
   * Whether the request is to the endpoint's path with a method it answers 405 before any body
   * parser runs: anything but POST, GET and DELETE (the SDK's), and a CORS preflight.
   */
  private refusesMethod(req: IncomingMessage): boolean {
    const method = req.method ?? '';
    if (method === 'POST' || SDK_METHODS.has(method)) return false;
    if (method === 'OPTIONS' && req.headers['access-control-request-method'] !== undefined) {
      return false;
    }
    const pathname = requestTarget(req.url ?? '')?.pathname;
    return pathname !== undefined && this.isEndpointPath(pathname);
  }

  /** Whether `pathname` (as sent, undecoded) is the endpoint's path: one exact spelling. */
  isEndpointPath(pathname: string): boolean {
    return this.fullPath !== undefined && pathname === this.fullPath;
  }

  async onApplicationShutdown(): Promise<void> {
    await this.handler?.close();
  }

  /** Serves one HTTP request (any method) to the endpoint. */
  async handle(request: FrameworkRequest, reply: FrameworkReply): Promise<void> {
    const req = (request.raw ?? request) as IncomingMessage;
    const res = (reply.raw ?? reply) as ServerResponse;
    reply.hijack?.();
    try {
      await this.route(request, req, res);
    } catch (error) {
      this.logger.error(`Request failed: ${(error as Error)?.stack ?? String(error)}`);
      if (!res.headersSent) sendError(res, 500, null, { code: -32603, message: 'Internal error' });
      else res.end();
    }
  }

  private async route(
    request: FrameworkRequest,
    req: IncomingMessage,
    res: ServerResponse,
  ): Promise<void> {
    const owner = ownerOf(request, this.config.principal, this.config.tenant);
    if (req.method !== 'POST') {
      if (!SDK_METHODS.has(req.method ?? '')) return methodNotAllowed(res);
      return this.toSdk(req, res, undefined, { owner, tasks: false });
    }

    const contentType = header(request, 'content-type') ?? '';
    if (!JSON_TYPE.test(contentType)) {
      return sendError(res, 415, null, {
        code: -32600,
        message: 'Unsupported Media Type: Content-Type must be application/json',
      });
    }
    const declaredLength = Number(header(request, 'content-length') ?? 0);
    const body = declaredLength > this.config.maxBodyBytes ? OVERSIZED_BODY : request.body;
    if (body === UNPARSABLE_BODY) return sendError(res, 400, null, PARSE_ERROR);
    if (body === TOO_DEEP_BODY) return sendError(res, 400, null, TOO_DEEP);
    if (body === OVERSIZED_BODY) return sendError(res, 413, null, BODY_TOO_LARGE);
    const headers: StandardHeaders = {
      protocolVersion: header(request, 'mcp-protocol-version'),
      method: header(request, 'mcp-method'),
      name: header(request, 'mcp-name'),
    };
    const outcome = classifyInboundRequest({
      httpMethod: 'POST',
      protocolVersionHeader: headers.protocolVersion,
      mcpMethodHeader: headers.method,
      mcpNameHeader: headers.name,
      body,
    });
    if (outcome.kind === 'reject') {
      const { code, message, data } = outcome;
      return sendError(res, outcome.httpStatus, idOf(body), {
        code,
        message,
        ...(data !== undefined && { data }),
      });
    }

    const message = (outcome.kind === 'modern' ? outcome.message : body) as {
      id?: unknown;
      method?: unknown;
      params?: unknown;
    };
    const method = typeof message?.method === 'string' ? message.method : undefined;
    const isRequest = method !== undefined && message.id !== undefined;

    if (outcome.kind === 'modern' && isRequest) {
      const revision = outcome.classification.revision;
      if (revision === undefined || !MODERN_REVISIONS.includes(revision)) {
        const {
          code,
          message: text,
          data,
        } = new UnsupportedProtocolVersionError({
          supported: [...MODERN_REVISIONS],
          requested: revision ?? 'unknown',
        });
        return sendError(res, 400, idOf(message), { code, message: text, data });
      }
      const mismatch = checkStandardHeaders(
        headers,
        method,
        message.params,
        outcome.classification.revision,
      );
      if (mismatch) return sendError(res, 400, idOf(message), mismatch);
      if (TASK_METHODS.has(method)) {
        return this.methods.handle(res, idOf(message), method, message.params, owner);
      }
      if (method === 'subscriptions/listen') {
        return this.listen.open(res, idOf(message), message.params, owner);
      }
    }

    const tasks = declaresTasks(message?.params);
    const info: EndpointRequestInfo = { owner, tasks, ...(method !== undefined && { method }) };
    if (isRequest && method === 'tools/call') {
      const name = (message.params as { name?: unknown } | null)?.name;
      const tool = typeof name === 'string' ? this.registry.get(name) : undefined;
      if (tool && !tasks && tool.options.whenClientLacksTasks === 'reject') {
        return sendError(res, 400, idOf(message), missingTasksCapability(`tool ${name}`));
      }
      if (tool && tasks && outcome.kind === 'modern') {
        return this.toolCalls.handle(
          res,
          idOf(message),
          tool,
          message.params as Record<string, unknown>,
          owner,
        );
      }
      if (typeof name === 'string') info.tool = name;
    }
    return this.toSdk(req, res, body, info);
  }

  private toSdk(
    req: IncomingMessage,
    res: ServerResponse,
    body: unknown,
    info: EndpointRequestInfo,
  ): Promise<void> {
    // The SDK builds its web Request's URL from the Host header and `req.url`: an absolute-form
    // target is handed over in origin form, with the authority it names as the host (RFC 9112
    // §3.2.2; McpHostGuard has checked that authority).
    const target = requestTarget(req.url ?? '');
    if (target?.authority !== undefined) {
      req.url = `${target.pathname}${target.search}`;
      req.headers.host = target.authority;
    }
    const carrier = req as IncomingMessage & { auth?: AuthInfo };
    const existing = carrier.auth;
    carrier.auth = {
      token: existing?.token ?? '',
      clientId: existing?.clientId ?? info.owner.principal ?? '',
      scopes: existing?.scopes ?? [],
      ...(existing?.expiresAt !== undefined && { expiresAt: existing.expiresAt }),
      extra: { ...existing?.extra, [REQUEST_INFO_KEY]: info },
    };
    return serveWithSdk(this.handler, carrier, res, body, (error) =>
      this.logger.error(`MCP: ${error.stack ?? error.message}`),
    );
  }
}
