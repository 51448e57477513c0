import type { InputResponse, TaskOwner } from '../task.js';
import type { TaskToolQueue } from './task-tool.decorator.js';

/** One call of a queue-run task tool, as a job carries it: enough for a worker to run it. */
export interface QueuedCall {
  /** The tool's name (the worker looks the method up by it). */
  readonly tool: string;
  readonly taskId: string;
  /** The validated input. */
  readonly input: unknown;
  /**
   * Set when the client waits for the end in its request (it did not declare the tasks extension,
   * and the tool runs inline for it): the method cannot ask for input.
   */
  readonly inline?: true;
  /** The answers to the tool's `requireInputFirst`, gathered before the task. */
  readonly firstInput?: Readonly<Record<string, InputResponse>>;
  /**
   * The W3C trace context of the request that made the call (`traceparent`, `tracestate`), when
   * telemetry is on: the worker's span of the run continues that trace.
   */
  readonly trace?: Readonly<{ traceparent: string; tracestate?: string }>;
  /**
   * For a tool on a request-scoped provider: the headers of the request that made the call,
   * without its credentials and at most JOB_HEADERS_MAX_BYTES of them (see JobHeaders), for the
   * `headers` of the REQUEST its worker gives the job. Absent for other tools, and when the call
   * came without headers.
   */
  readonly headers?: Readonly<Record<string, string | readonly string[]>>;
}

/**
 * Where queue-run task tools send their calls (`@TaskTool({ queue })`). Bound by
 * `TasksQueueModule` of `nestjs-mcp-tasks/bullmq`; a custom queue may bind its own. `enqueue`
 * resolves once the job is stored; a rejection fails the call's task. `owner` is the task's
 * owner, for a queue that takes turns across owners (the BullMQ one does, see docs/queue.md).
 */
export abstract class TaskQueue {
  abstract enqueue(
    queue: Readonly<TaskToolQueue>,
    call: QueuedCall,
    owner: Required<TaskOwner>,
  ): Promise<void>;
  /**
   * Makes the parked job of a task run now (see JobPark): its answer came, or it was cancelled.
   * Nothing when the task has no parked job on `queue`. A queue without it parks no job: a
   * sleep or an input request holds the worker's slot.
   */
  wake?(queue: Readonly<TaskToolQueue>, taskId: string): Promise<void>;
}

/** The queue of a tool, in one form. */
export function toolQueue(queue: string | TaskToolQueue): Readonly<TaskToolQueue> {
  return typeof queue === 'string' ? { name: queue } : queue;
}
