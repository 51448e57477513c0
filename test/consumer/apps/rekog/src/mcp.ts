// The MCP side of a @rekog/mcp-nest app: rekog's strategy, and its HTTP route as a Nest
// controller behind the app's guard. The transport is nestjs-mcp-tasks' drop-in for rekog's
// StreamableHttpTransport, so task traffic is served on the same route.
import { Controller, UseGuards } from '@nestjs/common';
import { McpHttpControllerFor, McpStrategy } from '@rekog/mcp-nest';
import { TaskHttpTransport } from 'nestjs-mcp-tasks/rekog';
import { BearerGuard } from './auth.js';

export const transport = new TaskHttpTransport({ security: { allowedHosts: 'localhost' } });

export const mcp = new McpStrategy({
  name: 'consumer-rekog',
  version: '1.0.0',
  transports: [transport],
});

/** The guard sets `request.user`, which rekog's tools and the tasks both read. */
@Controller('mcp')
@UseGuards(BearerGuard)
export class McpController extends McpHttpControllerFor(transport) {}
