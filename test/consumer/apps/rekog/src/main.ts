import 'reflect-metadata';
import type { AddressInfo } from 'node:net';
import { NestFactory } from '@nestjs/core';
import { attachTasks } from 'nestjs-mcp-tasks/rekog';
import { AppModule } from './app.module.js';
import { mcp } from './mcp.js';

async function main(): Promise<void> {
  const app = await NestFactory.create(AppModule, {
    logger: ['error', 'warn'],
    forceCloseConnections: true,
  });
  app.enableShutdownHooks();
  mcp.setHttpAdapter(app.getHttpAdapter());
  // Before the strategy starts: the task tools join rekog's, and the tasks capability its server's.
  attachTasks(app, mcp);
  app.connectMicroservice({ strategy: mcp });
  await app.startAllMicroservices();
  await app.listen(Number(process.env.PORT ?? 0), '127.0.0.1');
  const { port } = app.getHttpServer().address() as AddressInfo;
  console.log(`listening on ${port} (${typeof require === 'function' ? 'CommonJS' : 'ESM'})`);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
