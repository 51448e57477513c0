import type { IncomingHttpHeaders, ServerResponse } from 'node:http';
import { Inject, Injectable, Logger } from '@nestjs/common';
import { ProtocolErrorCode, RELATED_TASK_META_KEY } from '@modelcontextprotocol/server';
import { InvalidTaskParamsError, ServerShuttingDownError } from '../errors.js';
import {
  type InputRequest,
  inputResponseProblem,
  type InputResponse,
  describeValue,
  isPlainObject,
  isRequestableTtl,
  type TaskOwner,
  type TaskRecord,
  toTask2025,
} from '../task.js';
import { TASKS_CONFIG } from '../tasks.constants.js';
import type { TasksConfig } from '../interfaces/tasks-module-options.interface.js';
import type { TaskToolDefinition } from '../tools/task-tool.registry.js';
import { formatIssue, type ValidationIssue } from '../tools/input-schema.js';
import { TaskToolRunner } from '../tools/task-tool.runner.js';
import {
  createTaskResult,
  invalidArgumentsResult,
  type RequestId,
  resultMeta,
  sendError,
  sendFailure,
  sendResult,
  sendShuttingDown,
} from './json-rpc.js';

/** The protocol era a task tool's call came in: 2026-07-28, or 2025-11-25 (the SDK's legacy). */
export type TaskToolCallEra = 'modern' | 'legacy';

/**
 * `tools/call` of a task tool that is to answer with a task, answered in front of the SDK: from a
 * 2026-07-28 client that declared the extension, or a 2025-11-25 client that sent `params.task`.
 * The arguments are validated with the tool's schema (a failure is the same tool error result the
 * SDK gives), the task is created and stored, the method starts, and the era's CreateTaskResult
 * answers (2026: the task fields flat with `resultType: "task"`; 2025: `{ task }` with `ttl`
 * and `pollInterval`). A store fault or a full store is a JSON-RPC error (-32603), which the
 * SDK's tool handler could only have turned into a tool error result.
 */
@Injectable()
export class TaskToolCallHandler {
  private readonly logger = new Logger('TaskToolCallHandler');
  private readonly meta: Record<string, unknown>;

  constructor(
    private readonly runner: TaskToolRunner,
    @Inject(TASKS_CONFIG) config: TasksConfig,
  ) {
    this.meta = resultMeta(config.serverInfo);
  }

  async handle(
    res: ServerResponse,
    id: RequestId,
    tool: TaskToolDefinition,
    params: Record<string, unknown>,
    owner: TaskOwner,
    era: TaskToolCallEra = 'modern',
    /**
     * The request's headers: a trace context in them parents the run's span (telemetry), and a
     * request-scoped tool's REQUEST gets a copy without credentials.
     */
    headers?: IncomingHttpHeaders,
  ): Promise<void> {
    let requestedTtlMs: number | undefined;
    if (era === 'legacy') {
      // The TTL a 2025-11-25 client asks for is a number there (no null); the v1 SDK refuses any
      // other value with -32602 in band (HTTP 200), which its client reports as the call's error.
      // A valid one of any size is capped as every TTL is (resolveTtlMs): the task shows its TTL.
      const task = params.task;
      const ttl = isPlainObject(task) ? task.ttl : undefined;
      if (!isPlainObject(task) || (ttl !== undefined && !isRequestableTtl(ttl))) {
        return sendError(res, id, {
          code: ProtocolErrorCode.InvalidParams,
          message: `Invalid params: task must be an object whose ttl is a positive integer (ms), got ${isPlainObject(task) ? `ttl ${describeValue(ttl)}` : describeValue(task)}`,
        });
      }
      requestedTtlMs = ttl as number | undefined;
    }
    const args = params.arguments === undefined ? {} : params.arguments;
    if (!isPlainObject(args)) {
      return sendError(res, id, {
        code: ProtocolErrorCode.InvalidParams,
        message: 'Invalid params: arguments must be an object',
      });
    }
    const schema = tool.config.inputSchema;
    let checked: Awaited<ReturnType<(typeof schema)['~standard']['validate']>>;
    try {
      checked = await schema['~standard'].validate(args);
    } catch (error) {
      this.logger.warn(`tools/call ${tool.name}: validation failed: ${String(error)}`);
      return sendError(res, id, {
        code: ProtocolErrorCode.InvalidParams,
        message: 'Invalid params: the arguments could not be validated',
      });
    }
    if (checked.issues !== undefined && checked.issues.length > 0) {
      const detail = checked.issues
        .map((issue) => formatIssue(issue as ValidationIssue))
        .join(', ');
      return sendResult(res, id, invalidArgumentsResult(tool.name, detail, this.meta));
    }
    try {
      const input = (checked as { value: unknown }).value;
      let firstInput: Readonly<Record<string, InputResponse>> | undefined;
      if (era === 'modern') {
        const requests = await this.runner.firstInputRequests(tool, input);
        if (requests !== undefined) {
          const round = gatherFirstInput(requests, params);
          if (round.missing !== undefined) {
            return sendResult(
              res,
              id,
              inputRequiredResult(round.missing, round.answers, this.meta),
            );
          }
          firstInput = round.answers;
        }
      }
      const record = await this.runner.start(tool, input, owner, {
        requestedTtlMs,
        firstInput,
        trace: { meta: params._meta, ...(headers !== undefined && { headers }) },
        headers,
      });
      sendResult(
        res,
        id,
        era === 'modern' ? createTaskResult(record, this.meta) : this.legacy(record),
      );
    } catch (error) {
      // The drain began while this call was checked: it is refused as the front refuses it.
      if (error instanceof ServerShuttingDownError) return sendShuttingDown(res, id, era);
      sendFailure(res, id, error, this.logger, `tools/call ${tool.name}`);
    }
  }

