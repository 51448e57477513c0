import type { IncomingHttpHeaders } from 'node:http';
import { INTERNAL_ERROR_MESSAGE, TasksConfigError } from '../errors.js';
import {
  type CallToolResult,
  type InputRequest,
  type InputResponse,
  type TaskOwner,
  type TaskRecord,
  type TaskCallRecord,
  validateInputRequests,
} from '../task.js';
import type { TasksService } from '../tasks.service.js';
import type { TraceCarrier } from '../telemetry/tasks.telemetry.js';
import type { TaskToolDefinition } from './task-tool.registry.js';

/*
 * What a call of a task tool is as TaskToolRunner takes it: in process (`start`, `runInline`) or
 * as a queue job (`runJob`), and how its task is made from the tool's options.
 */

/** How `TaskToolRunner.start` starts a call, beyond its tool, input and owner. */
export interface StartCallOptions {
  /**
   * The TTL the client asked for (2025-11-25 `task.ttl`), in place of the tool's; the module's
   * `maxTtlMs` caps both.
   */
  readonly requestedTtlMs?: number;
  /**
   * The answers to the tool's `requireInputFirst` gathered before the task (2026-07-28 multi
   * round-trip); without them the task asks them first.
   */
  readonly firstInput?: Readonly<Record<string, InputResponse>>;
  /** Where the request names the trace the run's span continues (telemetry). */
  readonly trace?: TraceCarrier;
  /**
   * The headers of the HTTP request that made the call: a request-scoped tool's REQUEST gets a
   * copy without credentials (see TaskRequest); nothing keeps them once the call has started.
   */
  readonly headers?: IncomingHttpHeaders;
}

/** One call on its way in (see `TaskToolRunner.begin`). */
export interface ToolCall extends StartCallOptions {
  readonly tool: TaskToolDefinition;
  readonly input: unknown;
  readonly owner: TaskOwner;
  /** The client waits for the end in the same request (runInline), not through the task. */
  readonly inline: boolean;
}

/** A job of a queue-run tool, as its worker runs it (see `TaskToolRunner.runJob`). */
export interface TaskJob {
  /** Which run of the job this is, from 1. A later run restarts the method from its start. */
  readonly run: number;
  /** False while the queue will run the job again if this run throws. */
  readonly lastRun: boolean;
  /** Answers the method took in earlier runs, by input key. */
  readonly answers: Readonly<Record<string, InputResponse>>;
  /** Keeps the answers taken so far with the job, for a later run. */
  keepAnswers(answers: Readonly<Record<string, InputResponse>>): Promise<void>;
  /**
   * Set by a worker that can park its jobs (see JobPark): the shortest `task.sleep` that parks.
   * Without it (or without `TaskQueue.wake`), a sleep and an input request hold the worker's slot.
   */
  readonly parkAfterMs?: number;
  /** This run follows a park (the job woke), not a run that stopped: it is no restart. */
  readonly woken?: boolean;
}

/**
 * The shortest `task.sleep` of a queue job that parks (`TaskJob.parkAfterMs` of this package's
 * workers, BullMQ's and pg-boss's): a shorter one waits in its slot, where a park would cost more
 * than it frees (a move of the job, a task read, and the job's turn behind the jobs that wait
 * when it wakes).
 */
export const JOB_PARK_AFTER_MS = 1_000;

/**
 * A job that parked: its method left the worker's slot in a long `task.sleep`, or to wait for
 * input. The worker moves the job back to its queue, to run `until` (epoch ms) without spending
 * a run (its next run is `woken`), then calls `TaskToolRunner.parked`, which wakes it at once
 * should the answer (or a cancel) have come meanwhile. `TaskQueue.wake` wakes it sooner: an
 * answer's `tasks/update`, a cancel.
 */
export interface JobPark {
  readonly until: number;
  /** The input keys the method waits for, when it parked for input. */
  readonly waitingFor?: readonly string[];
}

/**
 * What a queue worker does with a job after `runJob`: nothing more (`settled`), run it again as
 * a failed attempt (`retry`), put it back for another worker as it was (`stopped`: this
 * process is shutting down and stopped the method), or park it (a JobPark).
 */
export type JobOutcome = 'settled' | 'retry' | 'stopped' | JobPark;

/** The requests of the tool's `requireInputFirst` for this input, or none. */
export async function firstInputRequests(
  tool: TaskToolDefinition,
  input: unknown,
): Promise<Record<string, InputRequest> | undefined> {
  const ask = tool.options.requireInputFirst;
  const requests = typeof ask === 'function' ? await ask(input) : ask;
  if (requests === undefined || Object.keys(requests).length === 0) return undefined;
  return validateInputRequests(requests);
}

/**
 * Stores the call's task, labelled with the tool's name and, when the tool keeps them, the
 * arguments its `keepArguments` returns (TasksService checks them: JSON, 4 KiB at most).
 */
export async function createCallTask(
  tasks: TasksService,
  { tool, input, owner, requestedTtlMs }: ToolCall,
  /** What a durable call keeps of itself (see `TaskRecord.call`). */
  call?: TaskCallRecord,
): Promise<TaskRecord> {
  const { pollIntervalMs, statusMessage, keepArguments } = tool.options;
  const ttlMs = requestedTtlMs ?? tool.options.ttlMs;
  let kept: unknown;
  try {
    kept = keepArguments?.(input);
  } catch (error) {
    // A fault of the tool's own code: the call fails as an internal error, the reason logged.
    throw new TasksConfigError(`Tool "${tool.name}": keepArguments threw: ${String(error)}`);
  }
  if (typeof (kept as { then?: unknown } | null)?.then === 'function') {
    throw new TasksConfigError(
      `Tool "${tool.name}": keepArguments must return its copy, not a promise`,
    );
  }
  // An in-process call is held by this instance's lease; a queue-run one by no one (a worker
  // runs it, and the queue runs it again should that worker die).
  return tasks.create(
    owner,
    {
      ...(ttlMs !== undefined && { ttlMs }),
      ...(pollIntervalMs !== undefined && { pollIntervalMs }),
      ...(statusMessage !== undefined && { statusMessage }),
    },
    {
      held: tool.options.queue === undefined,
      toolName: tool.name,
      ...(kept !== undefined && { arguments: kept }),
      ...(call !== undefined && { call }),
    },
  );
}

/**
 * What a call of a client without the tasks extension answers once its task ends (runInline):
 * the task's result, or its error or cancellation as a tool error.
 */
export function inlineResult(end: TaskRecord): CallToolResult {
  if (end.status === 'completed' && end.result) {
    const { resultType, ...result } = end.result;
    return result as CallToolResult;
  }
  const message =
    end.status === 'failed'
      ? (end.error?.message ?? INTERNAL_ERROR_MESSAGE)
      : 'The task was cancelled';
  return { content: [{ type: 'text', text: message }], isError: true };
}
