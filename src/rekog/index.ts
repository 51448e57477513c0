/**
 * `nestjs-mcp-tasks/rekog`: task tools on a `@rekog/mcp-nest` server, on rekog's own endpoint.
 * `@rekog/mcp-nest` (2.x) is an optional peer dependency, loaded only by this entry.
 *
 * ```ts
 * export const mcpTransport = new TaskHttpTransport({ security: { allowedHosts: 'localhost' } });
 * // A controller of the app: @Controller('mcp') @UseGuards(AuthGuard)
 * // class McpController extends McpHttpControllerFor(mcpTransport) {}
 * const strategy = new McpStrategy({ name, version, transports: [mcpTransport], httpAdapter });
 * attachTasks(app, strategy);
 * app.connectMicroservice({ strategy });
 * ```
 */
export { TaskHttpTransport } from './task-http.transport.js';
export { attachTasks } from './rekog-tasks.js';
