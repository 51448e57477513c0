import { type BeforeApplicationShutdown, Inject, Injectable, Logger } from '@nestjs/common';
import { ProtocolErrorCode } from '@modelcontextprotocol/server';
import { INTERNAL_ERROR_MESSAGE, TaskTerminalError } from '../errors.js';
import {
  type CallToolResult,
  type InputRequest,
  type InputResponse,
  isCancellationRequested,
  isTerminal,
  type TaskOwner,
  type TaskRecord,
  thrownJsonRpcError,
  toCallToolResult,
  validateInputRequests,
} from '../task.js';
import { TASKS_CONFIG } from '../tasks.constants.js';
import type { TasksConfig } from '../interfaces/tasks-module-options.interface.js';
import { TasksService } from '../tasks.service.js';
import { RunningTaskContext } from './task-context.js';
import type { TaskToolDefinition } from './task-tool.registry.js';
import { WaiterFeed } from '../notify/waiter-feed.js';
import { TaskWatch, waitForTask } from './task-watch.js';

class TaskCancelled extends Error {
  constructor() {
    super('The task was cancelled');
    this.name = 'AbortError';
  }
}

/**
 * One running call: its signal, the promise of its end, and the watch that aborts the signal when
 * the task is cancelled (here or in another process) or gone. The abort controller behind the
 * signal is made when someone first reads the signal (about 800 bytes in Node 20, with a
 * listener): a method that never looks at it costs none.
 */
class RunningCall extends TaskWatch {
  /** Set by the runner as soon as the call starts. */
  done!: Promise<void>;
  private controller: AbortController | undefined;
  private abortedWith: { reason: unknown } | undefined;

  constructor(tasks: TasksService, waiters: WaiterFeed, taskId: string, pollMs: number | null) {
    super(tasks, waiters, taskId, pollMs);
    this.watch();
  }

  get signal(): AbortSignal {
    if (this.controller === undefined) {
      this.controller = new AbortController();
      if (this.abortedWith) this.controller.abort(this.abortedWith.reason);
    }
    return this.controller.signal;
  }

  get aborted(): boolean {
    return this.abortedWith !== undefined;
  }

  /** Aborts the signal (the first reason stays), whether or not it was read yet. */
  abort(reason: unknown): void {
    if (this.abortedWith) return;
    this.abortedWith = { reason };
    this.controller?.abort(reason);
  }

  protected matches(task: TaskRecord): boolean {
    return isCancellationRequested(task) || isTerminal(task.status);
  }

  protected matched(task: TaskRecord): void {
    if (isCancellationRequested(task)) this.abort(new TaskCancelled());
  }

  protected gone(): void {
    this.abort(new TaskCancelled());
  }
}

/**
 * Runs `@TaskTool` methods. The task is created and stored first; the method then runs in the
 * background with a TaskContext. Its return value completes the task; a thrown JSON-RPC error
 * fails it with that code; any other throw fails it with -32603 and a generic message (the error
 * is logged here, never sent). Work that ends after a cancel leaves the task cancelled.
 */
@Injectable()
export class TaskToolRunner implements BeforeApplicationShutdown {
  private readonly logger = new Logger('TaskToolRunner');
  private readonly running = new Map<string, RunningCall>();
  /** Set at shutdown: ending calls then leave their tasks as shutdown decided. */
  private shuttingDown = false;

  constructor(
    private readonly tasks: TasksService,
    private readonly waiters: WaiterFeed,
    @Inject(TASKS_CONFIG) private readonly config: TasksConfig,
  ) {}

  /** How many tool calls run in this process now. */
  get size(): number {
    return this.running.size;
  }

  /**
   * Creates the task (readable before this resolves) and starts the method. `requestedTtlMs` is
   * the TTL the client asked for (2025-11-25 `task.ttl`), in place of the tool's; the module's
   * `maxTtlMs` caps both. `firstInput`: the answers to the tool's `requireInputFirst` gathered
   * before the task (2026-07-28 multi round-trip); without them the task asks them first.
   */
  async start(
    tool: TaskToolDefinition,
    input: unknown,
    owner: TaskOwner,
    requestedTtlMs?: number,
    firstInput?: Readonly<Record<string, InputResponse>>,
  ): Promise<TaskRecord> {
    const record = await this.create(tool, owner, requestedTtlMs);
    this.run(tool, input, record, false, firstInput);
    return record;
  }

  /** The requests of the tool's `requireInputFirst` for this input, or none. */
  async firstInputRequests(
    tool: TaskToolDefinition,
    input: unknown,
  ): Promise<Record<string, InputRequest> | undefined> {
    const ask = tool.options.requireInputFirst;
    const requests = typeof ask === 'function' ? await ask(input) : ask;
    if (requests === undefined || Object.keys(requests).length === 0) return undefined;
    return validateInputRequests(requests);
  }

