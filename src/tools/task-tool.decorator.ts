import { applyDecorators } from '@nestjs/common';
import { TASK_TOOL_METADATA } from '../tasks.constants.js';
import { markMethod } from '../tasks.discovery.js';
import type { InputRequest } from '../task.js';
import type { TaskToolInput } from './input-schema.js';
import { watchForTasksModule } from './task-tool.unserved.js';

/** What a task tool does for a client that did not declare the tasks extension. */
export type WhenClientLacksTasks = 'reject' | 'inline';

export interface TaskToolAnnotations {
  title?: string;
  readOnlyHint?: boolean;
  destructiveHint?: boolean;
  idempotentHint?: boolean;
  openWorldHint?: boolean;
}

/** The queue a tool's calls run on, with the options of each job (the queue library's own). */
export interface TaskToolQueue {
  name: string;
  jobOptions?: Readonly<Record<string, unknown>>;
}

export interface TaskToolOptions {
  /** The tool name, unique in the app. */
  name: string;
  title?: string;
  description?: string;
  /**
   * The arguments: a class-validator DTO class (its JSON Schema is published in tools/list) or a
   * Standard Schema with JSON Schema such as a zod object. Arguments are validated before the
   * method runs. Without `input` the method gets the arguments as the client sent them (an
   * object, published as `{ type: "object" }`). A DTO class must carry class-validator metadata
   * (a decorator on each property, `@Allow()` for one taken unchecked): one without any fails the
   * boot, since every argument would be dropped.
   */
  input?: TaskToolInput;
  annotations?: TaskToolAnnotations;
  /** TTL of each task this tool creates (default: the module's `defaultTtlMs`; `null` = unlimited). */
  ttlMs?: number | null;
  /** The poll interval suggested to clients. */
  pollIntervalMs?: number;
  /** The status message of a new task. */
  statusMessage?: string;
  /**
   * `'reject'` (default): a call without the tasks capability gets -32021 (HTTP 400).
   * `'inline'`: the method runs to the end and its result is the answer (for 2025-era clients too).
   */
  whenClientLacksTasks?: WhenClientLacksTasks;
  /**
   * Input the tool needs before its task exists: the requests (or a function of the validated
   * input that returns them, or nothing when this call needs none). A 2026-07-28 client gets them
   * in a synchronous `input_required` result and calls again with the answers (a multi round-trip
   * request); the task is created only then. Elsewhere (2025-11-25 clients) the task is created
   * at once and asks them first, as `requireInput` would. Either way the method starts with the
   * answers in `task.firstInput`.
   */
  /**
   * Runs the method on a job queue instead of in the process that took the call (see
   * `nestjs-mcp-tasks/bullmq`): the queue's name, or the name with options for this tool's jobs
   * (the queue's own job options, e.g. BullMQ's `attempts`, `backoff`, `priority`). The call stores
   * the task and enqueues a job; a worker with the same providers runs the method.
   */
  queue?: string | TaskToolQueue;
  /**
   * Resume instead of fail (in-process calls, on a store with leases): should the instance running
   * a call die, another instance runs the method again for the same task once the dead one's
   * lease has run out, instead of failing the task. Its completed steps (`task.step`) return what
   * they returned, the answers it took come back without asking again, and the task keeps its id.
   * The task keeps the call's checked input (counted in `maxTaskBytes`) until it ends. A task is
   * resumed at most 3 times; then it fails. A queue-run tool needs none of it: its queue runs the
   * job again. Default false. See docs/durable-steps.md.
   */
  durable?: boolean;
  /**
   * What each task keeps of its call's arguments, to show in listing (never on the wire): a
   * function of the validated input that returns a redacted copy (drop secrets and bulk), or
   * `undefined` to keep nothing for this call. Its return must be JSON data of at most 4 KiB
   * serialized; anything else, or a throw, fails the call with -32603 "Internal error" (the reason
   * is logged) before any task exists. Without it no arguments are kept.
   */
  keepArguments?: (
    input: any, // eslint-disable-line @typescript-eslint/no-explicit-any
  ) => unknown;
  requireInputFirst?:
    | Record<string, InputRequest>
    | ((
        input: any, // eslint-disable-line @typescript-eslint/no-explicit-any
      ) =>
        | Record<string, InputRequest>
        | undefined
        | Promise<Record<string, InputRequest> | undefined>);
}

/**
 * Turns a provider or controller method into an MCP tool that answers with a task. The method is
 * called as `(input, task: TaskContext)`; its return value completes the task.
 *
 * ```ts
 * @TaskTool({ name: 'add_slowly', input: AddInput, pollIntervalMs: 250 })
 * async add(input: AddInput, task: TaskContext) {
 *   await task.progress('Adding');
 *   return { content: [{ type: 'text', text: String(input.a + input.b) }] };
 * }
 * ```
 */
export const TaskTool = (options: TaskToolOptions): MethodDecorator =>
  applyDecorators(markMethod(TASK_TOOL_METADATA, options), watchClass);

/** Gives the class the check that warns at bootstrap when no TasksModule serves its tools. */
const watchClass: MethodDecorator = (target) => {
  // A static method's target is the class itself; no explorer looks there.
  if (typeof target === 'object') watchForTasksModule(target);
};
