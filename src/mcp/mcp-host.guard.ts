import {
  type CanActivate,
  type ExecutionContext,
  HttpException,
  Inject,
  Injectable,
} from '@nestjs/common';
import {
  localhostAllowedHostnames,
  localhostAllowedOrigins,
  validateHostHeader,
  validateOriginHeader,
} from '@modelcontextprotocol/server';
import type { IncomingMessage } from 'node:http';
import { TASKS_CONFIG } from '../tasks.constants.js';
import type { TasksConfig } from '../tasks.options.js';

const LOOPBACK = /^(127\.|::1$|::ffff:127\.)/;

/**
 * DNS rebinding protection in front of the endpoint, with the SDK's validators: the Host header
 * (and a browser's Origin) must name an allowed host. Without configured lists it applies the
 * localhost lists to connections that arrive on a loopback address, where a browser page could
 * otherwise reach a local server under a foreign name. Answers 403 with a JSON-RPC error.
 */
@Injectable()
export class McpHostGuard implements CanActivate {
  constructor(@Inject(TASKS_CONFIG) private readonly config: TasksConfig) {}

  canActivate(context: ExecutionContext): boolean {
    const request = context
      .switchToHttp()
      .getRequest<{ raw?: IncomingMessage } & IncomingMessage>();
    const raw = request.raw ?? request;
    const loopback = LOOPBACK.test(raw.socket?.localAddress ?? '');
    const hosts = this.list(this.config.allowedHosts, loopback, localhostAllowedHostnames);
    if (hosts) {
      const result = validateHostHeader(raw.headers.host, hosts);
      if (!result.ok) throw forbidden(result.message);
    }
    const origins = this.list(this.config.allowedOrigins, loopback, localhostAllowedOrigins);
    if (origins) {
      const result = validateOriginHeader(raw.headers.origin, origins);
      if (!result.ok) throw forbidden(result.message);
    }
    return true;
  }

  private list(
    configured: readonly string[] | false | undefined,
    loopback: boolean,
    localhost: () => string[],
  ): string[] | undefined {
    if (configured === false) return undefined;
    if (configured !== undefined) return [...configured];
    return loopback ? localhost() : undefined;
  }
}

function forbidden(message: string): HttpException {
  return new HttpException({ jsonrpc: '2.0', id: null, error: { code: -32000, message } }, 403);
}
