import type { IncomingMessage, ServerResponse } from 'node:http';
import { type BeforeApplicationShutdown, Inject, Injectable, Logger } from '@nestjs/common';
import { ProtocolErrorCode, RELATED_TASK_META_KEY } from '@modelcontextprotocol/server';
import { InvalidTaskParamsError, type JsonRpcErrorObject, TaskError } from '../errors.js';
import {
  isPlainObject,
  type InputResponse,
  isTerminal,
  type TaskOwner,
  type TaskRecord,
  toTask2025,
  validateTaskId,
} from '../task.js';
import { TASKS_CONFIG } from '../tasks.constants.js';
import type { TasksConfig } from '../interfaces/tasks-module-options.interface.js';
import { TasksService } from '../tasks.service.js';
import { WaiterFeed } from '../notify/waiter-feed.js';
import { waitForTask } from '../tools/task-watch.js';
import {
  INTERNAL_ERROR,
  type MethodCall,
  type RequestId,
  resultMeta,
  sendError,
  sendFailure,
  sendJson,
  sendResult,
} from './json-rpc.js';
import { isRefusal, OwnerSlots } from '../owner-slots.js';

/** The task methods of 2025-11-25 (SEP-1686), served in front of the SDK. */
export const LEGACY_TASK_METHODS: ReadonlySet<string> = new Set([
  'tasks/get',
  'tasks/result',
  'tasks/list',
  'tasks/cancel',
]);

/**
 * The id of a server-to-client input request sent on a `tasks/result` stream: it names the task
 * and the input key, so the client's answer (a JSON-RPC response POSTed to the endpoint, to any
 * instance) finds its task through the store alone, without a session.
 */
const INPUT_ID_PREFIX = 'nestjs-mcp-tasks/input:';

/** The id of the request that asks input `key` of a task. */
export function inputRequestId(taskId: string, key: string): string {
  return `${INPUT_ID_PREFIX}${taskId}:${key}`;
}

/** The task id and key an input request id names, or `undefined` when it is not one of ours. */
export function parseInputRequestId(id: unknown): { taskId: string; key: string } | undefined {
  if (typeof id !== 'string' || !id.startsWith(INPUT_ID_PREFIX)) return undefined;
  const rest = id.slice(INPUT_ID_PREFIX.length);
  const colon = rest.indexOf(':');
  if (colon <= 0 || colon === rest.length - 1) return undefined;
  return { taskId: rest.slice(0, colon), key: rest.slice(colon + 1) };
}

/**
 * The 2025-11-25 task methods on the same TasksService and store as the 2026 ones, with the same
 * owner rules (an unknown, expired or foreign id is one error, -32602 "Task not found"):
 * - `tasks/get`: the task, 2025 fields (`ttl`, `pollInterval`);
 * - `tasks/result`: once the task is terminal, what the tool call would have answered (its result
 *   or its JSON-RPC error). Until then the request waits, under `resultWaits.max` per process
 *   and `resultWaits.maxPerPrincipal` per owner (a wait beyond either is refused at once, -32603
 *   naming the cap); on an SSE stream (the client accepts
 *   `text/event-stream`, as the v1 SDK does) each input the task needs goes to the client as an
 *   `elicitation/create`, `sampling/createMessage` or `roots/list` request related to the task;
 * - `tasks/list`: the caller's own tasks, newest first, with `nextCursor`;
 * - `tasks/cancel`: cancels and answers the task; a finished task is -32602, as that revision says.
 * A client's answer to an input request is a JSON-RPC response POSTed to the endpoint: it becomes
 * `TasksService.update` (any instance can take it: the store holds what it needs).
 */
@Injectable()
export class LegacyTasksHandler implements BeforeApplicationShutdown {
  private readonly logger = new Logger('LegacyTasksHandler');
  private readonly meta: Record<string, unknown>;
  /** The `tasks/result` requests waiting now, with what stops their wait. */
  private readonly waiting = new Map<ServerResponse, { stop: AbortController; stream: boolean }>();
  /** The waits' places under `resultWaits.max` and `resultWaits.maxPerPrincipal`. */
  private readonly slots: OwnerSlots;
  private keepAlive: NodeJS.Timeout | undefined;
  private shuttingDown = false;

  constructor(
    private readonly tasks: TasksService,
    private readonly waiters: WaiterFeed,
    @Inject(TASKS_CONFIG) private readonly config: TasksConfig,
  ) {
    this.meta = resultMeta(config.serverInfo);
    this.slots = new OwnerSlots({
      refusal: 'Result wait limit reached',
      max: config.resultWaits.max,
      maxOption: 'resultWaits.max',
      maxPerPrincipal: config.resultWaits.maxPerPrincipal,
      maxPerPrincipalOption: 'resultWaits.maxPerPrincipal',
    });
  }

