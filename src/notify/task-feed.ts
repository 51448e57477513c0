import type { TaskRecord } from '../task.js';

export type TaskListener = (record: TaskRecord) => void;

/**
 * A change feed of this process, by task id: a record published here reaches the listeners of
 * that task id only, so a change costs O(listeners of that task). A listener that throws is
 * isolated from the others and from the publisher. The module has two, each named for whom it
 * feeds: WaiterFeed (in-process waiters) and ListenFeed (listen streams). A few listeners may hear
 * every task (`listenAll`, the task console's); while there are none a publish costs one check.
 */
export abstract class TaskFeed {
  /**
   * The listeners of each task: the function itself while there is one (the common case), a set
   * beyond, so a task with one waiter costs one map entry.
   */
  private readonly listeners = new Map<string, TaskListener | Set<TaskListener>>();
  /** The listeners of every task (`listenAll`). */
  private readonly everyTask = new Set<TaskListener>();

  /** Listens to one task's changes; returns an idempotent unsubscribe. */
  subscribe(taskId: string, listener: TaskListener): () => void {
    this.listen(taskId, listener);
    let subscribed = true;
    return () => {
      if (!subscribed) return;
      subscribed = false;
      this.unlisten(taskId, listener);
    };
  }

  /** Listens to one task's changes, until `unlisten` with the same function (no closure kept). */
  listen(taskId: string, listener: TaskListener): void {
    const current = this.listeners.get(taskId);
    if (current === undefined) this.listeners.set(taskId, listener);
    else if (typeof current === 'function')
      this.listeners.set(taskId, new Set([current, listener]));
    else current.add(listener);
  }

  /** Stops `listener` hearing of the task; harmless when it does not. */
  unlisten(taskId: string, listener: TaskListener): void {
    const now = this.listeners.get(taskId);
    if (now === listener) this.listeners.delete(taskId);
    else if (typeof now === 'object' && now.delete(listener) && now.size === 0) {
      this.listeners.delete(taskId);
    }
  }

  /** Listens to every task's changes; returns an idempotent unsubscribe. */
  listenAll(listener: TaskListener): () => void {
    this.everyTask.add(listener);
    return () => void this.everyTask.delete(listener);
  }

  publish(record: TaskRecord): void {
    if (this.everyTask.size !== 0) deliver([...this.everyTask], record);
    const current = this.listeners.get(record.taskId);
    if (current === undefined) return;
    deliver(typeof current === 'function' ? [current] : [...current], record);
  }

  /** How many tasks have listeners (for leak checks). */
  get watchedTasks(): number {
    return this.listeners.size;
  }
}

function deliver(listeners: readonly TaskListener[], record: TaskRecord): void {
  for (const listener of listeners) {
    try {
      listener(record);
    } catch {
      // A faulty listener must not break the write that published, nor the other listeners.
    }
  }
}
