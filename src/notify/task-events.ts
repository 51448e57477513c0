import { Injectable } from '@nestjs/common';
import type { TaskRecord } from '../task.js';

export type TaskListener = (record: TaskRecord) => void;

/**
 * This process's change feed: every record TasksService writes is published here, to the
 * listeners of that task id only, so a change costs O(listeners of that task). In-process waiters
 * (a tool awaiting input, a cancellation watch, an inline call awaiting the end) listen here.
 * A listener that throws is isolated from the others and from the writer.
 */
@Injectable()
export class TaskEvents {
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
