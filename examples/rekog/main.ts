import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import { McpStrategy } from '@rekog/mcp-nest';
import { attachTasks } from '../../src/rekog/index.js';
import { mcpTransport } from './mcp.controller.js';
import { REKOG_DEMO_SERVER, RekogModule } from './rekog.module.js';

/**
 * The rekog demo server (`npm run demo:rekog`): rekog's endpoint at /mcp on PORT (default 3000),
 * with rekog's `echo` and the demo's task tools; tasks in memory. `Authorization: Bearer <name>`
 * is the principal (examples/demo-auth.guard.ts).
 */
async function main(): Promise<void> {
  const app = await NestFactory.create(RekogModule, { forceCloseConnections: true });
  app.enableShutdownHooks();
  const strategy = new McpStrategy({
    ...REKOG_DEMO_SERVER,
    transports: [mcpTransport],
    httpAdapter: app.getHttpAdapter(),
  });
  // Before the strategy starts: the task tools join rekog's tools, and the tasks capability its
  // server's, on both protocol eras.
  attachTasks(app, strategy);
  app.connectMicroservice({ strategy });
  await app.startAllMicroservices();
  const port = Number(process.env.PORT ?? 3000);
  const host = process.env.HOST ?? '127.0.0.1';
  await app.listen(port, host);
  console.log(`MCP endpoint: http://${host}:${port}/mcp`);
  console.log('Tools: echo (rekog @Tool); add_slowly, greet, wait_for_cancel, fail_with (tasks)');
  console.log('Tasks: in memory');
}

void main();
