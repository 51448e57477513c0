/**
 * `nestjs-mcp-tasks/client`: call task tools on an MCP server that serves the Tasks extension
 * (`io.modelcontextprotocol/tasks`, protocol 2026-07-28), on the official MCP client packages
 * (`@modelcontextprotocol/client`, `@modelcontextprotocol/ext-tasks`). For Node; no Nest needed.
 */
export {
  type CallToolOptions,
  type FollowOptions,
  TasksClient,
  type TasksClientOptions,
} from './tasks-client.js';
export { connectTasksClient } from './connect-tasks-client.js';
export {
  type StatusListener,
  TaskCall,
  type TaskCallOutcome,
  type TaskSnapshot,
  type TaskState,
} from './tool-call.js';
export {
  type InputContext,
  type InputHandlers,
  type InputParams,
  InputRefusedError,
} from './input.js';
export type { ConnectionOptions } from './session.js';
export {
  type DetachReason,
  type HttpAnswer,
  McpConnectError,
  McpEndpointNotFoundError,
  McpForbiddenError,
  McpHttpStatusError,
  McpUnauthorizedError,
  TaskDetachedError,
  TasksExtensionMissingError,
} from './errors.js';
export { type RetryOptions, TaskServerUnreachableError } from './retry.js';
export { PROTOCOL_VERSION } from './raw-dispatch.js';
export { TASKS_EXTENSION_ID } from '../tasks.constants.js';
export {
  JsonRpcResponseError,
  TaskCancelledError,
  TaskFailedError,
} from '@modelcontextprotocol/ext-tasks/client';
export type {
  ApplicationCreateMessageResult as SamplingResult,
  ApplicationElicitResult as ElicitationResult,
  ApplicationListRootsResult as RootsResult,
} from '@modelcontextprotocol/ext-tasks/client';
export type { AuthProvider, CallToolResult, FetchLike, Tool } from '@modelcontextprotocol/client';
