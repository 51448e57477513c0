import { Injectable, Logger } from '@nestjs/common';
import { type ContextId, ContextIdFactory, ModuleRef, ModulesContainer } from '@nestjs/core';
import { TasksConfigError } from '../errors.js';
import type { TaskOwner } from '../task.js';
import type { DiscoveredWrapper } from '../tasks.discovery.js';

/**
 * What `@Inject(REQUEST)` gives a request-scoped provider while a task tool's call runs: the call
 * itself, not the HTTP request that made it (that request is answered with the task long before
 * the method ends, and is not kept). A `ContextIdStrategy` registered with
 * `ContextIdFactory.apply` gets this object as its `request`, so a durable (per-tenant) sub-tree
 * can be chosen from `tenant`, `principal` or a header.
 */
export interface TaskRequest {
  /** The principal the call acts for (the task's owner), or null for an anonymous one. */
  readonly principal: string | null;
  /** The tenant the call acts for, or null. */
  readonly tenant: string | null;
  /** The task the call runs for. */
  readonly taskId: string;
  /** The name of the task tool called. */
  readonly toolName: string;
  /**
   * The headers of the HTTP request that made the call, names in lower case, without the
   * credentials it carried: `authorization`, `cookie` and `proxy-authorization` are dropped.
   * On a queue worker, those the job carried: at most JOB_HEADERS_MAX_BYTES (4,096) bytes of
   * them, the largest left out past it. Empty when the call came another way.
   */
  readonly headers: Readonly<Record<string, string | readonly string[]>>;
}

/** Headers that carry credentials: never handed to a task's providers, which outlive the request. */
const CREDENTIAL_HEADERS = new Set(['authorization', 'cookie', 'proxy-authorization']);

const NO_HEADERS: TaskRequest['headers'] = Object.freeze({});

/** Headers as a call may carry them: Node's own, or the copy a queue job kept (see JobHeaders). */
export type CallHeaders = Readonly<Record<string, string | readonly string[] | undefined>>;

/**
 * The most a queue job carries of its call's headers, in bytes of names and values (UTF-8): a
 * job is stored in Redis until it ends, so what it keeps of the request stays small whatever the
 * request sent (Node takes 16 KiB of headers by default). An MCP call's headers, its credentials
 * dropped, take a few hundred bytes.
 */
export const JOB_HEADERS_MAX_BYTES = 4_096;

/**
 * A frozen copy of `headers`, names in lower case, without credentials; a value that is not a
 * string or a list of strings is left out (a job's data is read back from its queue).
 */
function credentialFree(headers: CallHeaders | undefined): TaskRequest['headers'] {
  if (headers == null || typeof headers !== 'object' || Array.isArray(headers)) return NO_HEADERS;
  const copy: Record<string, string | readonly string[]> = {};
  for (const [name, value] of Object.entries(headers)) {
    const lower = name.toLowerCase();
    if (CREDENTIAL_HEADERS.has(lower)) continue;
    if (typeof value === 'string') copy[lower] = value;
    else if (Array.isArray(value) && value.every((each) => typeof each === 'string')) {
      copy[lower] = Object.freeze([...(value as string[])]);
    }
  }
  return Object.freeze(copy);
}

/**
 * The REQUEST of one call, frozen: its headers are a copy, so nothing in it holds the HTTP
 * request (which the call may outlive by hours), and no provider can change whom it acts for.
 */
export function taskRequestOf(
  owner: TaskOwner,
  taskId: string,
  toolName: string,
  headers?: CallHeaders,
): TaskRequest {
  return Object.freeze({
    principal: owner.principal,
    tenant: owner.tenant ?? null,
    taskId,
    toolName,
    headers: credentialFree(headers),
  });
}

/** How often the headers left out of queue jobs are logged after the first time, at most. */
const DROPPED_HEADERS_LOG_MS = 60_000;

/**
 * What the queue jobs of request-scoped tools carry of their calls' headers, for the REQUEST
 * their workers make: the credential-free copy, bounded by JOB_HEADERS_MAX_BYTES. Past the bound
 * whole headers are left out, the largest first (the small ones, a correlation id, a tenant, a
 * trace, are what providers read), never a value cut. A call that loses some is logged (a WARN
 * naming the headers, never their values): the first, then at most once a minute with the count.
 */
