import {
  type CanActivate,
  type ExecutionContext,
  HttpException,
  Inject,
  Injectable,
} from '@nestjs/common';
import {
  localhostAllowedHostnames,
  ProtocolErrorCode,
  localhostAllowedOrigins,
  validateHostHeader,
  validateOriginHeader,
} from '@modelcontextprotocol/server';
import type { IncomingMessage } from 'node:http';
import { httpStatusOf, SERVER_ERROR } from '../errors.js';
import { TASKS_CONFIG } from '../tasks.constants.js';
import type { TasksConfig } from '../interfaces/tasks-module-options.interface.js';
import { BodyParsingInstaller } from './body-parsing.installer.js';
import { requestTarget } from './request-target.js';

const LOOPBACK = /^(127\.|::1$|::ffff:127\.)/;

/**
 * The request-target and DNS rebinding checks in front of the endpoint, before the app's guards:
 *
 * - the target's path must be the endpoint's path exactly as configured (global prefix included):
 *   case and trailing-slash variants, percent-encoded spellings, `*` and other forms the router
 *   may still send here are answered 404 with a JSON-RPC error, so every request the endpoint
 *   serves went through its own body parsing and limits;
 * - the host the request names must be allowed, with the SDK's validators: the authority of an
 *   absolute-form target (`POST http://host/mcp`), which replaces the Host header (RFC 9112
 *   §3.2.2), else the Host header; and a browser's Origin. Without configured lists the localhost
 *   lists apply to connections that arrive on a loopback address, where a browser page could
 *   otherwise reach a local server under a foreign name. Answers 403 with a JSON-RPC error; a host
 *   that is not a valid authority at all answers 400.
 */
@Injectable()
export class McpHostGuard implements CanActivate {
  /**
   * The verdicts of the host and origin checks for the (connection kind, host, origin) seen last:
   * the checks are a pure function of the three and the config, a client names the same host on
   * every request, and they parse URLs. Bounded: full, it starts over.
   */
  private readonly verdicts = new Map<string, HostRefusal | null>();

  constructor(
    @Inject(TASKS_CONFIG) private readonly config: TasksConfig,
    private readonly bodyParsing: BodyParsingInstaller,
  ) {}

  canActivate(context: ExecutionContext): boolean {
    const request = context
      .switchToHttp()
      .getRequest<{ raw?: IncomingMessage } & IncomingMessage>();
    const raw = request.raw ?? request;
    const target = requestTarget(raw.url ?? '');
    if (target === undefined || !this.bodyParsing.isEndpointPath(target.pathname)) {
      throw new HttpException(
        { jsonrpc: '2.0', id: null, error: { code: SERVER_ERROR, message: 'Not Found' } },
        404,
      );
    }
    const refused = this.refusal(raw, target.authority ?? raw.headers.host);
    if (refused === undefined) return true;
    if (refused.status === 400) {
      const error = { code: ProtocolErrorCode.InvalidRequest, message: refused.message };
      throw new HttpException({ jsonrpc: '2.0', id: null, error }, httpStatusOf(error));
    }
    throw forbidden(refused.message);
  }

  private refusal(raw: IncomingMessage, host: string | undefined): HostRefusal | undefined {
    const loopback = isLoopback(raw);
    const origin = raw.headers.origin;
    // A host holds no NUL (neither a header value nor a URL's host may): the parts cannot run
    // into each other, and an absent one is told from an empty one.
    const part = (value: string | undefined): string => (value === undefined ? '-' : `+${value}`);
    const key = `${loopback ? 'l' : 'r'}${part(host)}\0${part(origin)}`;
    let verdict = this.verdicts.get(key);
    if (verdict === undefined) {
      verdict = refusalOf(loopback, host, origin, this.config, false) ?? null;
      if (this.verdicts.size >= MAX_VERDICTS) this.verdicts.clear();
      this.verdicts.set(key, verdict);
    }
    return verdict ?? undefined;
  }
}

/** How many (connection kind, host, origin) verdicts McpHostGuard keeps. */
const MAX_VERDICTS = 256;

/** Why a request's Host or Origin is refused: 403, or 400 for a host that is no authority. */
export interface HostRefusal {
  status: 400 | 403;
  message: string;
}

/**
 * The DNS rebinding checks of the endpoint, shared with the task console: `host` (the authority
 * the request names) must be allowed, and so must a browser's Origin unless `sameOrigin` says to
 * accept an Origin naming `host` itself (the console's own page). Without configured lists the
 * localhost lists apply to connections that arrive on a loopback address.
 */
export function hostRefusal(
  raw: IncomingMessage,
  host: string | undefined,
  config: Pick<TasksConfig, 'allowedHosts' | 'allowedOrigins'>,
  sameOrigin = false,
): HostRefusal | undefined {
  return refusalOf(isLoopback(raw), host, raw.headers.origin, config, sameOrigin);
}

/** Whether the connection arrived on a loopback address. */
function isLoopback(raw: IncomingMessage): boolean {
  return LOOPBACK.test(raw.socket?.localAddress ?? '');
}

/** hostRefusal on what it reads of the request: the connection kind, the host, the Origin. */
function refusalOf(
  loopback: boolean,
  host: string | undefined,
  origin: string | undefined,
  config: Pick<TasksConfig, 'allowedHosts' | 'allowedOrigins'>,
  sameOrigin: boolean,
): HostRefusal | undefined {
  const hosts = allowList(config.allowedHosts, loopback, localhostAllowedHostnames);
  if (hosts) {
    const result = validateHostHeader(host, hosts);
    if (!result.ok) return { status: 403, message: result.message };
  }
  if (host !== undefined && !URL.canParse(`http://${host}/`)) {
    return { status: 400, message: 'Bad Request: invalid Host header' };
  }
  if (sameOrigin && origin !== undefined && host !== undefined && originHost(origin) === host) {
    return undefined;
  }
  const origins = allowList(config.allowedOrigins, loopback, localhostAllowedOrigins);
  if (origins) {
    const result = validateOriginHeader(origin, origins);
    if (!result.ok) return { status: 403, message: result.message };
  }
  return undefined;
}

function allowList(
  configured: readonly string[] | false | undefined,
  loopback: boolean,
  localhost: () => string[],
): string[] | undefined {
  if (configured === false) return undefined;
  if (configured !== undefined) return [...configured];
  return loopback ? localhost() : undefined;
}

/** The `host[:port]` of an Origin header, or `undefined` when it is not an http(s) origin. */
export function originHost(origin: string): string | undefined {
  if (!URL.canParse(origin)) return undefined;
  const url = new URL(origin);
  return url.protocol === 'http:' || url.protocol === 'https:' ? url.host : undefined;
}

function forbidden(message: string): HttpException {
  return new HttpException(
    { jsonrpc: '2.0', id: null, error: { code: SERVER_ERROR, message } },
    403,
  );
}
