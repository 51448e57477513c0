import {
  type CanActivate,
  type ExecutionContext,
  ForbiddenException,
  Injectable,
  Module,
  type Provider,
  type Type,
  UnauthorizedException,
} from '@nestjs/common';
import { APP_GUARD } from '@nestjs/core';
import { randomBytes } from 'node:crypto';
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { TasksModule } from '../../src/index.js';
import type {
  TasksModuleExtras,
  TasksModuleOptions,
} from '../../src/interfaces/tasks-module-options.interface.js';

/**
 * The console tests' app: `Authorization: Bearer <name>` makes `<name>` the user (an app-wide
 * guard that authenticates and never refuses), and the console lets in the user named `admin`
 * only (ForbiddenException for anyone else, as an app's own admin rule would).
 */
@Injectable()
export class BearerAuthGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const request = context.switchToHttp().getRequest<{
      headers: Record<string, string | string[] | undefined>;
      user?: { sub: string };
    }>();
    const header = request.headers.authorization;
    const match = typeof header === 'string' ? /^Bearer\s+(\S+)$/i.exec(header) : null;
    if (match) request.user = { sub: match[1]! };
    return true;
  }
}

@Injectable()
export class AdminGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const request = context.switchToHttp().getRequest<{ user?: { sub: string } }>();
    if (request.user?.sub !== 'admin') throw new ForbiddenException('Admins only');
    return true;
  }
}

export const ADMIN = { authorization: 'Bearer admin' };
export const ALICE = { authorization: 'Bearer alice' };

/** An app with the console on at `mcp-tasks`, plus whatever `extras` and `providers` add. */
export function consoleApp(
  options: TasksModuleOptions = {},
  extras: Partial<TasksModuleExtras> = {},
  providers: Provider[] = [],
): Type<unknown> {
  @Module({
    imports: [
      TasksModule.forRoot({
        ...options,
        console: { guards: [AdminGuard] },
        ...extras,
      }),
    ],
    providers: [{ provide: APP_GUARD, useClass: BearerAuthGuard }, ...providers],
  })
  class ConsoleTestModule {}
  return ConsoleTestModule;
}

/** The bearer-only app's tokens: random, so a test can look for them where they must not be. */
export const TOKENS = {
  admin: `adm_${randomBytes(18).toString('base64url')}`,
  alice: `ali_${randomBytes(18).toString('base64url')}`,
};

/**
 * An app-wide guard that reads only `Authorization: Bearer <token>` and refuses everything else
 * with 401 (no token, an unknown token), as a JWT guard would: no Basic, no cookie, no challenge.
 */
@Injectable()
export class BearerOnlyGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const request = context.switchToHttp().getRequest<{
      headers: Record<string, string | string[] | undefined>;
      user?: { sub: string };
    }>();
    const header = request.headers.authorization;
    const match = typeof header === 'string' ? /^Bearer ([\x21-\x7e]+)$/.exec(header) : null;
    if (!match) throw new UnauthorizedException('Send Authorization: Bearer <token>');
    const sub = Object.entries(TOKENS).find(([, token]) => token === match[1])?.[0];
    if (sub === undefined) throw new UnauthorizedException('Unknown bearer token');
    request.user = { sub };
    return true;
  }
}

/** The console at `mcp-tasks` for `admin`, in an app whose every route needs a bearer token. */
export function bearerOnlyConsoleApp(providers: Provider[] = []): Type<unknown> {
  @Module({
    imports: [TasksModule.forRoot({ console: { guards: [AdminGuard] } })],
    providers: [{ provide: APP_GUARD, useClass: BearerOnlyGuard }, ...providers],
  })
  class BearerOnlyConsoleModule {}
  return BearerOnlyConsoleModule;
}

export interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  text: string;
  json: () => Record<string, unknown>;
}

/** One HTTP request with exactly the headers given (Host included, when given). */
export function call(
  base: string,
  method: string,
  path: string,
  headers: Record<string, string> = {},
  body?: string,
): Promise<Answer> {
  const url = new URL(path, base);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      url,
      {
        method,
        headers: {
          ...(body !== undefined && { 'content-length': String(Buffer.byteLength(body)) }),
          ...headers,
        },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            text,
            json: () => JSON.parse(text) as Record<string, unknown>,
          }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** An open console stream: its text so far, and how to wait for something in it. */
export interface OpenStream {
  status: number;
  headers: IncomingHttpHeaders;
  text(): string;
  ended: Promise<void>;
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<string>;
  close(): void;
}

export function openStream(
  base: string,
  path: string,
  headers: Record<string, string>,
): Promise<OpenStream> {
  const url = new URL(path, base);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      url,
      { method: 'GET', headers: { accept: 'text/event-stream', ...headers } },
      (res) => {
        let text = '';
        const waiters = new Set<() => void>();
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          text += chunk;
          for (const wake of [...waiters]) wake();
        });
        const ended = new Promise<void>((done) => {
          res.on('end', done);
          res.on('close', done);
          res.on('error', () => done());
        });
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers,
          text: () => text,
          ended,
          close: () => req.destroy(),
          waitFor: (pattern, timeoutMs = 5_000) =>
            new Promise((found, fail) => {
              const check = (): boolean => {
                const match = pattern.exec(text);
                if (!match) return false;
                waiters.delete(wake);
                clearTimeout(timer);
                found(match[0]);
                return true;
              };
              const wake = (): void => void check();
              const timer = setTimeout(() => {
                waiters.delete(wake);
                fail(new Error(`No ${pattern} in the stream within ${timeoutMs} ms: ${text}`));
              }, timeoutMs);
              waiters.add(wake);
              check();
            }),
        });
      },
    );
    req.on('error', reject);
    req.end();
  });
}
