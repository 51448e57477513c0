import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { Inject, Injectable } from '@nestjs/common';
import { ProtocolErrorCode, UnsupportedProtocolVersionError } from '@modelcontextprotocol/server';
import type { JsonRpcErrorObject } from '../errors.js';
import { ownerOf } from '../principal.js';
import type { TaskOwner } from '../task.js';
import { TASKS_CONFIG } from '../tasks.constants.js';
import type { TasksConfig } from '../interfaces/tasks-module-options.interface.js';
import {
  mustBeCalledAsTask,
  TaskToolRegistry,
  type TaskToolDefinition,
} from '../tools/task-tool.registry.js';
import { TaskToolRunner } from '../tools/task-tool.runner.js';
import { classifyInbound } from './inbound-classifier.js';
import {
  declaresTasks,
  idOf,
  isJsonRpcResponse,
  type MethodCall,
  missingTasksCapability,
  type RequestId,
  sendError,
  sendShuttingDown,
} from './json-rpc.js';
import {
  LEGACY_TASK_METHODS,
  LegacyTasksHandler,
  parseInputRequestId,
} from './legacy-tasks.handler.js';
import { ListenHandler } from './listen.handler.js';
import { checkStandardHeaders, headerValue } from './standard-headers.js';
import { TaskToolCallHandler } from './task-tool-call.handler.js';
import { TASK_METHODS, TasksMethodsHandler } from './tasks-methods.handler.js';

/** What the front reads of the framework's request: its headers, and what the guards put on it. */
export interface FrontRequest {
  headers: IncomingHttpHeaders;
}

/** The protocol revisions served on the modern path (what the SDK's own gate accepts). */
export const MODERN_REVISIONS: readonly string[] = ['2026-07-28'];

/** One message the front looked at, with what its routes ask of it. */
interface Message {
  readonly request: FrontRequest;
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  readonly body: unknown;
  readonly id: RequestId;
  /** The JSON-RPC method; `undefined` for a response (a client's answer). */
  readonly method: string | undefined;
  readonly params: unknown;
  /** A request (a method and an id), not a notification or a response. */
  readonly isRequest: boolean;
  /** The task tool a `tools/call` names. */
  readonly tool: TaskToolDefinition | undefined;
  /** The owner of the request's tasks (read once, by the first route that needs it). */
  owner(): Required<TaskOwner>;
}

/**
 * One route of the front: what it serves (in words, for readers and for the table below), when
 * it serves a message, and how. A route's `checks` are what must hold before it serves; the
 * revision and the standard headers of the 2026-07-28 wire are checked for every route of that
 * table (see `serve`).
 */
interface Route {
  readonly serves: string;
  readonly when: (message: Message) => boolean;
  readonly serve: (message: Message) => Promise<void> | void;
}

/**
 * The part of the package that answers task traffic, in front of any MCP handler: the SDK handler
 * the endpoint builds (McpEndpoint), the handler of a `@rekog/mcp-nest` app (the `/rekog` entry),
 * or an app's own. Given a POST's parsed JSON body, `serve` answers it when it is task traffic and
 * resolves `true`; for anything else it writes nothing and resolves `false`, and the handler
 * behind serves the request as if the front were not there.
 *
 * Task traffic is a tasks method, a listen, a task tool's `tools/call`, or a client's answer to a
 * task's input request; which of them a message is, and who serves it, is one table per protocol
 * revision (ROUTES). The HTTP checks (host and origin, body limits and media type, the app's
 * guards) are the caller's, once for every request whoever serves it: the front sees only what
 * passed them.
 */
@Injectable()
export class McpTasksFront {
  private readonly routes: Readonly<Record<'modern' | 'legacy', readonly Route[]>>;

