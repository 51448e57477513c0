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

/** A list of the app's guards as its option gives them: classes and instances. */
export type AppGuards = readonly (Type<CanActivate> | CanActivate)[];

/** Injection token of the `guards` extra as given (classes and instances). */
export const MCP_GUARDS = Symbol('nestjs-mcp-tasks:guards');

/**
 * Runs a list of the app's guards, in order, with the request's own ExecutionContext (so Reflector
 * metadata and `request.user` behave as in any guard). The classes are resolved at init where the
 * app's providers are visible: the app's own instance when it provides the class anywhere, else
 * one built in this module's context (global modules and the forRootAsync `imports` in reach). A
 * class that cannot be built fails the boot, naming it. McpAppGuard (the endpoint's `guards`) and
 * the task console's guard are two such lists.
 */
export abstract class AppGuardChain implements CanActivate, OnModuleInit {
  private guards: CanActivate[] = [];

  constructor(
    /** The option that names them, for boot errors: `guards`, `console.guards`. */
    private readonly key: string,
    private readonly given: AppGuards,
    private readonly moduleRef: ModuleRef,
  ) {}

  async onModuleInit(): Promise<void> {
    const guards: CanActivate[] = [];
    for (const guard of this.given) guards.push(await this.resolve(guard));
    this.guards = guards;
  }

  /** Synchronous while the guards are (no guards: `true` at once; the endpoint is a hot path). */
  canActivate(context: ExecutionContext): boolean | Promise<boolean> {
    return this.runFrom(0, context);
  }

  private runFrom(first: number, context: ExecutionContext): boolean | Promise<boolean> {
    for (let index = first; index < this.guards.length; index++) {
      const result = this.guards[index]!.canActivate(context);
      if (typeof result === 'boolean') {
        if (!result) return false;
        continue;
      }
      const pending = isObservable(result) ? lastValueFrom(result) : Promise.resolve(result);
      return pending.then((allowed) => Boolean(allowed) && this.runFrom(index + 1, context));
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
      const built = await this.moduleRef.create(guard);
      // Nest runs lifecycle hooks only for the providers it registered, and a guard may need its
      // own (the ThrottlerGuard of @nestjs/throttler reads its throttlers in onModuleInit).
      await (built as Partial<OnModuleInit>).onModuleInit?.();
      return built;
    } catch (error) {
      throw new TasksConfigError(
        guardNotBuilt(
          guard.name || 'a guard',
          firstLine((error as Error)?.message ?? error),
          this.key,
        ),
      );
    }
  }
}

/** Runs the app's `guards` in front of the endpoint (see AppGuardChain). */
@Injectable()
export class McpAppGuard extends AppGuardChain {
  constructor(@Inject(MCP_GUARDS) given: AppGuards, moduleRef: ModuleRef) {
    super('guards', given, moduleRef);
  }
}

const firstLine = (message: unknown): string => String(message).split('\n')[0]!.trim();
