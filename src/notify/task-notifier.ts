import { Inject } from '@nestjs/common';
import type { TaskRecord } from '../task.js';

/**
 * Hears about every successful change of a task. TasksService hands it the new record after each
 * write that changed what a client can see (never after a no-op). A notifier that throws or
 * rejects is logged and ignored: it never breaks the transition that triggered it.
 */
export interface TaskNotifier {
  notify(record: TaskRecord): void | Promise<void>;
  /**
   * True when the notifier also delivers the changes other processes write to this process's
   * waiters (WaiterFeed), as the Redis notifier does: code waiting on a task then re-reads the
   * store only as a safety net against a lost message (every 30 s), not to see changes.
   */
  readonly deliversRemoteChanges?: boolean;
}

/** Injection token of the active TaskNotifier (same name as the interface). */
export const TaskNotifier = Symbol('TaskNotifier');

/** Injects the module's TaskNotifier (`null` when notifications are turned off). */
export const InjectTaskNotifier = (): PropertyDecorator & ParameterDecorator =>
  Inject(TaskNotifier);

export function isTaskNotifier(candidate: unknown): candidate is TaskNotifier {
  return (
    candidate !== null &&
    typeof candidate === 'object' &&
    typeof (candidate as { notify?: unknown }).notify === 'function'
  );
}
