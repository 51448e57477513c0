import {
  type CanActivate,
  type ExecutionContext,
  Inject,
  Injectable,
  type OnModuleInit,
  type Type,
} from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { isObservable, lastValueFrom } from 'rxjs';
import { TasksConfigError } from '../errors.js';
import { guardNotBuilt } from '../tasks.messages.js';

/** Injection token of the `guards` extra as given (classes and instances). */
export const MCP_GUARDS = Symbol('nestjs-mcp-tasks:guards');

/**
 * Runs the app's `guards` in front of the endpoint, in order, with the request's own
 * ExecutionContext (so Reflector metadata and `request.user` behave as in any guard). The classes
 * are resolved at init where the app's providers are visible: the app's own instance when it
 * provides the class anywhere, else one built in this module's context (global modules and the
 * forRootAsync `imports` in reach). A class that cannot be built fails the boot, naming it.
 */
@Injectable()
export class McpAppGuard implements CanActivate, OnModuleInit {
  private guards: CanActivate[] = [];

  constructor(
    @Inject(MCP_GUARDS) private readonly given: readonly (Type<CanActivate> | CanActivate)[],
    private readonly moduleRef: ModuleRef,
  ) {}

  async onModuleInit(): Promise<void> {
    const guards: CanActivate[] = [];
    for (const guard of this.given) guards.push(await this.resolve(guard));
    this.guards = guards;
  }

  async canActivate(context: ExecutionContext): Promise<boolean> {
    for (const guard of this.guards) {
      const result = guard.canActivate(context);
      const allowed = isObservable(result) ? await lastValueFrom(result) : await result;
      if (!allowed) return false;
    }
    return true;
  }

  private async resolve(guard: Type<CanActivate> | CanActivate): Promise<CanActivate> {
    if (typeof guard !== 'function') return guard;
    try {
      return this.moduleRef.get(guard, { strict: false });
    } catch {
      // Not a provider of the app: build it here.
    }
    try {
      return await this.moduleRef.create(guard);
    } catch (error) {
      throw new TasksConfigError(
        guardNotBuilt(guard.name || 'a guard', firstLine((error as Error)?.message ?? error)),
      );
    }
  }
}

const firstLine = (message: unknown): string => String(message).split('\n')[0]!.trim();
