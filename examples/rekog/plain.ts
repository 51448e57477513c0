import 'reflect-metadata';
import { Controller, Module, UseGuards } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { McpHttpControllerFor, McpStrategy, StreamableHttpTransport } from '@rekog/mcp-nest';
import { DemoAuthGuard } from '../demo-auth.guard.js';
import { EchoTools } from './echo.tools.js';

/**
 * The rekog demo without tasks: the same `echo`, guard, Host and Origin checks and route as
 * examples/rekog/main.ts, on rekog's own `StreamableHttpTransport`, and nothing of this package
 * loaded. It is the baseline the bench compares the rekog app with tasks against.
 */
const transport = new StreamableHttpTransport({
  security: {
    allowedHosts: ['localhost', '127.0.0.1', '[::1]'],
    allowedOrigins: ['localhost', '127.0.0.1', '[::1]'],
  },
});

@Controller('mcp')
@UseGuards(DemoAuthGuard)
class PlainMcpController extends McpHttpControllerFor(transport) {}

@Module({ controllers: [PlainMcpController, EchoTools] })
class PlainRekogModule {}

async function main(): Promise<void> {
  const app = await NestFactory.create(PlainRekogModule, { forceCloseConnections: true });
  app.enableShutdownHooks();
  const strategy = new McpStrategy({
    name: 'nestjs-mcp-tasks-rekog-plain',
    version: '0.1.0',
    transports: [transport],
    httpAdapter: app.getHttpAdapter(),
  });
  app.connectMicroservice({ strategy });
  await app.startAllMicroservices();
  const port = Number(process.env.PORT ?? 3000);
  const host = process.env.HOST ?? '127.0.0.1';
  await app.listen(port, host);
  console.log(`MCP endpoint: http://${host}:${port}/mcp`);
  console.log('Tasks: none (the rekog app without nestjs-mcp-tasks)');
}

void main();