export class JobHeaders {
  private readonly logger = new Logger('TaskToolRunner');
  /** Calls that lost headers since the last line, and when it was written. */
  private unlogged = 0;
  private loggedAt = -Infinity;

  /** What the job of a call of `toolName` carries of `headers`: undefined for nothing. */
  of(toolName: string, headers: CallHeaders | undefined): TaskRequest['headers'] | undefined {
    const sized = Object.entries(credentialFree(headers)).map(([name, value]) => ({
      name,
      value,
      bytes:
        Buffer.byteLength(name) +
        (typeof value === 'string'
          ? Buffer.byteLength(value)
          : value.reduce((sum, each) => sum + Buffer.byteLength(each), 0)),
    }));
    if (sized.length === 0) return undefined;
    sized.sort((a, b) => a.bytes - b.bytes || (a.name < b.name ? -1 : 1));
    const kept: Record<string, string | readonly string[]> = {};
    const dropped: string[] = [];
    let total = 0;
    for (const { name, value, bytes } of sized) {
      if (total + bytes > JOB_HEADERS_MAX_BYTES) {
        dropped.push(name);
        continue;
      }
      total += bytes;
      kept[name] = value;
    }
    if (dropped.length > 0) this.dropped(toolName, dropped);
    return dropped.length === sized.length ? undefined : kept;
  }

  private dropped(toolName: string, names: string[]): void {
    this.unlogged++;
    const now = Date.now();
    if (now - this.loggedAt < DROPPED_HEADERS_LOG_MS) return;
    this.logger.warn(
      `${this.unlogged} call(s) of queue-run task tools on request-scoped providers sent more ` +
        `than ${JOB_HEADERS_MAX_BYTES} bytes of headers: their jobs carry the smaller headers ` +
        `only, and their REQUEST lacks the others (the latest: ${toolName}, without ` +
        `${names.join(', ')}); further ones are counted and logged at most once a minute`,
    );
    this.unlogged = 0;
    this.loggedAt = now;
  }
}

/** How often the failures of one provider's cleanup hook are logged after the first, at most. */
const HOOK_FAILURE_LOG_MS = 60_000;

type Method = (input: unknown, context: unknown) => unknown;

/**
 * Runs the task tools of request-scoped providers (directly, or through a dependency): each call
 * gets a DI sub-tree of its own, made as the call starts and kept until its method's promise
 * settles, then ended. Nest runs no lifecycle hook on request-scoped instances, so the end is
 * done here: every instance Nest made for the call's context that has `onModuleDestroy` gets it
 * (dependents before what they depend on), then every reference to the context is dropped.
 * Durable providers live on the sub-tree the app's `ContextIdStrategy` chose for the call (e.g.
 * its tenant's), shared with the other calls there, and are left to it.
 */
@Injectable()
export class ScopedToolCalls {
  private readonly logger = new Logger('TaskToolRunner');
  /** The wrappers that may hold per-context instances, and the module count they were read at. */
  private wrappers: DiscoveredWrapper[] = [];
  private readModules = -1;
  /** How deep each wrapper's dependencies go (see `depthOf`). */
  private readonly depths = new WeakMap<object, number>();
  /** Per provider name: failures of its cleanup hook since it was last logged. */
  private readonly failures = new Map<string, { count: number; loggedAt: number }>();

  constructor(private readonly modules: ModulesContainer) {}

  /**
   * The invoke of a task tool declared on `wrapper`: resolves the provider on the call's own
   * sub-tree, runs `method` on it, and ends the sub-tree once the method's promise settles. The
   * call's REQUEST is `request`, or (a call made without one) one read from its TaskContext.
   */
  invoker(
    wrapper: DiscoveredWrapper,
    method: Method,
    toolName: string,
  ): (input: unknown, context: unknown, request?: TaskRequest) => Promise<unknown> {
    // The provider's own module resolves it: the same wrapper discovery found, whatever other
    // module registers the same token.
    const moduleRef = wrapper.host?.providers.get(ModuleRef)?.instance as ModuleRef | undefined;
    if (moduleRef === undefined) {
      throw new TasksConfigError(
        `@TaskTool ${toolName}: ${String(wrapper.name)} is request-scoped but has no module to ` +
          'resolve it in',
      );
    }
    const token = wrapper.token;
    return async (input, context, request) => {
      const call =
        request ??
        taskRequestOf(
          (context as { owner: TaskOwner }).owner,
          (context as { taskId: string }).taskId,
          toolName,
        );
      // The app's ContextIdStrategy, if any, attaches the durable sub-tree for this call here.
      const contextId = ContextIdFactory.getByRequest(call);
      moduleRef.registerRequestByContextId(call, contextId);
      try {
        const instance: unknown = await moduleRef.resolve(token, contextId, { strict: true });
        return await method.call(instance, input, context);
      } finally {
        await this.end(contextId);
      }
    };
  }

