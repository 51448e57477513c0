import { STATUS_CODES } from 'node:http';
import { TASKS_EXTENSION_ID } from '../tasks.constants.js';

/**
 * `connectTasksClient` could not use the endpoint at `url`. Each case has its own subclass:
 * {@link McpEndpointNotFoundError} (404), {@link McpUnauthorizedError} (401),
 * {@link McpForbiddenError} (403), {@link McpHttpStatusError} (any other HTTP error status) and
 * {@link TasksExtensionMissingError} (an MCP server without the tasks extension). A server that
 * cannot be reached at all is a `TaskServerUnreachableError` instead.
 */
export class McpConnectError extends Error {
  /** The endpoint the client was given. */
  readonly url: string;
  /** The HTTP status the endpoint answered; undefined when it answered MCP. */
  readonly status: number | undefined;

  constructor(url: string, status: number | undefined, message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
    this.url = url;
    this.status = status;
  }
}

/** What the endpoint answered while the client connected. */
export interface HttpAnswer {
  /** The HTTP method of the request (`POST`, `GET`). */
  readonly method: string;
  readonly status: number;
  /** The reason phrase, or the standard one when the server sent none (HTTP/2). */
  readonly statusText: string;
}

/** "POST http://host/mcp answered 404 Not Found". */
const answered = (url: string, answer: HttpAnswer): string =>
  `${answer.method} ${url} answered ${answer.status}${answer.statusText === '' ? '' : ` ${answer.statusText}`}`;

/**
 * HTTP 404: nothing serves MCP at this URL. In a Nest app the usual cause is a `TasksModule` that
 * is not imported (the app boots, and Nest answers 404 on `/mcp`), or a path that differs from
 * the module's `path` option (default `/mcp`).
 */
export class McpEndpointNotFoundError extends McpConnectError {
  constructor(url: string, answer: HttpAnswer, options?: ErrorOptions) {
    super(
      url,
      answer.status,
      `${answered(url, answer)}: no MCP endpoint there. Is TasksModule imported in the app module, and is the path right (TasksModule's \`path\` option, default /mcp)?`,
      options,
    );
  }
}

/** HTTP 401: the endpoint wants credentials the client did not send, or refused the ones it sent. */
export class McpUnauthorizedError extends McpConnectError {
  constructor(url: string, answer: HttpAnswer, options?: ErrorOptions) {
    super(
      url,
      answer.status,
      `${answered(url, answer)}: the server wants credentials it did not get or did not accept. Pass \`headers: { Authorization: 'Bearer …' }\` or an \`authProvider\` to connectTasksClient`,
      options,
    );
  }
}

/** HTTP 403: the endpoint refused these credentials, this principal, or this Host or Origin. */
export class McpForbiddenError extends McpConnectError {
  constructor(url: string, answer: HttpAnswer, options?: ErrorOptions) {
    super(
      url,
      answer.status,
      `${answered(url, answer)}: the server refused this client (its credentials or scope, or a Host or Origin check)`,
      options,
    );
  }
}

/**
 * Any other HTTP error status while connecting: a 5xx (the server, or a gateway before it, failed:
 * its log says why) or a 4xx other than 401, 403 and 404 (the endpoint refused the request).
 * Connecting is tried once, also on 502, 503 and 504.
 */
export class McpHttpStatusError extends McpConnectError {
  constructor(url: string, answer: HttpAnswer, options?: ErrorOptions) {
    const why =
      answer.status >= 500
        ? 'the server (or a gateway before it) failed; its log says why'
        : 'the server refused the request; is this an MCP endpoint?';
    super(url, answer.status, `${answered(url, answer)}: ${why}`, options);
  }
}

/**
 * The endpoint serves MCP but does not advertise `io.modelcontextprotocol/tasks` (or advertises it
 * with settings 2026-07-28 does not have): another MCP server answers at this URL, not the
 * endpoint of `TasksModule`.
 */
export class TasksExtensionMissingError extends McpConnectError {
  /** What the server advertised under the extension's id (undefined: nothing). */
  readonly advertised: unknown;

  constructor(url: string, advertised: unknown) {
    super(
      url,
      undefined,
      advertised === undefined
        ? `The MCP server at ${url} does not advertise the tasks extension (${TASKS_EXTENSION_ID}): another MCP server answers there. Is this the path TasksModule serves (its \`path\` option, default /mcp)?`
        : `The MCP server at ${url} advertises the tasks extension (${TASKS_EXTENSION_ID}) as ${JSON.stringify(advertised)}; 2026-07-28 requires exactly {}`,
    );
    this.advertised = advertised;
  }
}

/** The error for an HTTP error status met while connecting. */
export function connectErrorFor(url: string, answer: HttpAnswer, cause: unknown): McpConnectError {
  const options = cause === undefined ? undefined : { cause };
  switch (answer.status) {
    case 404:
      return new McpEndpointNotFoundError(url, answer, options);
    case 401:
      return new McpUnauthorizedError(url, answer, options);
    case 403:
      return new McpForbiddenError(url, answer, options);
    default:
      return new McpHttpStatusError(url, answer, options);
  }
}

/** The reason phrase of a response, or the standard one for its status. */
export function statusTextOf(response: Response): string {
  return response.statusText !== '' ? response.statusText : (STATUS_CODES[response.status] ?? '');
}

/** Why a followed task's wait ended without its outcome: see {@link TaskDetachedError}. */
export type DetachReason = 'detach' | 'close';

/**
 * The client stopped following a task that it did not cancel: `call.detach()` or
 * `client.close()`. The task keeps running on the server: read it by id (`getTask(taskId)`) or
 * follow it again (`follow(taskId)`, on this client after a detach, or on another one).
 */
export class TaskDetachedError extends Error {
  /** The task, still on the server. */
  readonly taskId: string;
  /** The endpoint. */
  readonly url: string;
  /** `detach`: `call.detach()`; `close`: the client was closed. */
  readonly reason: DetachReason;

  constructor(taskId: string, url: string, reason: DetachReason) {
    const how =
      reason === 'close' ? 'The client was closed' : 'The client stopped following this task';
    const again =
      reason === 'close'
        ? 'read it with getTask(taskId) (tasks/get), or follow(taskId) on a new client'
        : 'read it with getTask(taskId) (tasks/get), or follow(taskId) again';
    super(`${how}; task ${taskId} keeps running on the server at ${url}: ${again}`);
    this.name = 'TaskDetachedError';
    this.taskId = taskId;
    this.url = url;
    this.reason = reason;
  }
}
