import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  localhostAllowedHostnames,
  localhostAllowedOrigins,
  ProtocolErrorCode,
  validateHostHeader,
  validateOriginHeader,
} from '@modelcontextprotocol/server';
import {
  describeRequirement,
  MCP_RESOURCE_METADATA_URL,
  type McpHttpHandler,
  type McpTransportContext,
  StreamableHttpTransport,
  type StreamableHttpTransportOptions,
} from '@rekog/mcp-nest';
import { SERVER_ERROR } from '../errors.js';
import {
  type BodyRefusal,
  bodyRefusal,
  JSON_TYPE,
  type RefusedBody,
  sendBodyRefusal,
} from '../mcp/body-refusals.js';
import { sendError, sendFault } from '../mcp/json-rpc.js';
import { type FrameworkReply, type FrameworkRequest, handOver } from '../mcp/mcp-endpoint.js';
import { headerValue } from '../mcp/standard-headers.js';
import { isPlainObject } from '../task.js';
import { readBody } from './read-body.js';
import type { McpTasksFront } from '../mcp/tasks-front.js';

/** A framework request as rekog hands it over, with what the app's guards put on it. */
type HandlerRequest = FrameworkRequest & { user?: unknown };
export type Verb = (req: unknown, res: unknown) => unknown;

/** What a transport needs of the app's tasks (RekogTasks, which `attachTasks` connects). */
export interface TransportTasks {
  readonly front: McpTasksFront;
  readonly maxBodyBytes: number;
  /** Resolves once the task tools are registered into the strategy. */
  ready(): Promise<void>;
  /** The context rekog's transport starts on; `front` wraps a self-mounted route's handler. */
  contextFor(ctx: McpTransportContext, front: (handler: Verb) => Verb): McpTransportContext;
  listChanged(from: TaskHttpTransport, kind: 'tools' | 'resources' | 'prompts'): void;
  /** The JSON-RPC error a caller gets for a task tool it may not call, or `undefined`. */
  accessDenial(name: string, user: unknown): { code: number; message: string } | undefined;
  logFault(error: unknown): void;
}

/** The bridge each transport serves task traffic through, set by `attachTasks`. */
const bridges = new WeakMap<TaskHttpTransport, TransportTasks>();

/**
 * What `transportBehind` hands a handler as its request and response: a TaskHttpTransport's POST
 * handler knows it and says which transport it is; anything else fails on its first look at it
 * (every read throws), before it does anything.
 */
const PROBE: object = new Proxy(
  {},
  {
    get: () => {
      throw new Error('nestjs-mcp-tasks: a route probe is not a request');
    },
    has: () => {
      throw new Error('nestjs-mcp-tasks: a route probe is not a request');
    },
  },
);
/** The transport that answered the probe last. */
let probed: TaskHttpTransport | undefined;

function answerProbe(transport: TaskHttpTransport): void {
  probed = transport;
}

/**
 * The TaskHttpTransport whose POST handler `post` calls, or `undefined`: `post` is rekog's
 * controller method (`McpHttpControllerFor(transport)`), which hands its request to the
 * transport's handler with nothing in between. Called with a probe no other handler can read, so
 * nothing is served and nothing written.
 */
export function transportBehind(
  post: (req: unknown, res: unknown) => unknown,
): TaskHttpTransport | undefined {
  probed = undefined;
  try {
    const result = post(PROBE, PROBE);
    // Another transport's handler is async: the probe's refusal comes as a rejected promise.
    if (result instanceof Promise) result.catch(() => undefined);
  } catch {
    // Another transport's handler, refusing the probe at once.
  }
  const transport = probed;
  probed = undefined;
  return transport;
}

/** Connects a transport to the app's tasks (`attachTasks`; not part of the public API). */
export function connectTransport(transport: TaskHttpTransport, tasks: TransportTasks): void {
  bridges.set(transport, tasks);
}

/**
 * rekog's StreamableHttpTransport with task traffic served in front of it, on the same route:
 * `tasks/*`, `subscriptions/listen`, `tools/call` of a task tool (as a task), and a 2025-11-25
 * client's answer to a task's input request go to the package's McpTasksFront; everything else,
 * and a task tool called inline, goes to rekog as before. Construct it as rekog's transport (the
 * same options) and call `attachTasks(app, strategy)` before the strategy starts.
 *
 * The route is whichever rekog serves: a controller extending `McpHttpControllerFor(transport)`
 * (its guards, interceptors and filters run for every request, task traffic included) or the
 * transport's self-mounted route. Its POST bodies are read by the package's own reader, ahead of
 * the app's body parser, with the TasksModule's `maxBodyBytes` and nesting limit (`attachTasks`
 * arranges it), and a body the package's endpoint would refuse (bodyRefusal) is refused here in
 * the same words, rekog's traffic included. What rekog checks inside its own POST handler is
 * checked here too, with the options given: the Origin and Host allowlists (`security`), and for
 * a task tool's call the tool's `@ToolScopes`/`@ToolRoles` (a 403 step-up challenge with
 * `stepUpAuthorization`).
 */