  constructor(
    @Inject(TASKS_CONFIG) private readonly config: TasksConfig,
    private readonly registry: TaskToolRegistry,
    private readonly methods: TasksMethodsHandler,
    private readonly listen: ListenHandler,
    private readonly toolCalls: TaskToolCallHandler,
    private readonly legacy: LegacyTasksHandler,
    private readonly runner: TaskToolRunner,
  ) {
    this.routes = {
      // 2026-07-28: the revision must be one served here and the standard headers must match the
      // body (checked before any of these routes serves).
      modern: [
        {
          serves: 'tasks/get, tasks/update, tasks/cancel',
          when: (m) => m.isRequest && TASK_METHODS.has(m.method!),
          serve: (m) => this.methods.handle(methodCall(m)),
        },
        {
          serves: 'subscriptions/listen (an SSE stream of task and list changes)',
          when: (m) => m.isRequest && m.method === 'subscriptions/listen',
          serve: (m) => this.listen.open(m.res, m.id, m.params, m.owner()),
        },
        {
          serves:
            'tools/call of a task tool while this instance shuts down: -32000, HTTP 503 with ' +
            'Retry-After (the call is for another instance)',
          when: (m) => m.isRequest && m.tool !== undefined && this.runner.stopping,
          serve: (m) => sendShuttingDown(m.res, m.id, 'modern'),
        },
        {
          serves: 'tools/call of a task tool from a client that declared the tasks extension',
          when: (m) => m.isRequest && m.tool !== undefined && declaresTasks(m.params),
          serve: (m) => this.callTool(m, 'modern'),
        },
        {
          serves: 'tools/call of a task-only tool without the extension: -32021 (HTTP 400)',
          when: (m) => m.isRequest && m.tool?.options.whenClientLacksTasks === 'reject',
          serve: (m) => sendError(m.res, m.id, missingTasksCapability(`tool ${m.tool!.name}`)),
        },
      ],
      // 2025-11-25 (the SDK's legacy era), served without a session.
      legacy: [
        {
          serves: "a client's answer to a task's input request (HTTP 202)",
          when: (m) => isJsonRpcResponse(m.body) && parseInputRequestId(m.body.id) !== undefined,
          serve: (m) =>
            this.legacy.answer(
              m.res,
              m.body as Parameters<LegacyTasksHandler['answer']>[1],
              m.owner(),
            ),
        },
        {
          serves: 'tasks/get, tasks/result, tasks/list, tasks/cancel',
          when: (m) => m.isRequest && LEGACY_TASK_METHODS.has(m.method!),
          serve: (m) => this.legacy.handle(m.req, methodCall(m)),
        },
        {
          serves: 'tools/call of a task tool while this instance shuts down: -32000 (HTTP 200)',
          when: (m) => m.isRequest && m.tool !== undefined && this.runner.stopping,
          serve: (m) => sendShuttingDown(m.res, m.id, 'legacy'),
        },
        {
          serves: 'tools/call of a task tool with params.task',
          when: (m) =>
            m.isRequest &&
            m.tool !== undefined &&
            (m.params as { task?: unknown }).task !== undefined,
          serve: (m) => this.callTool(m, 'legacy'),
        },
        {
          serves: 'tools/call of a task-only tool without params.task: -32601 (HTTP 200)',
          when: (m) => m.isRequest && m.tool?.options.whenClientLacksTasks === 'reject',
          serve: (m) =>
            sendError(m.res, m.id, {
              code: ProtocolErrorCode.MethodNotFound,
              message: mustBeCalledAsTask(m.tool!.name),
            }),
        },
      ],
    };
  }

  /**
   * Whether a body may be task traffic, without classifying it: a tasks method, a listen, a task
   * tool's call, or a JSON-RPC response. Anything else is the handler's behind, and costs the
   * front only this look.
   */
  claims(body: unknown): boolean {
    if (body === null || typeof body !== 'object' || Array.isArray(body)) return false;
    const { method, params } = body as { method?: unknown; params?: unknown };
    if (typeof method !== 'string') return isJsonRpcResponse(body);
    if (TASK_METHODS.has(method) || LEGACY_TASK_METHODS.has(method)) return true;
    if (method === 'subscriptions/listen') return true;
    if (method !== 'tools/call') return false;
    const name = (params as { name?: unknown } | null | undefined)?.name;
    return typeof name === 'string' && this.registry.has(name);
  }

