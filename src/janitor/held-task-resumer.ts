import type { TaskRecord } from '../task.js';

/**
 * What TasksLease asks before it fails a task of an instance that died: whether this process can
 * run the task's call again (a durable tool's in-process call, `@TaskTool({ durable: true })`).
 * TaskToolRunner is the one implementation.
 */
export abstract class HeldTaskResumer {
  /**
   * Runs the task's call again in this process, moving the task to this instance first; true
   * when the task is no longer the dead instance's (resumed here, taken over by another instance
   * first, or failed for having been run too often). False for a task this process cannot run
   * again: the lease then fails it.
   */
  abstract resume(record: TaskRecord): Promise<boolean>;
}
