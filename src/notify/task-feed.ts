import type { TaskRecord } from '../task.js';

export type TaskListener = (record: TaskRecord) => void;

/**
 * What brings a feed the changes other processes write, when a notifier for several processes
 * does (see RemoteChanges): the feed says which tasks someone in this process listens to, so the
 * process is sent the changes of those tasks only.
 */
export interface FeedWatcher {
  /**
   * A task got its first listener on a feed. Resolves once a change written elsewhere from then
   * on reaches the feed (the subscription is in place, or could not be made in time: it never
   * rejects).
   */
  watch(taskId: string): Promise<void>;
  /** The task's last listener on a feed left. */
  unwatch(taskId: string): void;
  /** The `watch` promise of a task already watched (a further listener waits on it too). */
  ready(taskId: string): Promise<void> | undefined;
  /** Someone wants every task's changes written elsewhere (see TaskFeed.hearAll); resolves as `watch`. */
  watchAll(): Promise<void>;
  unwatchAll(): void;
}

/**
 * A change feed of this process, by task id: a record published here reaches the listeners of
 * that task id only, so a change costs O(listeners of that task). A listener that throws is
 * isolated from the others and from the publisher. The module has two, each named for whom it
 * feeds: WaiterFeed (in-process waiters) and ListenFeed (listen streams). A few listeners may hear
 * every task (`listenAll`, the task console's); while there are none a publish costs one check.
 *
 * A notifier for several processes connects itself as the feed's watcher: the first listener of
 * a task (and the last one leaving) is told to it, so this process hears the changes of the tasks
 * listened to here, and no others. `listen` then returns a promise that resolves once those
 * changes arrive: a listener that reads the task after it misses nothing.
 */
export abstract class TaskFeed {
  /**
   * The listeners of each task: the function itself while there is one (the common case), a set
   * beyond, so a task with one waiter costs one map entry.
   */
  private readonly listeners = new Map<string, TaskListener | Set<TaskListener>>();
  /** The listeners of every task (`listenAll`). */
  private readonly everyTask = new Set<TaskListener>();
  private watcher: FeedWatcher | undefined;
  /** How many `hearAll` holds are out, and the watcher's promise for the first. */
  private hearingAll = 0;
  private allReady: Promise<void> | undefined;

  /** Connects the notifier that brings other processes' changes (see FeedWatcher). */
  connect(watcher: FeedWatcher): void {
    this.watcher = watcher;
    for (const taskId of this.listeners.keys()) void watcher.watch(taskId);
    if (this.hearingAll > 0) void watcher.watchAll();
  }

  /** Listens to one task's changes; returns an idempotent unsubscribe. */
  subscribe(taskId: string, listener: TaskListener): () => void {
    void this.listen(taskId, listener);
    let subscribed = true;
    return () => {
      if (!subscribed) return;
      subscribed = false;
      this.unlisten(taskId, listener);
    };
  }

  /**
   * Listens to one task's changes, until `unlisten` with the same function (no closure kept).
   * With a watcher, returns a promise resolved once changes written elsewhere reach the feed too
   * (read the task after it, not before); without one, `undefined`: every change is heard now.
   */
  listen(taskId: string, listener: TaskListener): Promise<void> | undefined {
    const current = this.listeners.get(taskId);
    if (current === undefined) {
      this.listeners.set(taskId, listener);
      return this.watcher?.watch(taskId);
    }
    if (typeof current === 'function') this.listeners.set(taskId, new Set([current, listener]));
    else current.add(listener);
    return this.watcher?.ready(taskId);
  }

  /** Stops `listener` hearing of the task; harmless when it does not. */
  unlisten(taskId: string, listener: TaskListener): void {
    const now = this.listeners.get(taskId);
    if (now === listener) {
      this.listeners.delete(taskId);
    } else {
      if (typeof now !== 'object' || !now.delete(listener) || now.size !== 0) return;
      this.listeners.delete(taskId);
    }
    this.watcher?.unwatch(taskId);
  }

  /**
   * When changes written elsewhere to a task listened to here reach the feed: `undefined` when
   * they already do (or no one brings them), else the promise of `listen`.
   */
  watching(taskId: string): Promise<void> | undefined {
    return this.watcher?.ready(taskId);
  }

  /**
   * Listens to every task's changes that reach this feed: this process's own, and other
   * processes' for the tasks listened to here, or for every task while a `hearAll` hold is out.
   * Returns an idempotent unsubscribe.
   */
  listenAll(listener: TaskListener): () => void {
    this.everyTask.add(listener);
    return () => void this.everyTask.delete(listener);
  }

  /**
   * Asks for the changes other processes write to every task (a live view of all tasks, such as
   * the task console's change stream), until the returned release is called (idempotent). Costs
   * this process one message per change anywhere: hold it only while someone looks.
   */
  hearAll(): { ready: Promise<void> | undefined; release: () => void } {
    if (this.hearingAll++ === 0) this.allReady = this.watcher?.watchAll();
    let held = true;
    return {
      ready: this.allReady,
      release: () => {
        if (!held) return;
        held = false;
        if (--this.hearingAll === 0) this.watcher?.unwatchAll();
      },
    };
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
