import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  Inject,
  Injectable,
  Logger,
  type OnApplicationShutdown,
  type OnModuleInit,
} from '@nestjs/common';
import { type AuthInfo, createMcpHandler, type McpHttpHandler } from '@modelcontextprotocol/server';
import { ownerOf } from '../principal.js';
import type { TaskOwner } from '../task.js';
import { TASKS_CONFIG } from '../tasks.constants.js';
import { bodyRefusal, sendBodyRefusal } from './body-refusals.js';
import type { TasksConfig } from '../interfaces/tasks-module-options.interface.js';
import { TaskToolRegistry } from '../tools/task-tool.registry.js';
import { methodNotAllowed, SDK_METHODS } from './body-parsing.installer.js';
import { declaresTasks, namesClient, sendFault } from './json-rpc.js';
import { ListenHandler } from './listen.handler.js';
import { McpServerNotifier } from './mcp-server.notifier.js';
import {
  type EndpointRequestInfo,
  McpServerFactory,
  REQUEST_INFO_KEY,
} from './mcp-server.factory.js';
import { requestTarget } from './request-target.js';
import { serveWithSdk } from './sdk-bridge.js';
import { headerValue } from './standard-headers.js';
import { McpTasksFront } from './tasks-front.js';

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

/**
 * Takes the response over from the framework, to write the raw one: a Fastify reply is hijacked,
 * and the headers a guard or an interceptor set on it (the ThrottlerGuard's X-RateLimit-*), which
 * Fastify keeps until it sends, are put on the raw response (under Express they are on it).
 */
export function handOver(reply: FrameworkReply, res: ServerResponse): void {
  if (reply.raw === undefined) return;
  reply.hijack?.();
  for (const [name, value] of Object.entries(reply.getHeaders?.() ?? {})) {
    if (value !== undefined) res.setHeader(name, value);
  }
}

function header(request: FrameworkRequest, name: string): string | undefined {
  return headerValue(request.headers[name]);
}

/**
 * The package's own MCP endpoint: one HTTP request, in order:
 * - a method other than POST goes to the SDK (GET and DELETE: it answers 405) or is answered 405;
 * - the body (bodyRefusal): a media type other than JSON is 415, a body the parser refused is 400
 *   (broken JSON, nested too deep) or 413 (over `maxBodyBytes`), an over-long request id 400;
 * - task traffic is McpTasksFront's (see its table of routes per protocol revision);
 * - everything else goes to the official SDK handler with a per-request McpServer
 *   (McpServerFactory), told who the owner is and, for a task tool called inline, which tool.
 * The host and origin checks and the app's guards ran before (the controller's guards), for every
 * request; the body parsing and the 405 answers in front of the routes are BodyParsingInstaller's.
 * No error leaves with a stack: faults are logged and answered -32603.
 */
@Injectable()
export class McpEndpoint implements OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger('McpEndpoint');
  private handler!: McpHttpHandler;

  constructor(
    @Inject(TASKS_CONFIG) private readonly config: TasksConfig,
    private readonly registry: TaskToolRegistry,
    private readonly factory: McpServerFactory,
    private readonly front: McpTasksFront,
    private readonly listen: ListenHandler,
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
    try {
      handOver(reply, res);
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
    if (req.method !== 'POST') {
      if (!SDK_METHODS.has(req.method ?? '')) return methodNotAllowed(res);
      return this.toSdk(req, res, undefined, { owner: this.ownerOf(request), tasks: false });
    }
    const body = request.body;
    const refusal = bodyRefusal(
      header(request, 'content-type'),
      header(request, 'content-length'),
      body,
      this.config.maxBodyBytes,
    );
    // A RefusedBody was answered by the parser as it refused the body (sendBodyRefusal leaves it).
    if (refusal) return sendBodyRefusal(res, refusal);
    if (await this.front.serve(request, req, res, body)) return;
    // The SDK runs the same classifier (and the same revision and standard-header checks) itself,
    // so what the front passed on is not classified twice.
    const info = this.infoOf(this.ownerOf(request), body, req);
    if (info.method === 'tools/call') {
      const name = ((body as { params?: unknown }).params as { name?: unknown } | null)?.name;
      if (typeof name === 'string' && this.registry.has(name)) info.tool = name;
    }
    return this.toSdk(req, res, body, info);
  }

  private ownerOf(request: FrameworkRequest): Required<TaskOwner> {
    return ownerOf(request, this.config.principal, this.config.tenant);
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