  /**
   * Ends a call's sub-tree: the cleanup hooks of the instances made for it, then every entry
   * Nest keeps for the context (its REQUEST included). A hook's error is logged, never thrown.
   */
  private async end(contextId: ContextId): Promise<void> {
    const ending: { name: string; level: number; instance: { onModuleDestroy(): unknown } }[] = [];
    for (const wrapper of this.scopedWrappers()) {
      for (const held of wrapper.getExistingInstancesByContextId(contextId)) {
        const instance = held.instance as { onModuleDestroy?: unknown } | null | undefined;
        // A placeholder Nest made but never constructed (its resolution failed) is left alone.
        if (!held.isResolved || instance == null || typeof instance.onModuleDestroy !== 'function')
          continue;
        ending.push({
          name: String(wrapper.name),
          level: this.depthOf(wrapper),
          instance: instance as { onModuleDestroy(): unknown },
        });
      }
      wrapper.removeInstanceByContextId(contextId);
    }
    ending.sort((a, b) => b.level - a.level);
    for (const { name, instance } of ending) {
      try {
        await instance.onModuleDestroy();
      } catch (error) {
        this.hookFailed(name, error);
      }
    }
  }

  /**
   * The wrappers that can hold an instance per context: request-scoped ones (directly or through
   * a dependency) and transient ones. Read again when a module was added (a lazy-loaded one).
   */
  private scopedWrappers(): DiscoveredWrapper[] {
    if (this.readModules === this.modules.size) return this.wrappers;
    const found: DiscoveredWrapper[] = [];
    for (const module of this.modules.values()) {
      for (const collection of [module.providers, module.controllers, module.injectables]) {
        for (const wrapper of collection.values()) {
          if (wrapper.isTransient || !wrapper.isDependencyTreeStatic()) {
            found.push(wrapper as DiscoveredWrapper);
          }
        }
      }
    }
    this.wrappers = found;
    this.readModules = this.modules.size;
    return found;
  }

  /**
   * 1 + the depth of the deepest of the wrapper's dependencies (constructor and properties), 1
   * for none: a provider ends before what it depends on. Nest's own `hierarchyLevel` is set as a
   * request-scoped provider is first built, so it cannot order them. A cycle (forwardRef) counts
   * as no dependency.
   */
  private depthOf(wrapper: DiscoveredWrapper, visiting = new Set<object>()): number {
    const known = this.depths.get(wrapper);
    if (known !== undefined) return known;
    if (visiting.has(wrapper)) return 0;
    visiting.add(wrapper);
    let deepest = 0;
    const dependencies = [
      ...(wrapper.getCtorMetadata() ?? []),
      ...(wrapper.getPropertiesMetadata() ?? []).map((property) => property.wrapper),
    ];
    for (const dependency of dependencies) {
      if (dependency) deepest = Math.max(deepest, this.depthOf(dependency, visiting));
    }
    visiting.delete(wrapper);
    this.depths.set(wrapper, deepest + 1);
    return deepest + 1;
  }

  /** Logs a cleanup hook's failure: the first of each provider, then at most once a minute. */
  private hookFailed(name: string, error: unknown): void {
    const now = Date.now();
    const seen = this.failures.get(name);
    if (seen === undefined) {
      this.failures.set(name, { count: 0, loggedAt: now });
      this.logger.error(
        `${name}.onModuleDestroy failed as a task tool call ended (the task is not affected; ` +
          `further failures of it are counted and logged at most once a minute): ` +
          `${(error as Error)?.stack ?? String(error)}`,
      );
      return;
    }
    seen.count++;
    if (now - seen.loggedAt < HOOK_FAILURE_LOG_MS) return;
    this.logger.error(
      `${name}.onModuleDestroy failed ${seen.count} more time(s) as task tool calls ended; ` +
        `the latest: ${String(error)}`,
    );
    seen.count = 0;
    seen.loggedAt = now;
  }
}
