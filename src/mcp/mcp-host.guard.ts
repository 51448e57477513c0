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
    const refused = hostRefusal(raw, target.authority ?? raw.headers.host, this.config);
    if (refused === undefined) return true;
    if (refused.status === 400) {
      const error = { code: ProtocolErrorCode.InvalidRequest, message: refused.message };
      throw new HttpException({ jsonrpc: '2.0', id: null, error }, httpStatusOf(error));
    }
    throw forbidden(refused.message);
  }
}

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
  const loopback = LOOPBACK.test(raw.socket?.localAddress ?? '');
  const hosts = allowList(config.allowedHosts, loopback, localhostAllowedHostnames);
  if (hosts) {
    const result = validateHostHeader(host, hosts);
    if (!result.ok) return { status: 403, message: result.message };
  }
  if (host !== undefined && !URL.canParse(`http://${host}/`)) {
    return { status: 400, message: 'Bad Request: invalid Host header' };
  }
  const origin = raw.headers.origin;
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