  /** How many `tasks/result` requests wait (for leak checks). */
  get size(): number {
    return this.waiting.size;
  }

  /** How many wait slots are held (for leak checks: every wait gives its slot back). */
  get slotsHeld(): number {
    return this.slots.held;
  }

  /**
   * Waiting `tasks/result` requests end at shutdown: a stream closes, a plain one gets -32603.
   * Not earlier: they go on through the task-tool runner's drain, where their tasks may finish.
   */
  beforeApplicationShutdown(): void {
    this.shuttingDown = true;
    for (const { stop } of [...this.waiting.values()]) stop.abort();
    if (this.keepAlive !== undefined) clearInterval(this.keepAlive);
    this.keepAlive = undefined;
  }

  async handle(
    req: IncomingMessage,
    { res, id, method, params, owner }: MethodCall,
  ): Promise<void> {
    const fields = isPlainObject(params) ? params : {};
    if (method === 'tasks/list' && !this.tasks.canList) {
      // Not offered: the store cannot list (the capability leaves `list` out too).
      return sendError(res, id, {
        code: ProtocolErrorCode.MethodNotFound,
        message: 'Method not found',
      });
    }
    try {
      switch (method) {
        case 'tasks/get': {
          const record = await this.tasks.get(validateTaskId(fields.taskId), owner);
          return sendResult(res, id, { ...toTask2025(record), _meta: this.meta });
        }
        case 'tasks/list':
          return sendResult(res, id, await this.list(fields, owner));
        case 'tasks/cancel':
          return sendResult(res, id, await this.cancel(validateTaskId(fields.taskId), owner));
        default:
          return await this.result(req, res, id, validateTaskId(fields.taskId), owner);
      }
    } catch (error) {
      if (res.headersSent) return void res.end();
      sendFailure(res, id, error, this.logger, method);
    }
  }

  /**
   * A client's answer to an input request of ours: the answer is delivered to its task (the
   * caller must own it), an error answer fails the task. Answered 202 with no body either way,
   * as a response POSTed to a Streamable HTTP endpoint is; a task that is gone is not reported.
   */
  async answer(
    res: ServerResponse,
    body: { id: unknown; result?: unknown; error?: unknown },
    owner: TaskOwner,
  ): Promise<void> {
    const target = parseInputRequestId(body.id);
    try {
      if (target !== undefined) await this.deliver(target.taskId, target.key, body, owner);
    } catch (error) {
      if (!(error instanceof TaskError)) {
        this.logger.error(`input answer failed: ${(error as Error)?.stack ?? String(error)}`);
      }
    }
    res.writeHead(202).end();
  }

  private async deliver(
    taskId: string,
    key: string,
    body: { result?: unknown; error?: unknown },
    owner: TaskOwner,
  ): Promise<void> {
    if ('error' in body && body.error !== undefined) {
      const record = await this.tasks.get(taskId, owner);
      // Only an input the task asks now (own keys: `__proto__` names no request).
      if (!Object.hasOwn(record.inputRequests ?? {}, key)) return;
      const reason = isPlainObject(body.error) ? String(body.error.message ?? '') : '';
      await this.tasks.fail(taskId, {
        code: ProtocolErrorCode.InternalError,
        message: `The client could not answer input request "${key}"${reason ? `: ${reason.slice(0, 200)}` : ''}`,
      });
      return;
    }
    if (!isPlainObject(body.result)) {
      throw new InvalidTaskParamsError('Invalid params: an input answer must be an object');
    }
    await this.tasks.update(taskId, owner, { [key]: body.result as InputResponse });
  }

  private async list(params: Record<string, unknown>, owner: TaskOwner): Promise<unknown> {
    // TasksService.list checks the cursor (a string this store handed out).
    const page = await this.tasks.list(owner, { cursor: params.cursor as string | undefined });
    return {
      tasks: page.tasks.map(toTask2025),
      ...(page.nextCursor !== undefined && { nextCursor: page.nextCursor }),
      _meta: this.meta,
    };
  }

  private async cancel(taskId: string, owner: TaskOwner): Promise<unknown> {
    const before = await this.tasks.get(taskId, owner);
    if (isTerminal(before.status)) {
      throw new InvalidTaskParamsError('Invalid params: cannot cancel a task in terminal status');
    }
    const record = await this.tasks.cancel(taskId, owner);
    return { ...toTask2025(record), _meta: this.meta };
  }

  /**
   * `tasks/result`: a finished task is answered at once; else the request takes a wait slot
   * (taken synchronously after the read, so concurrent waits never pass the caps) and waits,
   * giving the slot back however the wait ends.
   */
  private async result(
    req: IncomingMessage,
    res: ServerResponse,
    id: RequestId,
    taskId: string,
    owner: TaskOwner,
  ): Promise<void> {
    const record = await this.tasks.get(taskId, owner);
    if (isTerminal(record.status)) return this.sendOutcome(res, id, record, false);
    const slot = this.slots.take(owner);
    if (isRefusal(slot)) return sendError(res, id, slot);
    try {
      await this.wait(req, res, id, record);
    } finally {
      slot.release();
    }
  }