export class TaskHttpTransport extends StreamableHttpTransport {
  /** `undefined`: the header is not checked (rekog's default). */
  readonly #allowedOrigins: string[] | undefined;
  readonly #allowedHosts: string[] | undefined;
  /** Whether a scope shortfall is answered 403 with a challenge, and where its metadata is. */
  readonly #stepUp: { resourceMetadataUrl?: string } | undefined;
  #context: McpTransportContext | undefined;

  constructor(options: StreamableHttpTransportOptions = {}) {
    super(options);
    const security = options.security;
    this.#allowedOrigins = allowList(security?.allowedOrigins, localhostAllowedOrigins);
    this.#allowedHosts = allowList(security?.allowedHosts, localhostAllowedHostnames);
    const stepUp = options.stepUpAuthorization;
    this.#stepUp = stepUp === true ? {} : stepUp || undefined;
  }

  /** rekog's verb handlers, the POST one fronted (see the class). Claims the route, as rekog's. */
  override get httpHandlers(): McpHttpHandler {
    const inner = super.httpHandlers;
    return {
      handlePost: (req, res) => this.post(req, res, inner.handlePost) as Promise<void> | void,
      handleGet: inner.handleGet,
      handleDelete: inner.handleDelete,
    };
  }

  /**
   * Starts rekog's transport on a context whose servers also advertise the tasks capability of
   * both eras and show `execution.taskSupport` on their task tools, and whose self-mounted POST
   * route is fronted. The app's task tools are registered into the strategy first.
   */
  override async start(ctx: McpTransportContext): Promise<void> {
    const tasks = bridges.get(this);
    if (tasks === undefined) {
      throw new Error(
        'TaskHttpTransport: call attachTasks(app, strategy) (nestjs-mcp-tasks/rekog) before the ' +
          'strategy starts (app.startAllMicroservices())',
      );
    }
    await tasks.ready();
    this.#context = ctx;
    await super.start(
      tasks.contextFor(ctx, (handler) => (req, res) => this.post(req, res, handler)),
    );
  }

  /** rekog's announcement of a changed list, passed on to the package's listen streams too. */
  override notifyListChanged(kind: 'tools' | 'resources' | 'prompts'): void {
    super.notifyListChanged(kind);
    bridges.get(this)?.listChanged(this, kind);
  }

  /**
   * rekog's POST with the front before it. A body the package's reader read, and did not refuse
   * (see `refusal`), that the front does not claim goes to rekog at once, as it would without
   * tasks (rekog checks its own headers): rekog's traffic pays one look at the body and no await.
   */
  private post(request: unknown, reply: unknown, next: Verb): unknown {
    if (request === PROBE) return void answerProbe(this);
    const tasks = bridges.get(this);
    const framework = request as HandlerRequest;
    // A JSON `null` is a body read; only `undefined` is none.
    const parsed =
      framework.body !== undefined
        ? framework.body
        : (framework.raw as { body?: unknown } | undefined)?.body;
    if (
      tasks === undefined ||
      (parsed !== undefined &&
        refusal(framework, parsed, tasks) === undefined &&
        !tasks.front.claims(parsed))
    ) {
      return next(request, reply);
    }
    return this.serveTasks(tasks, framework, reply as FrameworkReply, next, parsed);
  }

  /**
   * Task traffic, a body the package refuses, or a body still to be read (a route the package's
   * parsers did not reach).
   */
  private async serveTasks(
    tasks: TransportTasks,
    request: HandlerRequest,
    reply: FrameworkReply,
    next: Verb,
    parsed: unknown,
  ): Promise<void> {
    const req = request.raw ?? (request as unknown as IncomingMessage);
    const res = reply.raw ?? (reply as unknown as ServerResponse);
    try {
      // The Host and Origin first, as the package's endpoint checks them before the body.
      if (this.refusesHeaders(req, res)) return;
      let body = parsed;
      if (body === undefined && JSON_TYPE.test(req.headers['content-type'] ?? '')) {
        // Read once here, with the package's reader; rekog reads it from `body` after (it
        // prefers a parsed body to the stream).
        body = await readBody(req, tasks.maxBodyBytes);
        if (body === undefined) return void res.destroy();
        (req as { body?: unknown }).body = body;
      }
      const refused = refusal(request, body, tasks);
      if (refused !== undefined) {
        handOver(reply, res);
        return sendBodyRefusal(res, refused);
      }
      if (!tasks.front.claims(body)) return void (await next(request, reply));
      if (this.refusesToolCall(tasks, request, req, res, body)) return;
      const onServe = (): void => handOver(reply, res);
      if (await tasks.front.serve(request, req, res, body, onServe)) return;
      await next(request, reply);
    } catch (error) {
      tasks.logFault(error);
      if (!res.headersSent) sendFault(res);
      else res.end();
    }
  }

