import type { Logger } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { ProtocolErrorCode } from '@modelcontextprotocol/server';
import {
  INTERNAL_ERROR_MESSAGE,
  TaskNotFoundError,
  TaskStoreFullError,
  TaskTerminalError,
  TaskTooLargeError,
} from '../errors.js';
import {
  type InputResponse,
  type TaskFailure,
  type TaskRecord,
  thrownJsonRpcError,
  toCallToolResult,
} from '../task.js';
import type { TasksConfig } from '../interfaces/tasks-module-options.interface.js';
import type { TasksService } from '../tasks.service.js';
import { isStoreUnavailable } from '../tasks.writer.js';
import type { RunningCall } from './running-call.js';
import { backoff, jittered, OUTAGE_RETRY_FIRST_MS } from './store-outage.js';
import { type RunningTaskContext, TaskParked } from './task-context.js';
import type { TaskToolDefinition } from './task-tool.registry.js';
import { firstInputRequests } from './task-tool.calls.js';
import type { TaskRequest } from './scoped-calls.js';

/**
 * Whether a failed write leaves the task settled all the same: finished by someone else meanwhile
 * (cancelled, failed at shutdown), or failed already because its result or error was too large
 * to keep, for the task or for a store that caps its bytes (TasksService logged why).
 */
const settles = (error: unknown): boolean =>
  error instanceof TaskTerminalError ||
  error instanceof TaskTooLargeError ||
  error instanceof TaskStoreFullError;

/** How often the calls stopped by their task's expiry are logged, at most. */
const LOST_TASK_LOG_MS = 60_000;

/** What a task fails with when its tool's own code threw a store fault (it called the store). */
const STORE_FAULT_FAILURE: TaskFailure = [
  ProtocolErrorCode.InternalError,
  'Task store unreachable: the call was stopped',
];

/** One call to run to its end (see TaskToolSettler.execute). */
export interface CallRun {
  readonly tool: TaskToolDefinition;
  readonly input: unknown;
  readonly context: RunningTaskContext;
  readonly call: RunningCall;
  /** The answers to the tool's `requireInputFirst` gathered before the task, if any. */
  readonly firstInput?: Readonly<Record<string, InputResponse>>;
  /** Queue jobs: given an error that is not a JSON-RPC error, true leaves the task as it is. */
  readonly retry?: (error: unknown) => boolean;
  /** The call's REQUEST, for a tool on a request-scoped provider. */
  readonly request?: TaskRequest;
}

/**
 * How TaskToolRunner ends its calls: runs the method to its end and writes its outcome to the
 * task (its result, its error, its cancellation), riding out a store that is away, and counts the
 * calls whose task expired or was deleted meanwhile.
 */
export class TaskToolSettler {
  /** Calls whose task expired or was deleted while they ran, not logged yet (see `lostTask`). */
  private lostTasks = 0;
  private lostTasksLoggedAt = -Infinity;
  /** The tools already warned of a method that went on after its task parked (see `wentOn`). */
  private readonly wentOnTools = new Set<string>();

  constructor(
    private readonly tasks: TasksService,
    private readonly config: TasksConfig,
    /** Aborted at shutdown: ending calls then leave their tasks as shutdown decided. */
    private readonly shutdown: AbortSignal,
    /** TaskToolRunner's own logger: the lines read as they always did. */
    private readonly logger: Logger,
    /** Called as a call ends, before its span does: the runner forgets it. */
    private readonly ended: (taskId: string) => void,
  ) {}

  /**
   * A method returned, or threw something else, after its task parked: it caught TaskParked. What
   * it did after the park is dropped (the task wakes and the method runs again), which its author
   * should know: said once per tool.
   */
  private wentOn(tool: TaskToolDefinition): void {
    if (this.wentOnTools.has(tool.name)) return;
    this.wentOnTools.add(tool.name);
    this.logger.warn(
      `Task tool ${tool.name} went on after its task parked (its method caught TaskParked): ` +
        'what it did after the park is dropped, and it runs again when the task wakes; ' +
        'rethrow TaskParked (see docs/durable-steps.md)',
    );
  }

  private get shuttingDown(): boolean {
    return this.shutdown.aborted;
  }

