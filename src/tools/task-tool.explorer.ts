import { Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import { DiscoveryService, MetadataScanner, Reflector } from '@nestjs/core';
import { TasksConfigError } from '../errors.js';
import { TASK_TOOL_METADATA } from '../tasks.constants.js';
import { loadDtoLibraries, mayBeDtoClass } from './dto-libraries.js';
import { toToolInputSchema } from './input-schema.js';
import type { TaskToolOptions } from './task-tool.decorator.js';
import { TaskToolRegistry } from './task-tool.registry.js';

const TOOL_NAME = /^[A-Za-z0-9_.-]{1,128}$/;

/**
 * Finds `@TaskTool` methods on providers and controllers once, during module init, and builds
 * each tool's definition (JSON Schema included) so requests only look them up. Wrappers without
 * an instance or with a null prototype are skipped; request-scoped ones are skipped with a
 * warning (a tool runs outside any request's lifetime). Duplicate names fail the boot.
 */
@Injectable()
export class TaskToolExplorer implements OnModuleInit {
  private readonly logger = new Logger('TaskToolExplorer');

  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly reflector: Reflector,
    private readonly registry: TaskToolRegistry,
  ) {}

  /**
   * Synchronous unless a tool takes a DTO class: class-validator is then loaded first (see
   * dto-libraries.ts), and the tools are registered once it is.
   */
  onModuleInit(): void | Promise<void> {
    const found: [Record<string, unknown>, string][] = [];
    for (const wrapper of [...this.discovery.getProviders(), ...this.discovery.getControllers()]) {
      const { instance } = wrapper;
      if (!instance || typeof instance !== 'object') continue;
      const prototype = Object.getPrototypeOf(instance) as object | null;
      if (!prototype) continue;
      const methods = this.scanner.getAllMethodNames(prototype);
      const tools = methods.filter((name) =>
        this.optionsOf(instance as Record<string, unknown>, name),
      );
      if (tools.length === 0) continue;
      if (!wrapper.isDependencyTreeStatic()) {
        this.logger.warn(
          `${String(wrapper.name)} is request-scoped; its @TaskTool methods (${tools.join(', ')}) are skipped`,
        );
        continue;
      }
      for (const methodName of tools) found.push([instance as Record<string, unknown>, methodName]);
    }
    const registerAll = (): void => {
      for (const [instance, methodName] of found) this.register(instance, methodName);
    };
    if (!found.some(([instance, name]) => mayBeDtoClass(this.optionsOf(instance, name)?.input))) {
      return registerAll();
    }
    return loadDtoLibraries().then(registerAll);
  }

  private optionsOf(instance: Record<string, unknown>, methodName: string) {
    return this.reflector.get<TaskToolOptions | undefined>(
      TASK_TOOL_METADATA,
      instance[methodName] as () => unknown,
    );
  }

  private register(instance: Record<string, unknown>, methodName: string): void {
    const method = instance[methodName] as (input: unknown, context: unknown) => unknown;
    const options = this.optionsOf(instance, methodName);
    const where = `@TaskTool on ${instance.constructor?.name ?? 'a provider'}.${methodName}`;
    if (typeof options?.name !== 'string' || !TOOL_NAME.test(options.name)) {
      throw new TasksConfigError(
        `${where}: name must be 1-128 letters, digits, "_", "-" or ".", got ${JSON.stringify(options?.name)}`,
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
    this.registry.add({
      name: options.name,
      options: Object.freeze({ ...options, whenClientLacksTasks: whenLacking }),
      config: {
        ...(options.title !== undefined && { title: options.title }),
        ...(options.description !== undefined && { description: options.description }),
        ...(options.annotations !== undefined && { annotations: options.annotations }),
        inputSchema: toToolInputSchema(options.input, options.name),
      },
      invoke: (input, context) => method.call(instance, input, context),
    });
  }
}
