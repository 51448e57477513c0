/**
 * `nestjs-mcp-tasks/front`: for the MCP server around the tasks. Serving task traffic in front of
 * an MCP handler of one's own (the `nestjs-mcp-tasks/rekog` entry does so for @rekog/mcp-nest),
 * announcing that the app's tools, prompts or resources changed at run time, and answering task
 * errors on routes of one's own by hand. An app whose tools are fixed and that lets TasksModule
 * serve its endpoint and TaskErrorFilter its routes needs none of it.
 *
 * (The three entries that gather names from several folders live in src/entries/, so their
 * imports do not bend the folder layering that test/architecture.spec.ts checks.)
 */

// ----- The part that answers task traffic ---------------------------------------------------------
// Tasks methods, listen, task-tool calls and input answers, for the endpoint and `/rekog` alike.
// TasksModule's registration exports it (also through a bare `imports: [TasksModule]`).
export { type FrontRequest, McpTasksFront } from '../mcp/tasks-front.js';

// ----- Announcing changes of the app's MCP surface ------------------------------------------------
// Inject it where tools, prompts or resources change at run time (the registration exports it).
export { McpServerNotifier } from '../mcp/mcp-server.notifier.js';

// ----- Task errors as JSON-RPC errors and HTTP answers --------------------------------------------
// What TaskErrorFilter (root entry) writes, to build the same answer by hand.
export {
  TASK_ERROR_HTTP_STATUS,
  taskErrorBody,
  taskErrorStatus,
  type TaskErrorBody,
} from '../http/task-error.filter.js';
export type { JsonRpcErrorObject, ShuttingDownData } from '../errors.js';
