import type { CallToolResult } from '@modelcontextprotocol/client';
import type { JsonValue } from '@modelcontextprotocol/ext-tasks/core';
import {
  TaskCancelledError,
  TaskFailedError,
  type TaskExecutionEvent,
  type TaskView,
  type ToolExecution,
} from '@modelcontextprotocol/ext-tasks/client';
import type { TaskState } from '../task/record.js';
import { type DetachReason, TaskDetachedError } from './errors.js';
import { findUnreachable, rethrowUnreachable, type TaskServerUnreachableError } from './retry.js';

export type { TaskState };

/** One observed state of a task (what `tasks/get` or a `notifications/tasks` said). */
export interface TaskSnapshot {
  readonly taskId: string;
  readonly status: TaskState;
  readonly statusMessage?: string;
  readonly createdAt?: string;
  readonly lastUpdatedAt?: string;
  /** How long the server keeps the task (`null`: no limit). */
  readonly ttlMs: number | null;
  /** How often the server suggests polling it. */
  readonly pollIntervalMs?: number;
  /** The task as it came over the wire (with `inputRequests`, `result` or `error` by status). */
  readonly raw: Readonly<Record<string, JsonValue>>;
}

/**
 * How a call ended, without throwing: the task's own end (`completed`, `failed`, `cancelled`), or
 * the client's, when it could not follow the task to its end (then the task's end is unknown: it
 * may still run on the server). `detached`: the client stopped following it (`detach()`,
 * `close()`) and left it running. `unreachable`: the server stayed away
 * longer than the client's `retry.windowMs`. `error`: a request about the task was answered with
 * an error that trying again would not mend, such as the JSON-RPC error -32602 "Task not found" of
 * a server that lost the task in a restart (a `JsonRpcResponseError`), an HTTP 401, or an input
 * the client could not take.
 */
export type TaskCallOutcome =
  | { readonly status: 'completed'; readonly result: CallToolResult }
  | { readonly status: 'failed'; readonly error: TaskFailedError }
  | { readonly status: 'cancelled'; readonly error: TaskCancelledError }
  | { readonly status: 'detached'; readonly error: TaskDetachedError }
  | { readonly status: 'unreachable'; readonly error: TaskServerUnreachableError }
  | { readonly status: 'error'; readonly error: Error };

export type StatusListener = (task: TaskSnapshot) => void;

/** Turns the session's task view into the snapshot users see. */
export function toSnapshot(view: TaskView): TaskSnapshot {
  return {
    taskId: view.taskId,
    status: view.status,
    ...(view.statusMessage !== undefined && { statusMessage: view.statusMessage }),
    ...(view.createdAt !== undefined && { createdAt: view.createdAt }),
    ...(view.lastUpdatedAt !== undefined && { lastUpdatedAt: view.lastUpdatedAt }),
    ttlMs: view.retentionMs,
    ...(view.suggestedPollIntervalMs !== undefined && {
      pollIntervalMs: view.suggestedPollIntervalMs,
    }),
    raw: view.raw,
  };
}

const isTerminal = (status: TaskState): boolean =>
  status === 'completed' || status === 'failed' || status === 'cancelled';

/** What a call handle needs from the client that made it. */
export interface CallHooks {
  /** Reads the task now (`tasks/get`). */
  read(taskId: string): Promise<TaskSnapshot>;
  /** Why the client cancelled this task itself (an input it could not give), if it did. */
  refusal(taskId: string): TaskCancelledError | undefined;
  /** Errors thrown by status listeners. */
  report(error: Error): void;
  /** Called once, when the call has settled. */
  settled(): void;
  /** The caller's signal for this call: aborted, it cancels the task; `result()` rejects with its reason. */
  signal?: AbortSignal | undefined;
  /** The endpoint, named by {@link TaskDetachedError}. */
  url: string;
}

/**
 * One `tools/call`: a task the client follows to its end, or the immediate result of a tool that
 * answered at once (then `taskId` is undefined and no status is ever reported).
 */
export class TaskCall implements AsyncIterable<TaskSnapshot> {
  /** The task's id; undefined when the server answered at once. */
  readonly taskId: string | undefined;
  private readonly history: TaskSnapshot[] = [];
  private readonly listeners = new Set<StatusListener>();
  private readonly wakers = new Set<() => void>();
  private done = false;
  /** Rejects with the abort reason of the call's signal, once it aborts while the call runs. */
  private readonly aborted: Promise<never>;
  private rejectAborted!: (reason: unknown) => void;
  private stopped = false;
  private readonly outcomePromise: Promise<TaskCallOutcome>;
  /** Settles the call as detached, whatever the session is still doing. */
  private settleDetached!: (outcome: TaskCallOutcome) => void;
  /** Resolves once the session has let go of the task (its own wait has ended). */
  private readonly released: Promise<void>;

