import { type CanActivate, type ExecutionContext, Injectable } from '@nestjs/common';

/**
 * `Authorization: Bearer <name>` makes `<name>` the principal (`request.user.sub`): a stand-in for
 * the app's auth in the fixture apps the tests run as processes of their own. It checks nothing.
 */
@Injectable()
export class BearerGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const request = context.switchToHttp().getRequest<{
      headers: Record<string, string | undefined>;
      user?: { sub: string };
    }>();
    const match = /^Bearer\s+(\S+)$/i.exec(request.headers.authorization ?? '');
    if (match) request.user = { sub: match[1]! };
    return true;
  }
}

/**
 * The same rule as a `principal` resolver, for apps run in the test's own process: `Authorization:
 * Bearer <name>` makes `<name>` the principal; none is anonymous.
 */
export const bearerPrincipal = (request: unknown): string | undefined => {
  const header = (request as { headers: Record<string, string | undefined> }).headers.authorization;
  return header === undefined ? undefined : /^Bearer\s+(\S+)$/i.exec(header)?.[1];
};
