import { Injectable, Logger, type OnModuleInit, SetMetadata } from '@nestjs/common';
import { DiscoveryService, MetadataScanner, Reflector } from '@nestjs/core';
import type { TaskRecord } from '../task/record.js';

const TASK_CHANGE_METADATA = 'nestjs-mcp-tasks:on-task-change';

/**
 * Marks a provider method that hears every task change this process writes (creations
 * included), beside the notifier, which stays in place: an audit log, metrics. Called with the
 * record as written, after the write; what it returns is not awaited, and what it throws is
 * logged and changes nothing. Each write is heard once, in the process that made it.
 *
 * ```ts
 * @OnTaskChange()
 * audit(task: TaskRecord) { this.log.info({ taskId: task.taskId, status: task.status }); }
 * ```
 */
export const OnTaskChange = (): MethodDecorator => SetMetadata(TASK_CHANGE_METADATA, true);

type Listener = (record: TaskRecord) => unknown;

/** The `@OnTaskChange` methods of the app, found once at module init. */
@Injectable()
export class TaskChangeListeners implements OnModuleInit {
  private readonly logger = new Logger('TaskChangeListeners');
  private listeners: { name: string; hear: Listener }[] = [];

  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly reflector: Reflector,
  ) {}

  onModuleInit(): void {
    for (const wrapper of [...this.discovery.getProviders(), ...this.discovery.getControllers()]) {
      const instance = wrapper.instance as Record<string, unknown> | undefined;
      if (!instance || typeof instance !== 'object' || !wrapper.isDependencyTreeStatic()) continue;
      const prototype = Object.getPrototypeOf(instance) as object | null;
      if (!prototype) continue;
      for (const name of this.scanner.getAllMethodNames(prototype)) {
        const method = instance[name] as Listener;
        if (this.reflector.get<boolean>(TASK_CHANGE_METADATA, method) !== true) continue;
        this.listeners.push({
          name: `${instance.constructor?.name ?? 'a provider'}.${name}`,
          hear: method.bind(instance),
        });
      }
    }
  }

  /** Whether any method listens. */
  get size(): number {
    return this.listeners.length;
  }

  hear(record: TaskRecord): void {
    for (const listener of this.listeners) {
      try {
        const pending = listener.hear(record) as Promise<unknown> | undefined;
        if (pending !== undefined && typeof pending?.then === 'function') {
          pending.then(undefined, (error: unknown) => this.failed(listener.name, error));
        }
      } catch (error) {
        this.failed(listener.name, error);
      }
    }
  }

  private failed(name: string, error: unknown): void {
    this.logger.error(
      `@OnTaskChange ${name} failed: ${(error as Error)?.message ?? String(error)}`,
    );
  }
}