  constructor(
    /**
     * The official session's execution behind this call (for what this handle does not cover).
     * Its `close()` only stops following, as {@link detach} does: it never cancels the task.
     */
    readonly execution: ToolExecution<unknown>,
    private readonly hooks: CallHooks,
  ) {
    this.taskId = execution.kind === 'task' ? execution.handle.taskId : undefined;
    // A detach settles the call at once, without waiting for the session: a wait that ends when
    // the session notices (after a request in flight, an input handler) could hang or lose the
    // race to a completion, and the caller must know, the moment detach() returns, what result()
    // gives. The session's own end is then ignored.
    const detached = new Promise<TaskCallOutcome>((resolve) => (this.settleDetached = resolve));
    const followed = execution.settle({ onEvent: (event) => this.observe(event) }).then(
      ({ outcome }) => this.toOutcome(outcome),
      (error: unknown) => this.toOutcome({ status: 'failed', error: asFailure(error) }),
    );
    this.outcomePromise = Promise.race([followed, detached]).finally(() => {
      this.done = true;
      this.wake();
      hooks.settled();
    });
    void this.outcomePromise.catch(() => undefined);
    this.released = execution.result().then(
      () => undefined,
      () => undefined,
    );
    const { signal } = hooks;
    this.aborted = new Promise<never>((_, reject) => (this.rejectAborted = reject));
    void this.aborted.catch(() => undefined);
    if (this.taskId !== undefined && signal !== undefined) {
      const onAbort = (): void => this.abort(signal.reason);
      if (signal.aborted) onAbort();
      else {
        signal.addEventListener('abort', onAbort, { once: true });
        void this.outcomePromise.finally(() => signal.removeEventListener('abort', onAbort));
      }
    }
  }

  /**
   * The call's signal aborted while the task ran: cancelling is what the caller asked for, as an
   * aborted request of the SDK clients is cancelled on the server. `tasks/cancel` is sent, the
   * wait of `result()` ends at once with the abort reason, and the call follows the task on to
   * the end the server gives it (`outcome()`: `cancelled`, or `completed` when it ended first).
   */
  private abort(reason: unknown): void {
    if (this.done || this.stopped) return;
    this.rejectAborted(reason);
    void this.cancel().catch((error: unknown) => {
      // The task ended first (the server refuses to cancel a finished task): nothing to report.
      if (this.done) return;
      this.hooks.report(error instanceof Error ? error : new Error(String(error)));
    });
  }

  /** True when the server answered with a task (false: an immediate result). */
  get isTask(): boolean {
    return this.taskId !== undefined;
  }

  /** The latest status seen (undefined for an immediate result). */
  get status(): TaskSnapshot | undefined {
    return this.history.at(-1);
  }

  /**
   * Calls `listener` with the latest status at once (if one is known) and then with every change
   * of status or status message, until the task ends. Returns a function that removes it.
   */
  onStatus(listener: StatusListener): () => void {
    this.listeners.add(listener);
    const latest = this.status;
    if (latest !== undefined) this.call(listener, latest);
    return () => this.listeners.delete(listener);
  }

  /**
   * Every status change from the first, then live ones until the task ends (`for await (const
   * task of call)`). Each iteration starts from the beginning.
   */
  async *[Symbol.asyncIterator](): AsyncIterator<TaskSnapshot> {
    let index = 0;
    for (;;) {
      while (index < this.history.length) yield this.history[index++]!;
      if (this.done) return;
      await new Promise<void>((resolve) => this.wakers.add(resolve));
    }
  }

  /**
   * Asks the server to cancel the task (`tasks/cancel`); `result()` then rejects cancelled.
   * Rejects with `TaskServerUnreachableError` when the server stayed away.
   */
  async cancel(): Promise<void> {
    await this.execution.cancel().catch(rethrowUnreachable);
  }

  /**
   * Stops following the task and leaves it running on the server: no `tasks/cancel` is sent.
   * From the moment it is called, `result()` rejects with {@link TaskDetachedError} (and
   * `outcome()` gives `{ status: 'detached', error }`), unless the call had already settled: then
   * it changes nothing. It waits for nothing (not even an input handler still running), so it
   * cannot hang; `follow(taskId)` on the same client takes the task up again once the session has
   * let go of it. Idempotent; nothing to do for an immediate result.
   */
  detach(): Promise<void> {
    this.stopFollowing('detach');
    return Promise.resolve();
  }

