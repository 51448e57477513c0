import { Injectable, type OnModuleInit } from '@nestjs/common';
import { DiscoveryService, MetadataScanner, Reflector } from '@nestjs/core';
import { TasksConfigError } from '../errors.js';
import { TASK_TOOL_METADATA } from '../tasks.constants.js';
import { type DiscoveredWrapper, type MarkedMethod, markedMethods } from '../tasks.discovery.js';
import { loadDtoLibraries, mayBeDtoClass } from './dto-libraries.js';
import { toToolInputSchema } from './input-schema.js';
import type { TaskToolOptions } from './task-tool.decorator.js';
import { TaskToolRegistry } from './task-tool.registry.js';
import { noteServed } from './task-tool.unserved.js';
import { ScopedToolCalls } from './scoped-calls.js';

const TOOL_NAME = /^[A-Za-z0-9_.-]{1,128}$/;

/**
 * Finds `@TaskTool` methods on providers and controllers once, during module init, and builds
 * each tool's definition (JSON Schema included) so requests only look them up. Wrappers without
 * an instance or with a null prototype are skipped. A tool of a request-scoped provider (directly
 * or through a dependency) resolves its instance per call (see ScopedToolCalls), in process as in
 * the queue worker that runs its job. Duplicate names fail the boot.
 */
@Injectable()
export class TaskToolExplorer implements OnModuleInit {
  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly reflector: Reflector,
    private readonly registry: TaskToolRegistry,
    private readonly scoped: ScopedToolCalls,
  ) {}

  /** The discovery, once: module init runs it, and so may a caller that needs the tools sooner. */
  private explored: void | Promise<void> | undefined;
  private done = false;

  onModuleInit(): void | Promise<void> {
    return this.explore();
  }

  /**
   * Finds and registers the task tools, once (later calls return the first call's outcome): at
   * module init, or sooner for a caller that needs them before the app is initialised (the
   * `/rekog` entry registers them into a strategy that may start first). Synchronous unless a
   * tool takes a DTO class: class-validator is then loaded first (see dto-libraries.ts), and the
   * tools are registered once it is.
   */
  explore(): void | Promise<void> {
    if (this.done) return this.explored;
    this.done = true;
    this.explored = this.discover();
    return this.explored;
  }

  private discover(): void | Promise<void> {
    const scoped: { wrapper: DiscoveredWrapper; method: MarkedMethod<TaskToolOptions> }[] = [];
    const found = markedMethods<TaskToolOptions>(
      TASK_TOOL_METADATA,
      this.discovery,
      this.scanner,
      this.reflector,
      (wrapper, methods) => {
        for (const method of methods) scoped.push({ wrapper, method });
      },
    );
    // Noted now, before any await: the providers' bootstrap check (task-tool.unserved.ts) reads it.
    for (const { instances } of found) for (const instance of instances) noteServed(instance);
    const registerAll = (): void => {
      for (const { instance, name, metadata } of found) this.register(instance, name, metadata);
      for (const { wrapper, method } of scoped) {
        this.register(method.instance, method.name, method.metadata, wrapper);
      }
    };
    const all = [...found, ...scoped.map(({ method }) => method)];
    if (!all.some(({ metadata }) => mayBeDtoClass(metadata.input))) return registerAll();
    return loadDtoLibraries().then(registerAll);
  }

  private register(
    instance: Record<string, unknown>,
    methodName: string,
    options: TaskToolOptions,
    /** The provider's wrapper when it is request-scoped: its instance is resolved per call. */
    scoped?: DiscoveredWrapper,
  ): void {
    const method = instance[methodName] as (input: unknown, context: unknown) => unknown;
    const where = `@TaskTool on ${instance.constructor?.name ?? 'a provider'}.${methodName}`;
    if (typeof options.name !== 'string' || !TOOL_NAME.test(options.name)) {
      throw new TasksConfigError(
        `${where}: name must be 1-128 letters, digits, "_", "-" or ".", got ${JSON.stringify(options.name)}`,
      );
    }
    if (this.registry.has(options.name)) {
      throw new TasksConfigError(`${where}: a task tool named "${options.name}" exists already`);
    }
    const whenLacking = options.whenClientLacksTasks ?? 'reject';
    if (whenLacking !== 'reject' && whenLacking !== 'inline') {
      throw new TasksConfigError(`${where}: whenClientLacksTasks must be "reject" or "inline"`);
    }
    if (options.keepArguments !== undefined && typeof options.keepArguments !== 'function') {
      throw new TasksConfigError(
        `${where}: keepArguments must be a function of the input that returns what to keep`,
      );
    }
    if (options.durable !== undefined && typeof options.durable !== 'boolean') {
      throw new TasksConfigError(`${where}: durable must be true or false`);
    }
    this.registry.add({
      name: options.name,
      options: Object.freeze({ ...options, whenClientLacksTasks: whenLacking }),
      config: {
        ...(options.title !== undefined && { title: options.title }),
        ...(options.description !== undefined && { description: options.description }),
        ...(options.annotations !== undefined && { annotations: options.annotations }),
        inputSchema: toToolInputSchema(options.input, options.name),
      },
      method,
      ...(scoped === undefined
        ? { invoke: (input, context) => method.call(instance, input, context) }
        : { scoped: true, invoke: this.scoped.invoker(scoped, method, options.name) }),
    });
  }
}