  /** For a client without the tasks extension: runs the method to the end, answers its result. */
  async runInline(
    tool: TaskToolDefinition,
    input: unknown,
    owner: TaskOwner,
  ): Promise<CallToolResult> {
    const record = await this.create(tool, owner);
    this.run(tool, input, record, true);
    const end = await waitForTask(
      this.tasks,
      this.waiters,
      record.taskId,
      (task) => isTerminal(task.status),
      {
        pollMs: this.pollMs(tool),
      },
    );
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

  /**
   * Ends every call still running: its signal fires, and (option `runningTasksOnShutdown`,
   * default `'fail'`) its task fails with a clear error, or is left for another instance.
   */
  async beforeApplicationShutdown(): Promise<void> {
    const running = [...this.running.entries()];
    this.shuttingDown = true;
    const leave = this.config.runningTasksOnShutdown === 'leave';
    await Promise.all(
      running.map(async ([taskId, call]) => {
        if (!leave) {
          await this.tasks
            .fail(taskId, [
              ProtocolErrorCode.InternalError,
              'The server shut down before the task finished',
            ])
            .catch(() => undefined);
        }
        call.abort(new Error('The server is shutting down'));
        await call.done;
      }),
    );
  }

  private create(
    tool: TaskToolDefinition,
    owner: TaskOwner,
    requestedTtlMs?: number,
  ): Promise<TaskRecord> {
    const { pollIntervalMs, statusMessage } = tool.options;
    const ttlMs = requestedTtlMs ?? tool.options.ttlMs;
    return this.tasks.create(owner, {
      ...(ttlMs !== undefined && { ttlMs }),
      ...(pollIntervalMs !== undefined && { pollIntervalMs }),
      ...(statusMessage !== undefined && { statusMessage }),
    });
  }

  private pollMs(tool: TaskToolDefinition): number | null {
    return this.tasks.rereadMs(tool.options.pollIntervalMs);
  }

  private run(
    tool: TaskToolDefinition,
    input: unknown,
    record: TaskRecord,
    inline: boolean,
    firstInput?: Readonly<Record<string, InputResponse>>,
  ): void {
    const { taskId } = record;
    const pollMs = this.pollMs(tool);
    const call = new RunningCall(this.tasks, this.waiters, taskId, pollMs);
    const context = new RunningTaskContext(
      this.tasks,
      this.waiters,
      taskId,
      record.owner,
      call,
      inline,
      pollMs,
    );
    this.running.set(taskId, call);
    call.done = this.execute(tool, input, context, call, firstInput);
  }

  /** Runs the method to its end and settles the task: one async frame per running call. */
  private async execute(
    tool: TaskToolDefinition,
    input: unknown,
    context: RunningTaskContext,
    call: RunningCall,
    firstInput: Readonly<Record<string, InputResponse>> | undefined,
  ): Promise<void> {
    const taskId = context.taskId;
    try {
      try {
        if (firstInput !== undefined) {
          context.firstInput = firstInput;
        } else if (tool.options.requireInputFirst !== undefined) {
          const requests = await this.firstInputRequests(tool, input);
          if (requests !== undefined) context.firstInput = await context.requireInput(requests);
        }
        const value = await tool.invoke(input, context);
        if (context.isHandedOff) return;
        if (call.aborted) {
          if (this.shuttingDown) return;
          return await this.acknowledgeCancel(taskId);
        }
        await this.settle(this.tasks.complete(taskId, toCallToolResult(value)));
      } catch (error) {
        if (call.aborted) {
          if (this.shuttingDown) return;
          return await this.acknowledgeCancel(taskId);
        }
        // A thrown JSON-RPC error keeps its code; anything else is a generic internal error.
        const failure = thrownJsonRpcError(error);
        if (failure === undefined) {
          this.logger.error(
            `Task tool ${tool.name} failed: ${(error as Error)?.stack ?? String(error)}`,
          );
        }
        await this.settle(
          this.tasks.fail(
            taskId,
            failure ?? [ProtocolErrorCode.InternalError, INTERNAL_ERROR_MESSAGE],
          ),
        );
      }
    } catch (error) {
      this.logger.error(`Task tool ${tool.name} could not settle its task: ${String(error)}`);
    } finally {
      call.stop();
      this.running.delete(taskId);
    }
  }

  /** A task finished by someone else meanwhile (cancelled, failed at shutdown) stays as it is. */
  private async settle(write: Promise<TaskRecord>): Promise<void> {
    try {
      await write;
    } catch (error) {
      if (!(error instanceof TaskTerminalError)) throw error;
    }
  }

  private async acknowledgeCancel(taskId: string): Promise<void> {
    if (this.config.cancellation === 'cooperative') {
      await this.settle(this.tasks.markCancelled(taskId));
    }
  }
}