  /** The 2025-11-25 CreateTaskResult: `{ task }`, related to the task it made. */
  private legacy(record: TaskRecord): Record<string, unknown> {
    return {
      task: toTask2025(record),
      _meta: { ...this.meta, [RELATED_TASK_META_KEY]: { taskId: record.taskId } },
    };
  }
}

/**
 * One round of a multi round-trip `tools/call` (2026-07-28) for the tool's `requireInputFirst`:
 * the answers so far are those carried in `requestState` (from earlier rounds) and the
 * `inputResponses` of this one, each checked against its request; what is still missing is asked
 * again. `requestState` holds the answers only: they are the client's own input either way.
 */
function gatherFirstInput(
  requests: Record<string, InputRequest>,
  params: Record<string, unknown>,
): { answers: Record<string, InputResponse>; missing?: Record<string, InputRequest> } {
  const answers: Record<string, InputResponse> = Object.create(null);
  const earlier = params.requestState === undefined ? {} : readRequestState(params.requestState);
  const given = params.inputResponses === undefined ? {} : params.inputResponses;
  if (!isPlainObject(given)) {
    throw new InvalidTaskParamsError('Invalid params: inputResponses must be an object');
  }
  for (const source of [earlier, given]) {
    for (const [key, response] of Object.entries(source)) {
      if (!Object.hasOwn(requests, key)) continue;
      const request = requests[key]!;
      const problem = inputResponseProblem(request, response);
      if (problem !== undefined) {
        throw new InvalidTaskParamsError(`Invalid params: input response "${key}" ${problem}`);
      }
      answers[key] = response as InputResponse;
    }
  }
  const missingKeys = Object.keys(requests).filter((key) => !(key in answers));
  if (missingKeys.length === 0) return { answers: { ...answers } };
  return {
    answers,
    missing: Object.fromEntries(missingKeys.map((key) => [key, requests[key]!])),
  };
}

/** The synchronous `input_required` result of a round that still lacks answers. */
function inputRequiredResult(
  missing: Record<string, InputRequest>,
  answers: Record<string, InputResponse>,
  meta: Record<string, unknown>,
): Record<string, unknown> {
  return {
    resultType: 'input_required',
    inputRequests: missing,
    ...(Object.keys(answers).length > 0 && {
      requestState: Buffer.from(JSON.stringify(answers)).toString('base64url'),
    }),
    _meta: meta,
  };
}

function readRequestState(state: unknown): Record<string, unknown> {
  if (typeof state === 'string') {
    try {
      const answers: unknown = JSON.parse(Buffer.from(state, 'base64url').toString('utf8'));
      if (isPlainObject(answers)) return answers;
    } catch {
      // Not ours: refused below.
    }
  }
  throw new InvalidTaskParamsError('Invalid params: requestState was not issued by this server');
}
