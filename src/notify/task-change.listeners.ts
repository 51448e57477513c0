import { Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import { DiscoveryService, MetadataScanner, Reflector } from '@nestjs/core';
import { messageOf } from '../errors.js';
import type { TaskRecord } from '../task/record.js';
import { markedMethods, markMethod } from '../tasks.discovery.js';

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
export const OnTaskChange = (): MethodDecorator => markMethod(TASK_CHANGE_METADATA, true);

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
    this.listeners = markedMethods<boolean>(
      TASK_CHANGE_METADATA,
      this.discovery,
      this.scanner,
      this.reflector,
    ).map(({ instance, name }) => ({
      name: `${instance.constructor?.name ?? 'a provider'}.${name}`,
      hear: (instance[name] as Listener).bind(instance),
    }));
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
    this.logger.error(`@OnTaskChange ${name} failed: ${messageOf(error)}`);
  }
}
