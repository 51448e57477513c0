import type { TaskRecord } from '../task.js';

export type TaskListener = (record: TaskRecord) => void;

/**
 * A change feed of this process, by task id: a record published here reaches the listeners of
 * that task id only, so a change costs O(listeners of that task). A listener that throws is
 * isolated from the others and from the publisher. The module has two, each named for whom it
 * feeds: WaiterFeed (in-process waiters) and ListenFeed (listen streams).
 */
export abstract class TaskFeed {
  private readonly listeners = new Map<string, Set<TaskListener>>();

  /** Listens to one task's changes; returns an idempotent unsubscribe. */
  subscribe(taskId: string, listener: TaskListener): () => void {
    let set = this.listeners.get(taskId);
    if (set === undefined) {
      set = new Set();
      this.listeners.set(taskId, set);
    }
    set.add(listener);
    return () => {
      const current = this.listeners.get(taskId);
      if (current === undefined || !current.delete(listener)) return;
      if (current.size === 0) this.listeners.delete(taskId);
    };
  }

  publish(record: TaskRecord): void {
    const set = this.listeners.get(record.taskId);
    if (set === undefined) return;
    for (const listener of [...set]) {
      try {
        listener(record);
      } catch {
        // A faulty listener must not break the write that published, nor the other listeners.
      }
    }
  }

  /** How many tasks have listeners (for leak checks). */
  get watchedTasks(): number {
    return this.listeners.size;
  }
}
