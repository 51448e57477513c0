import type {
  Client,
  McpSubscription,
  SubscriptionFilter,
  Tool,
} from '@modelcontextprotocol/client';
import type { JsonValue, TaskId } from '@modelcontextprotocol/ext-tasks/core';
import type {
  TaskCancelledError,
  TaskEnabledSession,
  ToolExecution,
} from '@modelcontextprotocol/ext-tasks/client';
import type { InputHandlers, InputRefusedError } from './input.js';
import { PROTOCOL_VERSION } from './raw-dispatch.js';
import {
  Backoff,
  listenOutage,
  rethrowUnreachable,
  type RetryOptions,
  type RetryPolicy,
} from './retry.js';
import type { ConnectionOptions, OpenSession } from './session.js';
import { TaskCall, type TaskSnapshot, toSnapshot } from './tool-call.js';

export interface TasksClientOptions extends ConnectionOptions {
  /** Answers the tasks' input requests (elicitation, sampling, roots); see {@link InputHandlers}. */
  onInput?: InputHandlers;
  /**
   * Follow each task over a `subscriptions/listen` stream (default `true`): changes arrive the
   * moment they happen. The session polls `tasks/get` at the server's `pollIntervalMs` as well,
   * and alone when the server offers no stream.
   */
  listen?: boolean;
  /**
   * Riding out a server that restarts or blips (default `{ windowMs: 60_000, initialDelayMs:
   * 250, maxDelayMs: 5_000 }`): while a connection is refused or dropped, or a gateway answers
   * 502, 503 or 504, `tasks/get`, `tasks/update` and `tasks/cancel` are tried again with
   * exponential backoff and jitter for `windowMs` from the first failure, and a dropped listen
   * stream is reopened (then the task is read once, so no change is missed). `tools/call` is tried
   * again only when the connection was refused (nothing was sent). Past the window the wait
   * rejects with `TaskServerUnreachableError`. `false`: one try, no retry.
   */
  retry?: RetryOptions | false;
}

export interface CallToolOptions extends FollowOptions {
  /**
   * Cancels the call, as aborting a request of the SDK clients does: before the task exists, the
   * call is abandoned (a task created anyway is cancelled, since nobody holds its id); after,
   * `tasks/cancel` is sent and `result()` rejects at once with the abort reason, while `outcome()`
   * follows the task to the end the server gives it. To stop waiting and leave the task running,
   * use `detach()` instead.
   */
  signal?: AbortSignal;
  /**
   * Asks the server to keep the task this long. Sent only where the session supports a
   * client-requested retention (`supportsTtl`); the 2026-07-28 Tasks extension has none, and there
   * the tool's own TTL applies.
   */
  ttlMs?: number;
}

/** Options of {@link TasksClient.follow}. */
export interface FollowOptions {
  /**
   * Cancels the task (`tasks/cancel`) when it aborts: `result()` rejects at once with the abort
   * reason. To stop waiting and leave the task running, use `detach()`.
   */
  signal?: AbortSignal;
  /** Headers for this task's requests only (its `tasks/*` and its listen stream). */
  headers?: Readonly<Record<string, string>>;
}

/** A task snapshot's wire shape, as a `notifications/tasks` carries it. */
type WireTask = Readonly<Record<string, JsonValue>>;

/**
 * A connection to an MCP server that serves the Tasks extension: `callTool` returns a
 * {@link TaskCall} that follows the task (over a listen stream where offered, polling otherwise),
 * answers its input requests with `onInput`, cancels it, and yields its result.
 */
export class TasksClient implements AsyncDisposable {
  /** The endpoint. */
  readonly url: URL;
  /** The protocol revision in use (always 2026-07-28). */
  readonly protocolVersion = PROTOCOL_VERSION;
  private readonly subscriptions = new Set<AbortController>();
  /** The calls still followed: `close()` detaches them. */
  private readonly calls = new Set<TaskCall>();
  private readonly refusals: Map<string, InputRefusedError>;
  private readonly retry: RetryPolicy;
  private closing: Promise<void> | undefined;
  /** Per task followed, when the session lets go of it (what `follow` waits for). */
  private readonly letGo = new Map<string, Promise<void>>();

  /** @internal Use {@link connectTasksClient}. */
  constructor(
    url: URL,
    private readonly opened: OpenSession,
    private readonly options: TasksClientOptions,
    refusals: Map<string, InputRefusedError>,
    retry: RetryPolicy,
  ) {
    this.url = url;
    this.refusals = refusals;
    this.retry = retry;
  }

  /** The SDK client, connected: for `listTools`, prompts, resources and plain calls. */
  get client(): Client {
    return this.opened.client;
  }

  /** The official Tasks session (`@modelcontextprotocol/ext-tasks`) under this client. */
  get session(): TaskEnabledSession {
    return this.opened.session;
  }

  /** Whether `callTool(…, { ttlMs })` reaches the server. */
  get supportsTtl(): boolean {
    return this.opened.session.capabilities.requestedRetention;
  }

