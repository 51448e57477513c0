import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import { DemoModule } from './demo.module.js';

/** The demo server: the in-memory store, the endpoint at /mcp, on PORT (default 3000). */
async function main(): Promise<void> {
  const app = await NestFactory.create(DemoModule, { forceCloseConnections: true });
  app.enableShutdownHooks();
  const port = Number(process.env.PORT ?? 3000);
  await app.listen(port, process.env.HOST ?? '127.0.0.1');
  console.log(`MCP endpoint: http://${process.env.HOST ?? '127.0.0.1'}:${port}/mcp`);
}

void main();
