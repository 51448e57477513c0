import { Controller, UseGuards } from '@nestjs/common';
import { McpHttpControllerFor } from '@rekog/mcp-nest';
import { TaskHttpTransport } from '../../src/rekog/index.js';
import { DemoAuthGuard } from '../demo-auth.guard.js';

/**
 * rekog's HTTP transport with task traffic in front of it. It takes the options of rekog's
 * `StreamableHttpTransport`. The Host and Origin allowlists here are checked on every request to
 * the route, task traffic included, so neither a DNS-rebinding page (a foreign Host) nor another
 * site's page (a foreign Origin) reaches a tool or a task: the lists the package's own endpoint
 * applies by default to a server on this machine. A deployed server lists its own hostnames.
 */
export const mcpTransport = new TaskHttpTransport({
  security: {
    allowedHosts: ['localhost', '127.0.0.1', '[::1]'],
    allowedOrigins: ['localhost', '127.0.0.1', '[::1]'],
  },
});

/**
 * The MCP route, a Nest controller as rekog has it: the guard runs first and sets the principal
 * (`request.user`), which rekog's tools and this package's tasks both read.
 */
@Controller('mcp')
@UseGuards(DemoAuthGuard)
export class McpController extends McpHttpControllerFor(mcpTransport) {}
