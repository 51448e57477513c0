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
} from '@modelcontextprotocol/ext-tasks/client';
import { TASKS_EXTENSION_ID } from '../tasks.constants.js';
import { type InputHandlers, inputHandler, type InputRefusedError } from './input.js';
import { PROTOCOL_VERSION } from './raw-dispatch.js';
import { type ConnectionOptions, type OpenSession, openTasksSession } from './session.js';
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
}

export interface CallToolOptions {
  /**
   * Stops waiting: before the task exists, the call is abandoned (a task created anyway is
   * cancelled); after, `result()` rejects and the task is no longer followed (it is not cancelled
   * on the server; use `cancel()` for that).
   */
  signal?: AbortSignal;
  /** Headers for this call's requests only (the call, its `tasks/*` and its listen stream). */
  headers?: Readonly<Record<string, string>>;
  /**
   * Asks the server to keep the task this long. Sent only where the session supports a
   * client-requested retention (`supportsTtl`); the 2026-07-28 Tasks extension has none, and there
   * the tool's own TTL applies.
   */
  ttlMs?: number;
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
  private readonly refusals: Map<string, InputRefusedError>;
  private closing: Promise<void> | undefined;

  /** @internal Use {@link connectTasksClient}. */
  constructor(
    url: URL,
    private readonly opened: OpenSession,
    private readonly options: TasksClientOptions,
    refusals: Map<string, InputRefusedError>,
  ) {
    this.url = url;
    this.refusals = refusals;
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
   * when the server refuses the call itself.
   */
  async callTool(
    name: string,
    args?: Readonly<Record<string, unknown>>,
    options: CallToolOptions = {},
  ): Promise<TaskCall> {
    const execution = await this.opened.session.callTool(
      name,
      args as Readonly<Record<string, JsonValue>> | undefined,
      {
        ...(options.signal !== undefined && { signal: options.signal }),
        ...(options.headers !== undefined && { headers: options.headers }),
        ...(options.ttlMs !== undefined && { task: { retentionMs: options.ttlMs } }),
      },
    );
    let stop: (() => void) | undefined;
    const call = new TaskCall(execution, {
      read: (taskId) => this.getTask(taskId, options.headers),
      refusal: (taskId) => this.takeRefusal(taskId),
      report: (error) => this.report(error),
      settled: () => stop?.(),
      signal: options.signal,
    });
    if (call.taskId !== undefined && this.options.listen !== false) {
      stop = this.follow(call.taskId, options.headers);
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

  /** Reads a task of this principal by id (`tasks/get`), e.g. one started by another process. */
  async getTask(taskId: string, headers?: Readonly<Record<string, string>>): Promise<TaskSnapshot> {
    const view = await this.opened.session
      .task(taskId as TaskId, headers === undefined ? {} : { headers })
      .snapshot();
    return toSnapshot(view);
  }

  /** Asks the server to cancel a task of this principal by id (`tasks/cancel`). */
  async cancelTask(taskId: string, headers?: Readonly<Record<string, string>>): Promise<void> {
    await this.opened.session
      .task(taskId as TaskId, headers === undefined ? {} : { headers })
      .cancel();
  }

  /**
   * Closes the connection: stops following the calls still running (the session asks the server to
   * cancel their tasks), closes the listen streams, the session and the SDK client. Idempotent.
   */
  close(): Promise<void> {
    this.closing ??= (async () => {
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
   * Opens a listen stream for one task. Its `notifications/tasks` reach the SDK client, whose
   * fallback notification handler hands them to the session, which wakes the task at once. After
   * the acknowledgement one `tasks/get` catches up on what changed before the stream was open.
   * Any failure leaves the task to the session's polling. Returns what stops it.
   */
  private follow(
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
    void (async () => {
      // `taskIds` is the tasks extension's filter, unknown to the SDK's own type.
      const filter = { taskIds: [taskId] } as SubscriptionFilter;
      subscription = await this.opened.client.listen(filter, {
        signal: controller.signal,
        ...(headers !== undefined && { headers }),
      });
      if (controller.signal.aborted) {
        await subscription.close();
        return;
      }
      const now = await this.getTask(taskId, headers);
      if (controller.signal.aborted) return;
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
    })().catch(() => {
      // No stream (or it failed): the session's polling follows the task.
      stop();
    });
    return stop;
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

/** An error and its causes in one line: "probe failed: fetch failed: connect ECONNREFUSED …". */
function describe(error: unknown): string {
  let text = '';
  let current: unknown = error;
  // Duck-typed: errors from another realm (Jest's VM contexts) are no `instanceof Error` here.
  for (let depth = 0; depth < 6 && current !== undefined && current !== null; depth++) {
    const { message, code, cause, errors } = current as {
      message?: unknown;
      code?: unknown;
      cause?: unknown;
      errors?: unknown;
    };
    const line = typeof message === 'string' ? message : String(current);
    if (line !== '' && !text.includes(line)) text = text === '' ? line : `${text}: ${line}`;
    if (typeof code === 'string' && /^E[A-Z]+$/.test(code) && !text.includes(code)) {
      text = `${text} (${code})`;
    }
    current = Array.isArray(errors) && errors.length > 0 ? errors[0] : cause;
  }
  return text;
}

/**
 * Connects to the MCP endpoint at `url` (Streamable HTTP, protocol 2026-07-28) and checks that it
 * serves the Tasks extension. Rejects with an Error naming the URL when the server cannot be
 * reached, and with one saying so when it does not advertise `io.modelcontextprotocol/tasks`.
 */
export async function connectTasksClient(
  url: string | URL,
  options: TasksClientOptions = {},
): Promise<TasksClient> {
  const endpoint = new URL(url);
  const refusals = new Map<string, InputRefusedError>();
  let opened: OpenSession | undefined;
  const report = (error: Error): void => {
    try {
      if (options.onError === undefined) console.error(error);
      else options.onError(error);
    } catch (sinkError) {
      console.error(sinkError);
    }
  };
  let connectError: unknown;
  try {
    opened = await openTasksSession(endpoint, {
      ...options,
      onInputRequest: inputHandler(options.onInput ?? {}, {
        refuse: (taskId, error) => {
          refusals.set(taskId, error);
          void opened?.session.cancelTask(taskId as TaskId).catch(report);
        },
        report,
      }),
    });
  } catch (error) {
    connectError = error;
  }
  if (opened === undefined) {
    throw new Error(
      `Could not connect to the MCP server at ${endpoint.href}: ${describe(connectError)}`,
      { cause: connectError },
    );
  }
  const advertised = opened.client.getServerCapabilities()?.extensions?.[TASKS_EXTENSION_ID];
  const exact =
    advertised !== null &&
    typeof advertised === 'object' &&
    !Array.isArray(advertised) &&
    Object.keys(advertised).length === 0;
  if (!exact) {
    await opened.close();
    throw new Error(
      advertised === undefined
        ? `The MCP server at ${endpoint.href} does not advertise the tasks extension (${TASKS_EXTENSION_ID})`
        : `The MCP server at ${endpoint.href} advertises the tasks extension (${TASKS_EXTENSION_ID}) as ${JSON.stringify(advertised)}; 2026-07-28 requires exactly {}`,
    );
  }
  return new TasksClient(endpoint, opened, options, refusals);
}