  /** Waits for the end of a live task, asking the client for input on the way when it can. */
  private async wait(
    req: IncomingMessage,
    res: ServerResponse,
    id: RequestId,
    first: TaskRecord,
  ): Promise<void> {
    const { taskId } = first;
    let record = first;
    const stream = /\btext\/event-stream\b/.test(String(req.headers.accept ?? ''));
    const gone = new AbortController();
    const onClose = (): void => gone.abort();
    res.once('close', onClose);
    this.waiting.set(res, { stop: gone, stream });
    this.startKeepAlive();
    if (stream) {
      res.writeHead(200, {
        'content-type': 'text/event-stream',
        'cache-control': 'no-cache',
        connection: 'keep-alive',
      });
      // The client learns at once that the answer streams (Node sends headers with the first write).
      res.flushHeaders();
    }
    const asked = new Set<string>();
    const unasked = (task: TaskRecord): string[] =>
      task.status === 'input_required'
        ? Object.keys(task.inputRequests ?? {}).filter((key) => !asked.has(key))
        : [];
    try {
      for (;;) {
        if (stream) {
          for (const key of unasked(record)) {
            asked.add(key);
            const request = record.inputRequests![key]!;
            const params: Record<string, unknown> = { ...request.params };
            params._meta = { ...(params._meta as object), [RELATED_TASK_META_KEY]: { taskId } };
            writeEvent(res, {
              jsonrpc: '2.0',
              id: inputRequestId(taskId, key),
              method: request.method,
              params,
            });
          }
        }
        if (isTerminal(record.status)) return this.sendOutcome(res, id, record, stream);
        record = await waitForTask(
          this.tasks,
          this.waiters,
          taskId,
          (task) => isTerminal(task.status) || (stream && unasked(task).length > 0),
          {
            pollMs: this.tasks.rereadMs(record.pollIntervalMs),
            signal: gone.signal,
          },
        );
      }
    } catch (error) {
      if (gone.signal.aborted) {
        if (!this.shuttingDown || res.writableEnded) return;
        if (stream) return void res.end();
        return sendError(res, id, {
          code: ProtocolErrorCode.InternalError,
          message: 'The server is shutting down',
        });
      }
      if (!stream) throw error;
      if (!(error instanceof TaskError)) {
        this.logger.error(`tasks/result failed: ${(error as Error)?.stack ?? String(error)}`);
      }
      const answer = error instanceof TaskError ? error.toJsonRpcError() : INTERNAL_ERROR;
      writeEvent(res, { jsonrpc: '2.0', id, error: answer });
      res.end();
    } finally {
      res.off('close', onClose);
      this.waiting.delete(res);
    }
  }

  /** SSE comments on waiting streams every `listen.keepAliveMs`, so idle proxies keep them. */
  private startKeepAlive(): void {
    const every = this.config.listen.keepAliveMs;
    if (every <= 0 || this.keepAlive !== undefined) return;
    this.keepAlive = setInterval(() => {
      for (const [res, { stream }] of this.waiting) if (stream) res.write(': keepalive\n\n');
    }, every);
    this.keepAlive.unref();
  }

  /** What the tool call would have answered, related to its task. */
  private sendOutcome(
    res: ServerResponse,
    id: RequestId,
    record: TaskRecord,
    stream: boolean,
  ): void {
    let message: { jsonrpc: '2.0'; id: RequestId; result?: unknown; error?: JsonRpcErrorObject };
    if (record.status === 'completed' && record.result) {
      const { resultType: _complete, ...result } = record.result;
      const related = { [RELATED_TASK_META_KEY]: { taskId: record.taskId } };
      const meta = { ...(result._meta as object | undefined), ...this.meta, ...related };
      message = { jsonrpc: '2.0', id, result: { ...result, _meta: meta } };
    } else {
      // A JSON-RPC error has no `_meta`: the error goes as the call would have answered it.
      const error: JsonRpcErrorObject =
        record.status === 'failed' && record.error
          ? record.error
          : { code: ProtocolErrorCode.InternalError, message: 'Task cancelled' };
      message = { jsonrpc: '2.0', id, error };
    }
    if (stream) {
      writeEvent(res, message);
      res.end();
    } else {
      // In band, HTTP 200, whatever the error's code: the call's answer, not the request's.
      sendJson(res, 200, message);
    }
  }
}

function writeEvent(res: ServerResponse, message: unknown): void {
  res.write(`event: message\ndata: ${JSON.stringify(message)}\n\n`);
}