  /**
   * Answers a POST's parsed JSON body when it is task traffic (resolves `true`), or leaves the
   * request untouched for the handler behind (resolves `false`). `request` is the framework's
   * request (the owner is read from it, as the app's `principal` and `tenant` say); `req` and
   * `res` are Node's own, which the answer is written to (a listen is an SSE stream). `onServe`
   * runs once the front has taken the request, before it writes anything: where a caller hands
   * the response over (a Fastify reply is hijacked there).
   */
  async serve(
    request: FrontRequest,
    req: IncomingMessage,
    res: ServerResponse,
    body: unknown,
    onServe?: () => void,
  ): Promise<boolean> {
    if (!this.claims(body)) return false;
    const headers = request.headers;
    const protocolVersion = headerValue(headers['mcp-protocol-version']);
    const methodHeader = headerValue(headers['mcp-method']);
    const nameHeader = headerValue(headers['mcp-name']);
    const outcome = classifyInbound({
      httpMethod: 'POST',
      protocolVersionHeader: protocolVersion,
      mcpMethodHeader: methodHeader,
      mcpNameHeader: nameHeader,
      body,
    });
    if (outcome.kind === 'reject') {
      // The SDK's classifier decided the status, as the handler behind would have.
      onServe?.();
      const { code, message, data } = outcome;
      const error = { code, message, ...(data !== undefined && { data }) };
      sendError(res, idOf(body), error, outcome.httpStatus);
      return true;
    }
    const message = this.messageOf(
      request,
      req,
      res,
      outcome.kind === 'modern' ? outcome.message : body,
    );
    const route = this.routes[outcome.kind].find((candidate) => candidate.when(message));
    if (route === undefined) return false;
    onServe?.();
    if (outcome.kind === 'modern') {
      const refusal =
        unsupportedRevision(outcome.classification.revision) ??
        checkStandardHeaders(
          { protocolVersion, method: methodHeader, name: nameHeader },
          message.method!,
          message.params,
          outcome.classification.revision,
        );
      if (refusal) {
        sendError(res, message.id, refusal);
        return true;
      }
    }
    await route.serve(message);
    return true;
  }

  /** What each route is, per revision, in words: for docs, diagnostics and tests. */
  describeRoutes(): Record<'2026-07-28' | '2025-11-25', string[]> {
    return {
      '2026-07-28': this.routes.modern.map((route) => route.serves),
      '2025-11-25': this.routes.legacy.map((route) => route.serves),
    };
  }

  private messageOf(
    request: FrontRequest,
    req: IncomingMessage,
    res: ServerResponse,
    body: unknown,
  ): Message {
    const { method, params, id } = body as { method?: unknown; params?: unknown; id?: unknown };
    const name = method === 'tools/call' ? (params as { name?: unknown } | null)?.name : undefined;
    let owner: Required<TaskOwner> | undefined;
    return {
      request,
      req,
      res,
      body,
      id: idOf(body),
      method: typeof method === 'string' ? method : undefined,
      params,
      isRequest: typeof method === 'string' && id !== undefined,
      tool: typeof name === 'string' ? this.registry.get(name) : undefined,
      owner: () => (owner ??= ownerOf(request, this.config.principal, this.config.tenant)),
    };
  }

  private callTool(message: Message, era: 'modern' | 'legacy'): Promise<void> {
    return this.toolCalls.handle(
      message.res,
      message.id,
      message.tool!,
      message.params as Record<string, unknown>,
      message.owner(),
      era,
      message.request.headers,
    );
  }
}

/** A tasks-method request, as its handler takes it (the owner read now). */
function methodCall(message: Message): MethodCall {
  const { res, id, method, params } = message;
  return { res, id, method: method!, params, owner: message.owner() };
}

/** The error for a 2026-07-28 request naming a revision not served here, or `undefined`. */
function unsupportedRevision(revision: string | undefined): JsonRpcErrorObject | undefined {
  if (revision !== undefined && MODERN_REVISIONS.includes(revision)) return undefined;
  const { code, message, data } = new UnsupportedProtocolVersionError({
    supported: [...MODERN_REVISIONS],
    requested: revision ?? 'unknown',
  });
  return { code, message, data } as JsonRpcErrorObject;
}
