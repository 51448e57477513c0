import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import {
  DEMO_CONSOLE_PATH,
  DemoModule,
  demoQueue,
  demoQueueLine,
  demoStorage,
} from './demo.module.js';

/**
 * The demo server: the endpoint at /mcp, on PORT (default 3000). With POSTGRES_URL its tasks live
 * in PostgreSQL (schema `demo`), else with REDIS_URL in Redis (prefix `demo:`), and instances on
 * several ports share them. With either it offers `long_job`, a queue-run tool whose jobs it runs
 * too: on BullMQ with REDIS_URL (also when POSTGRES_URL holds the tasks), else on pg-boss in the
 * PostgreSQL of POSTGRES_URL. Without either, tasks in memory and no queue.
 */
async function main(): Promise<void> {
  const lacking = process.env.DEMO_WHEN_CLIENT_LACKS_TASKS;
  if (lacking !== undefined && lacking !== 'inline' && lacking !== 'reject') {
    console.error(`DEMO_WHEN_CLIENT_LACKS_TASKS must be "inline" or "reject", not "${lacking}"`);
    process.exit(1);
  }
  const storage = demoStorage();
  const app = await NestFactory.create(
    storage ? DemoModule.withStorage(storage, demoQueue()) : DemoModule,
    {
      forceCloseConnections: true,
    },
  );
  app.enableShutdownHooks();
  const port = Number(process.env.PORT ?? 3000);
  await app.listen(port, process.env.HOST ?? '127.0.0.1');
  const origin = `http://${process.env.HOST ?? '127.0.0.1'}:${port}`;
  console.log(`MCP endpoint: ${origin}/mcp`);
  console.log(
    `Task console: ${origin}/${DEMO_CONSOLE_PATH} (demo admin: user "admin", any password; ` +
      'or Authorization: Bearer admin)',
  );
  const where = process.env.POSTGRES_URL
    ? 'in PostgreSQL (POSTGRES_URL), schema demo'
    : storage
      ? 'in Redis (REDIS_URL), prefix demo:'
      : 'in memory';
  console.log(`Tasks: ${where}`);
  if (lacking === 'inline')
    console.log('Task tools: run inline for clients without the tasks extension');
  console.log(demoQueueLine());
}

void main();