  /**
   * The Origin and Host allowlists, as rekog checks them for its own traffic: 403 with a
   * JSON-RPC error and no id. An absent Origin passes (no browser sent it); an absent Host does
   * not, once Host is checked.
   */
  private refusesHeaders(req: IncomingMessage, res: ServerResponse): boolean {
    type Validate = (
      value: string | undefined,
      allowed: string[],
    ) => { ok: boolean; message?: string };
    const checks: [string | undefined, string[] | undefined, Validate][] = [
      [headerValue(req.headers.origin), this.#allowedOrigins, validateOriginHeader],
      [headerValue(req.headers.host), this.#allowedHosts, validateHostHeader],
    ];
    for (const [value, allowed, validate] of checks) {
      if (allowed === undefined) continue;
      const result = validate(value, allowed);
      if (!result.ok) {
        sendError(res, null, { code: SERVER_ERROR, message: result.message ?? 'Forbidden' }, 403);
        return true;
      }
    }
    return false;
  }

  /**
   * For a task tool's call: the tool's scope and role requirements (rekog's `@ToolScopes`,
   * `@ToolRoles`, `@PublicTool` on the `@TaskTool` method), checked as rekog checks its own tools.
   * With `stepUpAuthorization`, a scope shortfall is a 403 whose `WWW-Authenticate` challenge
   * names the scopes (RFC 6750 §3), so a client can come back with them; otherwise, and for a
   * missing role, a JSON-RPC error.
   */
  private refusesToolCall(
    tasks: TransportTasks,
    request: HandlerRequest,
    req: IncomingMessage,
    res: ServerResponse,
    body: unknown,
  ): boolean {
    if (!isPlainObject(body) || body.method !== 'tools/call') return false;
    const name = (body.params as { name?: unknown } | undefined)?.name;
    if (typeof name !== 'string') return false;
    const id = typeof body.id === 'string' || typeof body.id === 'number' ? body.id : null;
    if (this.#stepUp !== undefined && this.#context !== undefined) {
      const deficiency = this.#context.toolCallScopeDeficiency(name, request);
      if (deficiency !== undefined) {
        const message = describeRequirement(
          name,
          'scopes',
          deficiency.requiredScopes,
          deficiency.match,
        );
        const metadataUrl =
          this.#stepUp.resourceMetadataUrl ??
          (req as unknown as Record<symbol, unknown>)[MCP_RESOURCE_METADATA_URL];
        res.setHeader(
          'www-authenticate',
          challenge(deficiency.requiredScopes, message, metadataUrl),
        );
        sendError(res, id, { code: ProtocolErrorCode.InvalidRequest, message }, 403);
        return true;
      }
    }
    const denial = tasks.accessDenial(name, request.user);
    if (denial === undefined) return false;
    // In band, as rekog answers the same denial of its own tools (HTTP 200, both eras).
    sendError(res, id, denial, 200);
    return true;
  }
}

/**
 * What the package's endpoint would answer this request's body instead of serving it (a media
 * type other than JSON, a body over `maxBodyBytes`, broken JSON, nesting too deep, an over-long
 * id), or `undefined`: the body was read by the package's reader, with its limits, as the
 * endpoint's are, and the one rule answers both routes.
 */
function refusal(
  request: HandlerRequest,
  body: unknown,
  tasks: TransportTasks,
): BodyRefusal | RefusedBody | undefined {
  return bodyRefusal(
    headerValue(request.headers['content-type']),
    headerValue(request.headers['content-length']),
    body,
    tasks.maxBodyBytes,
  );
}

/** rekog's allowlist option as the SDK's validators take it; `undefined`: not checked. */
function allowList(
  option: string[] | 'localhost' | undefined,
  localhost: () => string[],
): string[] | undefined {
  if (option === undefined) return undefined;
  return option === 'localhost' ? localhost() : [...option];
}

/** A Bearer `insufficient_scope` challenge; quoted-string values escape `"` and `\`. */
function challenge(scopes: string[], description: string, metadataUrl: unknown): string {
  const quoted = (value: string): string => `"${value.replace(/["\\]/g, (c) => `\\${c}`)}"`;
  const parts = [
    `error=${quoted('insufficient_scope')}`,
    `error_description=${quoted(description)}`,
    `scope=${quoted(scopes.join(' '))}`,
  ];
  if (typeof metadataUrl === 'string') parts.push(`resource_metadata=${quoted(metadataUrl)}`);
  return `Bearer ${parts.join(', ')}`;
}
