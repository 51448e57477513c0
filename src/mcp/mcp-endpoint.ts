import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  Inject,
  Injectable,
  Logger,
  type OnApplicationShutdown,
  type OnModuleInit,
} from '@nestjs/common';
import {
  type AuthInfo,
  classifyInboundRequest,
  createMcpHandler,
  type McpHttpHandler,
  ProtocolErrorCode,
  UnsupportedProtocolVersionError,
} from '@modelcontextprotocol/server';
import { ownerOf } from '../principal.js';
import type { TaskOwner } from '../task.js';
import { TASKS_CONFIG } from '../tasks.constants.js';
import {
  BODY_TOO_LARGE,
  JSON_TYPE,
  TOO_DEEP,
  TOO_DEEP_BODY,
  OVERSIZED_BODY,
  PARSE_ERROR,
  UNPARSABLE_BODY,
  UNSUPPORTED_MEDIA_TYPE,
} from './body-parsing.js';
import type { TasksConfig } from '../interfaces/tasks-module-options.interface.js';
import { TaskToolRegistry } from '../tools/task-tool.registry.js';
import { methodNotAllowed, SDK_METHODS } from './body-parsing.installer.js';
import {
  declaresTasks,
  idOf,
  missingTasksCapability,
  namesClient,
  sendError,
  sendFault,
} from './json-rpc.js';
import { ListenHandler } from './listen.handler.js';
import { McpServerNotifier } from './mcp-server.notifier.js';
import {
  type EndpointRequestInfo,
  McpServerFactory,
  REQUEST_INFO_KEY,
} from './mcp-server.factory.js';
import { requestTarget } from './request-target.js';
import { serveWithSdk } from './sdk-bridge.js';
import { checkStandardHeaders, type StandardHeaders } from './standard-headers.js';
import {
  isJsonRpcResponse,
  LEGACY_TASK_METHODS,
  LegacyTasksHandler,
  parseInputRequestId,
} from './legacy-tasks.handler.js';
import { TaskToolCallHandler } from './task-tool-call.handler.js';
import { TASK_METHODS, TasksMethodsHandler } from './tasks-methods.handler.js';

/** The framework's request and response: Express's are Node's own; Fastify's wrap them. */
export interface FrameworkRequest {
  raw?: IncomingMessage;
  body?: unknown;
  headers: IncomingMessage['headers'];
}
export interface FrameworkReply {
  raw?: ServerResponse;
  hijack?: () => void;
  getHeaders?: () => Record<string, number | string | string[] | undefined>;
}

function copyReplyHeaders(reply: FrameworkReply, res: ServerResponse): void {
  for (const [name, value] of Object.entries(reply.getHeaders?.() ?? {})) {
    if (value !== undefined) res.setHeader(name, value);
  }
}