  /** @internal Stops following for `reason` (the client's `close()` uses it for every call). */
  stopFollowing(reason: DetachReason): void {
    if (this.done || this.stopped || this.taskId === undefined) return;
    this.stopped = true;
    this.settleDetached({
      status: 'detached',
      error: new TaskDetachedError(this.taskId, this.hooks.url, reason),
    });
    // Stops the session's polling and input answers; the session cancels nothing on detach.
    void this.execution.detach().catch((error: unknown) => {
      this.hooks.report(error instanceof Error ? error : new Error(String(error)));
    });
  }

  /** @internal Whether the client still follows the task (not settled, not detached). */
  get following(): boolean {
    return this.taskId !== undefined && !this.done && !this.stopped;
  }

  /** @internal Resolves once the session has let go of the task. */
  get settledInSession(): Promise<void> {
    return this.released;
  }

  /** Reads the task from the server now (`tasks/get`), e.g. its final status after a cancel. */
  async snapshot(): Promise<TaskSnapshot> {
    if (this.taskId === undefined) throw new Error('The tool answered at once: there is no task');
    return this.hooks.read(this.taskId);
  }

  /**
   * The tool's `CallToolResult` once the task completed (a result with `isError: true` included).
   * Rejects with `TaskFailedError` (`code`, `data`: the JSON-RPC error) when the task failed, and
   * only then; `TaskCancelledError` when it was cancelled; `TaskServerUnreachableError` when the
   * server stayed away longer than `retry.windowMs`; the error of the request that failed when the
   * client could not follow the task (see {@link TaskCallOutcome}); `TaskDetachedError` when the
   * client stopped following it (`detach()`, `close()`); or, at once, the abort reason of the
   * call's `signal` (which cancels the task: see {@link CallToolOptions.signal}).
   */
  async result(): Promise<CallToolResult> {
    const outcome = await Promise.race([this.outcomePromise, this.aborted]);
    if (outcome.status === 'completed') return outcome.result;
    throw outcome.error;
  }

  /** How the call ended, without throwing. */
  outcome(): Promise<TaskCallOutcome> {
    return this.outcomePromise;
  }

  private observe(event: TaskExecutionEvent<unknown>): void {
    if (event.type !== 'task') return;
    const snapshot = toSnapshot(event.task);
    const last = this.status;
    if (
      last !== undefined &&
      (isTerminal(last.status) ||
        (last.status === snapshot.status && last.statusMessage === snapshot.statusMessage))
    ) {
      return;
    }
    this.history.push(snapshot);
    for (const listener of [...this.listeners]) this.call(listener, snapshot);
    this.wake();
  }

  private call(listener: StatusListener, snapshot: TaskSnapshot): void {
    try {
      listener(snapshot);
    } catch (error) {
      this.hooks.report(error instanceof Error ? error : new Error(String(error)));
    }
  }

  private wake(): void {
    for (const wake of this.wakers) wake();
    this.wakers.clear();
  }

  private toOutcome(outcome: {
    status: 'completed' | 'failed' | 'cancelled';
    result?: unknown;
    error?: TaskFailedError;
    task?: { status: string };
  }): TaskCallOutcome {
    if (outcome.status === 'completed') {
      return { status: 'completed', result: outcome.result as CallToolResult };
    }
    if (outcome.status === 'failed') {
      const failure = outcome.error ?? new TaskFailedError('Task failed');
      const unreachable = findUnreachable(failure);
      if (unreachable !== undefined) return { status: 'unreachable', error: unreachable };
      // The session reports as a failure whatever ended its wait; the task failed only when the
      // server said so (a `failed` snapshot). An answer at once has no task: its failure stays.
      if (this.taskId === undefined || outcome.task?.status === 'failed') {
        return { status: 'failed', error: failure };
      }
      return { status: 'error', error: causeOf(failure) };
    }
    const refused = this.taskId === undefined ? undefined : this.hooks.refusal(this.taskId);
    return { status: 'cancelled', error: refused ?? new TaskCancelledError() };
  }
}

/** The error behind the session's TaskFailedError (the request's own), or a plain Error. */
function causeOf(failure: TaskFailedError): Error {
  const { cause } = failure;
  if (cause !== null && typeof cause === 'object' && typeof (cause as Error).message === 'string') {
    return cause as Error;
  }
  return new Error(failure.message, { cause: failure });
}

function asFailure(error: unknown): TaskFailedError {
  if (error instanceof TaskFailedError) return error;
  return new TaskFailedError(
    error instanceof Error ? error.message : String(error),
    {},
    error instanceof Error ? { cause: error } : undefined,
  );
}
