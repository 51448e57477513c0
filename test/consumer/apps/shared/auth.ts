import {
  type CanActivate,
  type ExecutionContext,
  Injectable,
  Module,
  UnauthorizedException,
} from '@nestjs/common';

/** The app's users: what the guard needs to be built. */
@Injectable()
export class UsersService {
  private readonly byToken = new Map([
    ['alice-token', 'alice'],
    ['bob-token', 'bob'],
  ]);

  userFor(token: string): { sub: string } | undefined {
    const sub = this.byToken.get(token);
    return sub === undefined ? undefined : { sub };
  }
}

/** `Authorization: Bearer <token>` of a known user, or 401. Sets `request.user`. */
@Injectable()
export class BearerGuard implements CanActivate {
  constructor(private readonly users: UsersService) {}

  canActivate(context: ExecutionContext): boolean {
    const request = context.switchToHttp().getRequest<{
      headers: Record<string, string | string[] | undefined>;
      user?: { sub: string };
    }>();
    const header = request.headers.authorization;
    const token = typeof header === 'string' ? /^Bearer (\S+)$/.exec(header)?.[1] : undefined;
    const user = token === undefined ? undefined : this.users.userFor(token);
    if (user === undefined) throw new UnauthorizedException();
    request.user = user;
    return true;
  }
}

@Module({ providers: [UsersService, BearerGuard], exports: [UsersService, BearerGuard] })
export class AuthModule {}