function header(request: FrameworkRequest, name: string): string | undefined {
  const value = request.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** The protocol revisions served on the modern path (what the SDK's own gate accepts). */
const MODERN_REVISIONS: readonly string[] = ['2026-07-28'];

/**
 * One request to the MCP endpoint, in order: the body and the SDK's classification (envelope,
 * era, JSON-RPC shape); the standard headers; then the route:
 * - `tasks/get|update|cancel` → the lean path (TasksMethodsHandler);
 * - `subscriptions/listen` → ListenHandler (an SSE stream);
 * - `tools/call` of a task tool: from a client with the tasks extension → TaskToolCallHandler
 *   (the task is created and answered in front of the SDK); without it → -32021 (HTTP 400),
 *   unless the tool runs inline (then the SDK serves it);
 * - 2025-11-25 (legacy era): `tasks/get|result|list|cancel` and a client's answer to an input
 *   request → LegacyTasksHandler; `tools/call` of a task tool with `params.task` →
 *   TaskToolCallHandler; without it, a task-only tool is -32601 on HTTP 200 (that revision's
 *   rule, read by its clients as the call's error) and an inline one goes to the SDK;
 * - everything else → the official SDK handler with a per-request McpServer.
 * No error leaves with a stack: faults are logged and answered -32603. The body parsing and the 405
 * answers in front of the routes are BodyParsingInstaller's.
 */
@Injectable()
export class McpEndpoint implements OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger('McpEndpoint');
  private handler!: McpHttpHandler;

  constructor(
    @Inject(TASKS_CONFIG) private readonly config: TasksConfig,
    private readonly registry: TaskToolRegistry,
    private readonly factory: McpServerFactory,
    private readonly methods: TasksMethodsHandler,
    private readonly listen: ListenHandler,
    private readonly toolCalls: TaskToolCallHandler,
    private readonly legacy: LegacyTasksHandler,
    private readonly serverNotifier: McpServerNotifier,
  ) {}

  onModuleInit(): void {
    const onerror = (error: Error): void => this.logger.debug(`MCP: ${error.message}`);
    const maxRequestBodySize = this.config.maxBodyBytes;
    this.handler = createMcpHandler(this.factory.create, { onerror, maxRequestBodySize });
    this.serverNotifier.attach(this.handler.notify, () => this.factory.retireServers());
    // What the server advertises decides which core listen filters are honoured.
    this.listen.attach(this.handler.bus, this.factory.create().server.getCapabilities());
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
      // Fastify keeps the headers a guard or an interceptor set on its reply (the ThrottlerGuard's
      // X-RateLimit-*) until it sends; the endpoint writes the raw response itself, so they are
      // put on it first, as under Express, where they are on it already.
      if (reply.raw) copyReplyHeaders(reply, res);
      await this.route(request, req, res);
    } catch (error) {
      this.logger.error(`Request failed: ${(error as Error)?.stack ?? String(error)}`);
      if (!res.headersSent) sendFault(res);
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
      return sendError(res, null, UNSUPPORTED_MEDIA_TYPE, 415);
    }
    const declaredLength = Number(header(request, 'content-length') ?? 0);
    const body = declaredLength > this.config.maxBodyBytes ? OVERSIZED_BODY : request.body;
    if (body === UNPARSABLE_BODY) return sendError(res, null, PARSE_ERROR);
    if (body === TOO_DEEP_BODY) return sendError(res, null, TOO_DEEP);
    if (body === OVERSIZED_BODY) return sendError(res, null, BODY_TOO_LARGE, 413);
    // What no route below serves goes to the SDK as it is: its handler runs the same classifier
    // (and the same revision and standard-header checks), so it is not classified twice.
    if (!this.servedHere(body)) return this.toSdk(req, res, body, this.infoOf(owner, body, req));
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
      // The SDK's classifier decided the status.
      return sendError(
        res,
        idOf(body),
        { code, message, ...(data !== undefined && { data }) },
        outcome.httpStatus,
      );
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
        return sendError(res, idOf(message), { code, message: text, data });
      }
      const mismatch = checkStandardHeaders(
        headers,
        method,
        message.params,
        outcome.classification.revision,
      );
      if (mismatch) return sendError(res, idOf(message), mismatch);
      if (TASK_METHODS.has(method)) {
        return this.methods.handle(res, idOf(message), method, message.params, owner);
      }
      if (method === 'subscriptions/listen') {
        return this.listen.open(res, idOf(message), message.params, owner);
      }
    }

    if (outcome.kind === 'legacy') {
      if (isJsonRpcResponse(body) && parseInputRequestId(body.id) !== undefined) {
        return this.legacy.answer(res, body, owner);
      }
      if (isRequest && LEGACY_TASK_METHODS.has(method)) {
        return this.legacy.handle(req, res, idOf(message), method, message.params, owner);
      }
    }

    const info = this.infoOf(owner, message, req);
    const tasks = info.tasks;
    if (isRequest && method === 'tools/call') {
      const name = (message.params as { name?: unknown } | null)?.name;
      const tool = typeof name === 'string' ? this.registry.get(name) : undefined;
      if (tool && outcome.kind === 'legacy') {
        const params = message.params as Record<string, unknown>;
        if (params.task !== undefined) {
          return this.toolCalls.handle(
            res,
            idOf(message),
            tool,
            params,
            owner,
            'legacy',
            request.headers,
          );
        }
        if (tool.options.whenClientLacksTasks === 'reject') {
          return sendError(res, idOf(message), {
            code: ProtocolErrorCode.MethodNotFound,
            message: `Tool ${name} must be called as a task (execution.taskSupport "required")`,
          });
        }
      } else if (tool && !tasks && tool.options.whenClientLacksTasks === 'reject') {
        return sendError(res, idOf(message), missingTasksCapability(`tool ${name}`));
      }
      if (tool && tasks && outcome.kind === 'modern') {
        return this.toolCalls.handle(
          res,
          idOf(message),
          tool,
          message.params as Record<string, unknown>,
          owner,
          'modern',
          request.headers,
        );
      }
      if (typeof name === 'string') info.tool = name;
    }
    return this.toSdk(req, res, body, info);
  }

  /**
   * Whether a route in front of the SDK may serve the body: a tasks method, a listen, a task
   * tool's call, or a client's answer (a JSON-RPC response). Anything else is the SDK's.
   */
  private servedHere(body: unknown): boolean {
    if (body === null || typeof body !== 'object' || Array.isArray(body)) return false;
    const { method, params } = body as { method?: unknown; params?: unknown };
    if (typeof method !== 'string') return isJsonRpcResponse(body);
    if (TASK_METHODS.has(method) || LEGACY_TASK_METHODS.has(method)) return true;
    if (method === 'subscriptions/listen') return true;
    if (method !== 'tools/call') return false;
    const name = (params as { name?: unknown } | null | undefined)?.name;
    return typeof name === 'string' && this.registry.get(name) !== undefined;
  }

  /** What the SDK's factory and the tool calls learn about a request. */
  private infoOf(
    owner: Required<TaskOwner>,
    message: unknown,
    req: IncomingMessage,
  ): EndpointRequestInfo {
    const { method, params } = (message ?? {}) as { method?: unknown; params?: unknown };
    return {
      owner,
      tasks: declaresTasks(params),
      identified: namesClient(params),
      ...(typeof method === 'string' && { method }),
      // Only a tool call starts a run, whose span continues the trace the request names.
      ...(method === 'tools/call' && {
        trace: { meta: (params as { _meta?: unknown } | null)?._meta, headers: req.headers },
      }),
    };
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