  /**
   * Runs the method to its end and settles the task: one async frame per running call. `retry`
   * (queue jobs): given an error that is not a JSON-RPC error, true leaves the task as it is.
   */
  async execute({
    tool,
    input,
    context,
    call,
    firstInput,
    retry,
    request,
  }: CallRun): Promise<void> {
    const taskId = context.taskId;
    /** What the method threw when the task is left for the queue's next run. */
    let retried: unknown;
    try {
      try {
        if (firstInput !== undefined) {
          context.firstInput = firstInput;
        } else if (tool.options.requireInputFirst !== undefined) {
          const requests = await firstInputRequests(tool, input);
          if (requests !== undefined) context.firstInput = await context.requireInput(requests);
        }
        const value = await tool.invoke(input, context, request);
        context.close();
        if (context.isParked) return this.wentOn(tool);
        if (context.isHandedOff) return;
        if (call.movedTask) return this.movedTask(tool);
        if (call.lostTask) return this.lostTask(tool);
        // A call that gave up on the store still writes a result its tool returned.
        if (call.aborted && call.outage.givenUp === undefined) {
          if (this.shuttingDown) return;
          return await this.acknowledgeCancel(taskId, call);
        }
        const result = toCallToolResult(value);
        await this.settleOutcome(
          tool,
          () => this.tasks.complete(taskId, result, { known: call.latest }),
          call,
        );
      } catch (error) {
        context.close();
        // Parked (a long sleep, a wait for input): the task wakes when the sleep ends or the
        // answers come.
        if (context.isParked) return error instanceof TaskParked ? undefined : this.wentOn(tool);
        if (call.movedTask) return this.movedTask(tool);
        if (call.lostTask) return this.lostTask(tool);
        const gaveUp = call.outage.givenUp;
        if (call.aborted && gaveUp === undefined) {
          if (this.shuttingDown) return;
          return await this.acknowledgeCancel(taskId, call);
        }
        // The task says what stopped it: its store away past the window, a store fault thrown by
        // the tool's own code, or the tool's error (a thrown JSON-RPC error keeps its code;
        // anything else is a generic internal error).
        const storeFault = gaveUp === undefined && isStoreUnavailable(error);
        const failure =
          gaveUp?.toJsonRpcError() ?? (storeFault ? undefined : thrownJsonRpcError(error));
        if (failure === undefined && retry?.(error)) {
          retried = error;
          return;
        }
        if (failure === undefined && !storeFault) {
          this.logger.error(
            `Task tool ${tool.name} failed: ${(error as Error)?.stack ?? String(error)}`,
          );
        }
        await this.settleOutcome(
          tool,
          () =>
            this.tasks.fail(
              taskId,
              failure ??
                (storeFault
                  ? STORE_FAULT_FAILURE
                  : [ProtocolErrorCode.InternalError, INTERNAL_ERROR_MESSAGE]),
              { known: call.latest },
            ),
          call,
        );
      }
    } catch (error) {
      this.logger.error(`Task tool ${tool.name} could not settle its task: ${String(error)}`);
    } finally {
      context.close();
      call.stop();
      call.release();
      this.ended(taskId);
      call.traced?.end(call.latest, retried);
    }
  }

  /**
   * Notes a call whose task another instance took over (this instance's lease had run out while
   * it ran, and a durable call was resumed there): its outcome is dropped.
   */
  private movedTask(tool: TaskToolDefinition): void {
    this.logger.warn(
      `Task tool ${tool.name}: another instance took its task over (this instance's lease had ` +
        'run out); this run stops and its outcome is dropped',
    );
  }

  /**
   * Notes a call whose task expired or was deleted while it ran: its outcome is dropped. Logged
   * once, then at most once a minute with the count since, however many calls it stops.
   */
  lostTask(tool: TaskToolDefinition | undefined): void {
    this.lostTasks++;
    const now = Date.now();
    if (now - this.lostTasksLoggedAt < LOST_TASK_LOG_MS) return;
    this.lostTasksLoggedAt = now;
    this.logger.warn(
      `${this.lostTasks} call(s) stopped because their task expired or was deleted while they ` +
        `ran${tool === undefined ? '' : ` (the latest: task tool ${tool.name})`}; their outcome ` +
        "was dropped. A client's short " +
        'TTL (2025-11-25 task.ttl) ends its tasks this way; further ones are counted and logged ' +
        'at most once a minute',
    );
    this.lostTasks = 0;
  }

  /**
   * Awaits a write that settles a task; a failure that leaves it settled all the same (see
   * `settles`) is no failure.
   */
  async settle(write: Promise<TaskRecord>): Promise<void> {
    try {
      await write;
    } catch (error) {
      if (!settles(error)) throw error;
    }
  }

  /**
   * Writes the outcome of a call that ran here (its result, its error, its cancellation) as
   * `settle` does, and while the store is away writes it again with backoff, until the store
   * takes it, the task is gone or finished, or the app shuts down (the task then fails as every
   * running one does). The call stays running meanwhile, so its lease still holds it; a store
   * that stays away past `storeOutageMs` changes nothing here: the outcome is the call's own, and
   * the store takes it whenever it is back. The state written becomes the newest `call` has seen
   * (a queue job that did not listen hears none of its own writes; its span reads it).
   */
  private async settleOutcome(
    tool: TaskToolDefinition | undefined,
    write: () => Promise<TaskRecord>,
    call?: RunningCall,
  ): Promise<void> {
    const who = tool === undefined ? 'A cancelled call' : `Task tool ${tool.name}`;
    for (let delay = OUTAGE_RETRY_FIRST_MS, tries = 1; ; tries++) {
      try {
        const written = await write();
        call?.saw(written);
        if (tries > 1) this.logger.log(`${who} settled its task at try ${tries}`);
        return;
      } catch (error) {
        if (settles(error)) return;
        // Gone meanwhile (expired or deleted): nothing is left to settle.
        if (error instanceof TaskNotFoundError) return this.lostTask(tool);
        if (!isStoreUnavailable(error) || this.shuttingDown) throw error;
        if (tries === 1) {
          this.logger.warn(`${who} could not settle its task yet (the store is away): retrying`);
        }
        try {
          await sleep(jittered(delay), undefined, { signal: this.shutdown });
        } catch {
          throw error;
        }
        delay = backoff(delay);
      }
    }
  }

  /** A cancel the call honoured: in cooperative mode the task is marked cancelled. */
  async acknowledgeCancel(taskId: string, call?: RunningCall): Promise<void> {
    if (this.config.cancellation === 'cooperative') {
      await this.settleOutcome(undefined, () => this.tasks.markCancelled(taskId), call);
    }
  }
}
