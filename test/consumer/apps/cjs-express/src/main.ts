import 'reflect-metadata';
import type { AddressInfo } from 'node:net';
import { NestFactory } from '@nestjs/core';
import { TaskErrorFilter } from 'nestjs-mcp-tasks';
import { AppModule } from './app.module.js';

async function main(): Promise<void> {
  const app = await NestFactory.create(AppModule, {
    logger: ['error', 'warn'],
    forceCloseConnections: true,
  });
  app.useGlobalFilters(new TaskErrorFilter());
  app.enableShutdownHooks();
  await app.listen(Number(process.env.PORT ?? 0), '127.0.0.1');
  const { port } = app.getHttpServer().address() as AddressInfo;
  console.log(`listening on ${port} (${typeof require === 'function' ? 'CommonJS' : 'ESM'})`);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