  /**
   * Calls a tool. Resolves as soon as the server answered: with a task (`call.taskId`), which the
   * client then follows to its end, or with an immediate result. Rejects with the JSON-RPC error
   * when the server refuses the call itself, and with `TaskServerUnreachableError` when the
   * connection stayed refused for `retry.windowMs`. A call whose request may have reached the
   * server (a connection dropped while it was sent, a gateway error) is not sent again: it
   * rejects at once.
   */
  async callTool(
    name: string,
    args?: Readonly<Record<string, unknown>>,
    options: CallToolOptions = {},
  ): Promise<TaskCall> {
    this.assertOpen();
    const pending = untilAnswered(options.signal);
    const execution = await this.opened.session
      .callTool(name, args as Readonly<Record<string, JsonValue>> | undefined, {
        ...(pending !== undefined && { signal: pending.signal }),
        ...(options.headers !== undefined && { headers: options.headers }),
        ...(options.ttlMs !== undefined && { task: { retentionMs: options.ttlMs } }),
      })
      .catch(rethrowUnreachable)
      .finally(() => pending?.answered());
    return this.track(execution, options);
  }

  /**
   * Follows a task of this principal by id, as `callTool` follows the task it made: one started
   * by another process, by a client that was closed, or let go with `detach()`. Resolves once
   * `tasks/get` has read it; rejects with the JSON-RPC error -32602 (a `JsonRpcResponseError`)
   * when the server has no such task for this principal, and with `TaskServerUnreachableError`
   * when the server stayed away for `retry.windowMs`.
   */
  async follow(taskId: string, options: FollowOptions = {}): Promise<TaskCall> {
    this.assertOpen();
    for (const call of this.calls) {
      if (call.taskId === taskId && call.following) {
        throw new Error(
          `This client already follows task ${taskId}: use its TaskCall, or detach() it first`,
        );
      }
    }
    // The session takes a task once at a time: after a detach, it lets go first.
    await this.letGo.get(taskId);
    const pending = untilAnswered(options.signal);
    const execution = await this.opened.session
      .resumeTask(
        {
          endpointId: this.opened.session.endpointId,
          generation: 'v2',
          taskId: taskId as TaskId,
          originalOperation: 'tools/call',
        },
        {
          ...(pending !== undefined && { signal: pending.signal }),
          ...(options.headers !== undefined && { headers: options.headers }),
        },
      )
      .catch(rethrowUnreachable)
      .finally(() => pending?.answered());
    return this.track(execution, options);
  }

  /** Wraps an execution of the session in a {@link TaskCall} and follows it over listen streams. */
  private track(execution: ToolExecution<unknown>, options: FollowOptions): TaskCall {
    if (execution.kind === 'task') {
      // The session cancels, when it closes, every task it still follows (its executions'
      // `close()` does). A client's close() must not: closing an execution only lets go of it.
      Object.defineProperty(execution, 'close', { value: () => execution.detach() });
    }
    let stop: (() => void) | undefined;
    const call: TaskCall = new TaskCall(execution, {
      read: (taskId) => this.getTask(taskId, options.headers),
      refusal: (taskId) => this.takeRefusal(taskId),
      report: (error) => this.report(error),
      settled: () => {
        stop?.();
        this.calls.delete(call);
      },
      signal: options.signal,
      url: this.url.href,
    });
    if (call.taskId !== undefined) {
      const { taskId } = call;
      this.calls.add(call);
      const released = call.settledInSession.finally(() => {
        if (this.letGo.get(taskId) === released) this.letGo.delete(taskId);
      });
      this.letGo.set(taskId, released);
      if (this.options.listen !== false) stop = this.listen(taskId, options.headers);
    }
    return call;
  }

  /** Every tool the server lists (all pages of `tools/list`). */
  async listTools(): Promise<Tool[]> {
    const tools: Tool[] = [];
    let cursor: string | undefined;
    do {
      const page = await this.opened.client.listTools(cursor === undefined ? {} : { cursor });
      tools.push(...page.tools);
      cursor = page.nextCursor;
    } while (cursor !== undefined);
    return tools;
  }

  /**
   * Reads a task of this principal by id (`tasks/get`), e.g. one started by another process.
   * Rejects with `TaskServerUnreachableError` when the server stayed away for `retry.windowMs`.
   */
  async getTask(taskId: string, headers?: Readonly<Record<string, string>>): Promise<TaskSnapshot> {
    const view = await this.opened.session
      .task(taskId as TaskId, headers === undefined ? {} : { headers })
      .snapshot()
      .catch(rethrowUnreachable);
    return toSnapshot(view);
  }

  /** Asks the server to cancel a task of this principal by id (`tasks/cancel`). */
  async cancelTask(taskId: string, headers?: Readonly<Record<string, string>>): Promise<void> {
    await this.opened.session
      .task(taskId as TaskId, headers === undefined ? {} : { headers })
      .cancel()
      .catch(rethrowUnreachable);
  }

