import {
  type ArgumentsHost,
  Catch,
  type ExceptionFilter,
  Injectable,
  Logger,
  Optional,
} from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { STATUS_CODES } from 'node:http';
import { httpStatusOf, TaskError } from '../errors.js';

/** The table lives beside the one status rule (httpStatusOf, errors.ts); exported here too. */
export { TASK_ERROR_HTTP_STATUS } from '../errors.js';

/** The HTTP status for a TaskError: 404, 400, 409 or 503 (see TASK_ERROR_HTTP_STATUS). */
export function taskErrorStatus(error: TaskError): number {
  return httpStatusOf(error, 'rest');
}

/** The body TaskErrorFilter answers with: Nest's usual three fields plus the JSON-RPC code. */
export interface TaskErrorBody {
  statusCode: number;
  error: string;
  message: string;
  /** The JSON-RPC code the same error has on the MCP endpoint (-32602, -32603). */
  code: number;
  data?: unknown;
}

/** The body for a TaskError, as TaskErrorFilter sends it (never a stack). */
export function taskErrorBody(error: TaskError): TaskErrorBody {
  const statusCode = taskErrorStatus(error);
  const body: TaskErrorBody = {
    statusCode,
    error: STATUS_CODES[statusCode] ?? 'Error',
    message: error.message,
    code: error.code,
  };
  if (error.data !== undefined) body.data = error.data;
  return body;
}

interface ReplyLike {
  status?: (code: number) => unknown;
  code?: (code: number) => unknown;
  json?: (body: unknown) => unknown;
  send?: (body: unknown) => unknown;
  header?: (name: string, value: string) => unknown;
  setHeader?: (name: string, value: string) => unknown;
  end?: (chunk: string) => unknown;
  statusCode?: number;
}

/**
 * Turns a TaskError thrown from an ordinary (REST) controller into its HTTP answer, e.g. 404
 * `{ statusCode: 404, error: 'Not Found', message: 'Task not found', code: -32602 }`, instead of
 * Nest's 500. Works under Express and Fastify, registered any of the usual ways:
 * `app.useGlobalFilters(new TaskErrorFilter())`, `{ provide: APP_FILTER, useClass: TaskErrorFilter }`
 * or `@UseFilters(TaskErrorFilter)`. A 4xx is not logged; a 5xx is logged as a warning with its
 * message (never the stack). The MCP endpoint answers its own errors and never reaches it.
 */
@Catch(TaskError)
@Injectable()
export class TaskErrorFilter implements ExceptionFilter<TaskError> {
  private readonly logger = new Logger('TaskErrorFilter');

  constructor(@Optional() private readonly adapterHost?: HttpAdapterHost) {}

  catch(exception: TaskError, host: ArgumentsHost): void {
    if (host.getType() !== 'http') throw exception;
    const body = taskErrorBody(exception);
    if (body.statusCode >= 500) {
      this.logger.warn(`Answered ${body.statusCode}: ${exception.message}`);
    }
    const response = host.switchToHttp().getResponse<ReplyLike>();
    const adapter = this.adapterHost?.httpAdapter;
    if (adapter) {
      adapter.reply(response, body, body.statusCode);
      return;
    }
    reply(response, body);
  }
}

/** Writes the answer without the adapter (a filter made with `new`): Fastify, Express or raw Node. */
function reply(response: ReplyLike, body: TaskErrorBody): void {
  if (typeof response.code === 'function' && typeof response.send === 'function') {
    // Fastify's reply.
    response.code(body.statusCode);
    response.header?.('content-type', 'application/json; charset=utf-8');
    response.send(JSON.stringify(body));
  } else if (typeof response.status === 'function' && typeof response.json === 'function') {
    // Express's response.
    response.status(body.statusCode);
    response.json(body);
  } else {
    response.statusCode = body.statusCode;
    response.setHeader?.('content-type', 'application/json; charset=utf-8');
    response.end?.(JSON.stringify(body));
  }
}
