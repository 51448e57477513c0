import { type CanActivate, type ExecutionContext, Injectable } from '@nestjs/common';

/**
 * DEMO ONLY — not authentication. `Authorization: Bearer <name>` makes `<name>` the principal,
 * with no check at all; no header means anonymous. A real app puts its own guard here (passport,
 * JWT...) that sets `request.user`.
 */
@Injectable()
export class DemoAuthGuard implements CanActivate {
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