  /**
   * Closes the connection, as the SDK clients' `close()` does, and leaves the tasks running on the
   * server: no `tasks/cancel` is sent. The waits of the calls still followed end at once:
   * `result()` rejects with `TaskDetachedError` (`outcome()`: `detached`); read those tasks later
   * with `getTask(taskId)` or `follow(taskId)` on a new client. A `callTool` still waiting for the
   * server's answer rejects (a task made for it anyway is cancelled, since nobody holds its id).
   * Then the listen streams, the session and the SDK client are closed. Idempotent.
   */
  close(): Promise<void> {
    this.closing ??= (async () => {
      for (const call of this.calls) call.stopFollowing('close');
      this.calls.clear();
      for (const subscription of this.subscriptions) subscription.abort();
      this.subscriptions.clear();
      await this.opened.close();
    })();
    return this.closing;
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  /**
   * Listens to one task over listen streams. Its `notifications/tasks` reach the SDK client, whose
   * fallback notification handler hands them to the session, which wakes the task at once. After
   * each acknowledgement one `tasks/get` catches up on what changed while no stream was open. A
   * stream that drops (the server restarts) is reopened with the retry backoff, for as long as the
   * retry window allows. A server that refuses the stream (a JSON-RPC error, an HTTP error other
   * than a gateway's) or stays away past the window, or a read that fails (the task is gone),
   * leaves the task to the session's polling. Returns what stops it.
   */
  private listen(
    taskId: string,
    headers: Readonly<Record<string, string>> | undefined,
  ): () => void {
    const controller = new AbortController();
    this.subscriptions.add(controller);
    let subscription: McpSubscription | undefined;
    const stop = (): void => {
      this.subscriptions.delete(controller);
      controller.abort();
      void subscription?.close().catch(() => undefined);
    };
    void this.listenTo(taskId, headers, controller.signal, (opened) => (subscription = opened))
      .catch(() => undefined)
      .finally(stop);
    return stop;
  }

  /** The streams of {@link listen}, one after another; resolves when it stops following. */
  private async listenTo(
    taskId: string,
    headers: Readonly<Record<string, string>> | undefined,
    signal: AbortSignal,
    opened: (subscription: McpSubscription) => void,
  ): Promise<void> {
    // `taskIds` is the tasks extension's filter, unknown to the SDK's own type.
    const filter = { taskIds: [taskId] } as SubscriptionFilter;
    const backoff = new Backoff(this.retry);
    for (;;) {
      let subscription: McpSubscription;
      try {
        subscription = await this.opened.client.listen(filter, {
          signal,
          ...(headers !== undefined && { headers }),
        });
      } catch (error) {
        if (signal.aborted || listenOutage(error) === undefined) return;
        if (await backoff.next(signal)) continue;
        return;
      }
      opened(subscription);
      backoff.answered();
      const since = Date.now();
      if (signal.aborted) {
        await subscription.close();
        return;
      }
      await this.catchUp(taskId, headers, signal);
      const cause = await subscription.closed;
      if (signal.aborted || cause === 'local') return;
      // Dropped by the server (a restart ends every stream) or the network: open another.
      if (Date.now() - since >= this.retry.maxDelayMs) backoff.calm();
      if (!(await backoff.next(signal))) return;
    }
  }

  /** Reads the task once and hands it to the session as if a stream had carried it. */
  private async catchUp(
    taskId: string,
    headers: Readonly<Record<string, string>> | undefined,
    signal: AbortSignal,
  ): Promise<void> {
    const now = await this.getTask(taskId, headers);
    if (signal.aborted) return;
    const {
      resultType: _resultType,
      _meta,
      ...task
    } = now.raw as WireTask & {
      resultType?: unknown;
      _meta?: unknown;
    };
    // The session validates the whole JSON-RPC notification, as it arrives off the stream.
    const notification = { jsonrpc: '2.0', method: 'notifications/tasks', params: task };
    await this.opened.client.fallbackNotificationHandler?.(
      notification as { method: string; params: WireTask },
    );
  }

  private assertOpen(): void {
    if (this.closing !== undefined) throw new Error(`The client for ${this.url.href} is closed`);
  }

  private takeRefusal(taskId: string): TaskCancelledError | undefined {
    const refusal = this.refusals.get(taskId);
    this.refusals.delete(taskId);
    return refusal;
  }

  private report(error: Error): void {
    try {
      if (this.options.onError === undefined) console.error(error);
      else this.options.onError(error);
    } catch (sinkError) {
      console.error(sinkError);
    }
  }
}

/**
 * The caller's signal as the session sees it: until the server has answered only. The session
 * stops waiting when its signal aborts; after the answer, the call handles an abort itself (it
 * cancels the task, see {@link TaskCall}), so the session must keep following to see that end.
 */
function untilAnswered(
  signal: AbortSignal | undefined,
): { signal: AbortSignal; answered(): void } | undefined {
  if (signal === undefined) return undefined;
  const controller = new AbortController();
  const abort = (): void => controller.abort(signal.reason);
  if (signal.aborted) abort();
  else signal.addEventListener('abort', abort, { once: true });
  return {
    signal: controller.signal,
    answered: () => signal.removeEventListener('abort', abort),
  };
}
