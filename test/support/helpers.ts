import { InMemoryTaskStore } from '../../src/store/in-memory.task-store.js';
import type { TaskNotifier } from '../../src/notify/task-notifier.js';
import type { TaskStore } from '../../src/store/task-store.js';
import type {
  CallToolResult,
  InputRequest,
  InputResponse,
  TaskOwner,
  TaskRecord,
} from '../../src/task.js';
import type { TasksModuleOptions } from '../../src/interfaces/tasks-module-options.interface.js';
import { resolveTasksConfig } from '../../src/tasks.config.js';
import { TasksService } from '../../src/tasks.service.js';

/** A notifier that remembers every record it was handed. */
export class RecordingNotifier implements TaskNotifier {
  readonly records: TaskRecord[] = [];
  notify(record: TaskRecord): void {
    this.records.push(record);
  }
  for(taskId: string): TaskRecord[] {
    return this.records.filter((record) => record.taskId === taskId);
  }
}

export interface ServiceHarness {
  service: TasksService;
  store: TaskStore;
  notifier: RecordingNotifier;
}

/** A TasksService over a real in-memory store, built without Nest (the module is tested apart). */
export function serviceWith(
  options: TasksModuleOptions = {},
  store: TaskStore = new InMemoryTaskStore(),
): ServiceHarness {
  const notifier = new RecordingNotifier();
  const service = new TasksService(store, notifier, resolveTasksConfig(options));
  return { service, store, notifier };
}

export const sleep = (ms: number): Promise<void> =>
  new Promise((resolve) => setTimeout(resolve, ms));

export const elicit = (message: string): InputRequest => ({
  method: 'elicitation/create' as const,
  params: {
    message,
    requestedSchema: {
      type: 'object',
      properties: { name: { type: 'string' } },
      required: ['name'],
    },
  },
});

export const accept = (name: string): InputResponse => ({ action: 'accept', content: { name } });

/** A tool result of one text block. */
export const textResult = (text: string): CallToolResult => ({ content: [{ type: 'text', text }] });

/** A small seeded generator (mulberry32): randomized tests that repeat exactly. */
export function seededRandom(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The error a promise rejects with (fails when it resolves). */
export async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('Expected a rejection');
}

/**
 * The i-th of a mix of racing calls on one task, by `owner`: complete, fail, cancel and progress
 * in turn (the races specs run hundreds of them at once, over one store or two).
 */
export function racer(
  service: TasksService,
  owner: TaskOwner,
  taskId: string,
  i: number,
): Promise<unknown> {
  switch (i % 4) {
    case 0:
      return service.complete(taskId, textResult(`c${i}`));
    case 1:
      return service.fail(taskId, [-32000, `f${i}`]);
    case 2:
      return service.cancel(taskId, owner);
    default:
      return service.progress(taskId, `p${i}`);
  }
}
