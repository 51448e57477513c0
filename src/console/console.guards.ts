import {
  type CanActivate,
  type ExecutionContext,
  HttpException,
  Inject,
  Injectable,
} from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import type { IncomingMessage } from 'node:http';
import { STATUS_CODES } from 'node:http';
import type { TasksConfig } from '../interfaces/tasks-module-options.interface.js';
import { AppGuardChain, type AppGuards } from '../mcp/mcp-app.guard.js';
import { hostRefusal, originHost } from '../mcp/mcp-host.guard.js';
import { requestTarget } from '../mcp/request-target.js';
import { TASKS_CONFIG } from '../tasks.constants.js';
import { CONSOLE_GUARDS } from './console.config.js';

/** The header a script may send instead of a JSON body to cancel (no cross-site form can). */
export const CONSOLE_HEADER = 'x-tasks-console';

/** Runs `console.guards` (the app's admin rule) on every route of the console. */
@Injectable()
export class ConsoleAppGuard extends AppGuardChain {
  constructor(@Inject(CONSOLE_GUARDS) given: AppGuards, moduleRef: ModuleRef) {
    super('console.guards', given, moduleRef);
  }
}

/**
 * The console's request checks, before the app's guards:
 *
 * - the Host (and a browser's Origin) as for the MCP endpoint (`allowedHosts`, `allowedOrigins`,
 *   localhost on loopback connections), and an Origin must be the console's own unless
 *   `allowedOrigins` names it: a page of another site gets 403 even where the endpoint would
 *   answer it;
 * - a POST must come from a script of the console's own origin: `Sec-Fetch-Site: cross-site` is
 *   403, and the request must have `Content-Type: application/json` or an `X-Tasks-Console`
 *   header (415 otherwise), which an HTML form cannot send.
 */
@Injectable()
export class ConsoleHostGuard implements CanActivate {
  constructor(@Inject(TASKS_CONFIG) private readonly config: TasksConfig) {}

  canActivate(context: ExecutionContext): boolean {
    const request = context
      .switchToHttp()
      .getRequest<{ raw?: IncomingMessage } & IncomingMessage>();
    const raw = request.raw ?? request;
    const foreign = foreignRefusal(raw, this.config);
    if (foreign !== undefined) throw foreign;
    if (raw.method === 'POST') {
      if (raw.headers['sec-fetch-site'] === 'cross-site') {
        throw refusal(403, 'Forbidden: a cross-site request');
      }
      const type = String(raw.headers['content-type'] ?? '')
        .split(';')[0]!
        .trim()
        .toLowerCase();
      if (type !== 'application/json' && raw.headers[CONSOLE_HEADER] === undefined) {
        throw refusal(
          415,
          'Send Content-Type: application/json (body {}) or an X-Tasks-Console header',
        );
      }
    }
    return true;
  }
}

/** The refusal of a request whose Host or Origin the console does not answer, if it is one. */
export function foreignRefusal(
  raw: IncomingMessage,
  config: TasksConfig,
): HttpException | undefined {
  const host = requestTarget(raw.url ?? '')?.authority ?? raw.headers.host;
  const refused = hostRefusal(raw, host, config, true);
  if (refused !== undefined) return refusal(refused.status, refused.message);
  const origin = raw.headers.origin;
  if (origin !== undefined && config.allowedOrigins === undefined && originHost(origin) !== host) {
    return refusal(403, 'Forbidden: the console answers its own pages only (origin not allowed)');
  }
  return undefined;
}

function refusal(status: number, message: string): HttpException {
  return new HttpException(
    { statusCode: status, error: STATUS_CODES[status] ?? 'Error', message },
    status,
  );
}
