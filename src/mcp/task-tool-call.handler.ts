import type { ServerResponse } from 'node:http';
import { Inject, Injectable, Logger } from '@nestjs/common';
import { ProtocolErrorCode } from '@modelcontextprotocol/server';
import { isPlainObject, type TaskOwner } from '../task.js';
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
} from './json-rpc.js';
import { EMPTY_INPUT } from './mcp-server.factory.js';

/**
 * `tools/call` of a task tool from a client that declared the extension, answered in front of the
 * SDK: the arguments are validated with the tool's schema (a failure is the same tool error
 * result the SDK gives), the task is created and stored, the method starts, and the
 * CreateTaskResult answers. A store fault or a full store is a JSON-RPC error (-32603), which the
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
  ): Promise<void> {
    const args = params.arguments === undefined ? {} : params.arguments;
    if (!isPlainObject(args)) {
      return sendError(res, id, {
        code: ProtocolErrorCode.InvalidParams,
        message: 'Invalid params: arguments must be an object',
      });
    }
    const schema = tool.config.inputSchema ?? EMPTY_INPUT;
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
      const record = await this.runner.start(tool, (checked as { value: unknown }).value, owner);
      sendResult(res, id, createTaskResult(record, this.meta));
    } catch (error) {
      sendFailure(res, id, error, this.logger, `tools/call ${tool.name}`);
    }
  }
}
