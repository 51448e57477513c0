import { isNews, isTerminal, type TaskRecord, type TaskState } from '../task.js';

/** One change of a task as this process heard it. */
export interface HeardChange {
  readonly version: number;
  readonly status: TaskState;
  readonly statusMessage?: string;
  /** The record's `lastUpdatedAt` (epoch ms): when the change was written. */
  readonly at: number;
}

/** Changes kept per task. */
export const HISTORY_PER_TASK = 20;
/** Tasks kept; beyond, the one changed longest ago is dropped. */
export const HISTORY_TASKS = 1_000;
/**
 * The most of a status message a change keeps (UTF-16 code units, `…` marks a cut): a message may
 * be as large as the task (`maxTaskBytes`), and the history holds 20,000 changes, so with this
 * cap it holds at most about 40 MiB however large the messages.
 */
export const HISTORY_MESSAGE_CHARS = 1_000;

/**
 * The status history of tasks as this process heard it: records keep none. For each task the
 * last `perTask` changes this process heard, for at most `tasks` tasks (the one heard of longest
 * ago is dropped first). It holds what reached this instance's change feed, and only since it
 * started: a creation on another instance, or any change with `notifier: null`, is not in it.
 */
export class ConsoleHistory {
  /** Map order is recency: a task heard of again moves to the end. */
  private readonly byTask = new Map<string, HeardChange[]>();

  constructor(
    private readonly perTask = HISTORY_PER_TASK,
    private readonly tasks = HISTORY_TASKS,
  ) {}

  hear(record: TaskRecord): void {
    const changes = this.byTask.get(record.taskId) ?? [];
    const last = changes[changes.length - 1];
    if (last !== undefined && !isNews(record, isTerminal(last.status) ? Infinity : last.version)) {
      return;
    }
    this.byTask.delete(record.taskId);
    this.byTask.set(record.taskId, changes);
    changes.push({
      version: record.version,
      status: record.status,
      ...(record.statusMessage !== undefined && {
        statusMessage:
          record.statusMessage.length > HISTORY_MESSAGE_CHARS
            ? `${record.statusMessage.slice(0, HISTORY_MESSAGE_CHARS - 1)}…`
            : record.statusMessage,
      }),
      at: record.lastUpdatedAt,
    });
    if (changes.length > this.perTask) changes.splice(0, changes.length - this.perTask);
    if (this.byTask.size > this.tasks) {
      this.byTask.delete(this.byTask.keys().next().value!);
    }
  }

  of(taskId: string): readonly HeardChange[] {
    return this.byTask.get(taskId) ?? [];
  }

  /** How many tasks it holds (for tests). */
  get size(): number {
    return this.byTask.size;
  }
}
