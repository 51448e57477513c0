import {
  type CanActivate,
  type ExecutionContext,
  ForbiddenException,
  Injectable,
  UnauthorizedException,
} from '@nestjs/common';
import { cpSync, existsSync } from 'node:fs';

/**
 * DEMO ONLY — not authentication. The demo's admin rule for the task console: the principal
 * named `admin`, as `Authorization: Bearer admin` (scripts) or HTTP Basic with the user name
 * `admin` and any password (a browser asks for it: the refusal carries `WWW-Authenticate`).
 * Anyone else gets 403, no one at all 401. A real app puts its own admin check here.
 */
@Injectable()
export class DemoAdminGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const http = context.switchToHttp();
    const request = http.getRequest<{ headers: Record<string, string | string[] | undefined> }>();
    const name = principalOf(request.headers.authorization);
    if (name === 'admin') return true;
    if (name !== undefined) throw new ForbiddenException('The task console is for admin only');
    const response = http.getResponse<{
      setHeader?: (name: string, value: string) => void;
      header?: (name: string, value: string) => void;
    }>();
    const challenge = 'Basic realm="nestjs-mcp-tasks demo console", charset="UTF-8"';
    if (typeof response.header === 'function') response.header('WWW-Authenticate', challenge);
    else response.setHeader?.('WWW-Authenticate', challenge);
    throw new UnauthorizedException('Sign in as admin (any password) to use the task console');
  }
}

function principalOf(header: string | string[] | undefined): string | undefined {
  if (typeof header !== 'string') return undefined;
  const bearer = /^Bearer\s+(\S+)$/i.exec(header);
  if (bearer) return bearer[1];
  const basic = /^Basic\s+(\S+)$/i.exec(header);
  if (!basic) return undefined;
  const decoded = Buffer.from(basic[1]!, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  return colon === -1 ? undefined : decoded.slice(0, colon);
}

/**
 * The demo runs compiled into .demo-build/ (`npm start`, the benchmarks), where tsc leaves out
 * the console's page files: copy them beside the compiled console at each start (so an edit of
 * src/console/assets shows), as `npm run build` does for dist/. From the sources (ts-jest) they
 * are already there and nothing is copied.
 */
export function prepareConsoleAssets(): void {
  if (!new URL('.', import.meta.url).pathname.includes('/.demo-build/')) return;
  const source = new URL('../../src/console/assets/', import.meta.url);
  if (!existsSync(source)) return;
  cpSync(source, new URL('../src/console/assets/', import.meta.url), {
    recursive: true,
    force: true,
  });
}
