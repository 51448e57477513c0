import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import { DemoModule, demoQueue, demoQueueLine, demoStorage } from './demo.module.js';

/**
 * `npm run worker`: a demo process without HTTP that runs the jobs of `long_job`, beside any
 * number of `npm start` instances on the same server: on BullMQ with REDIS_URL, else on pg-boss
 * with POSTGRES_URL (see `demoQueue`).
 */
async function main(): Promise<void> {
  const storage = demoStorage();
  const queue = demoQueue();
  if (!storage || !queue) {
    console.error(
      'npm run worker needs REDIS_URL (BullMQ, e.g. REDIS_URL=redis://127.0.0.1:6379) or ' +
        'POSTGRES_URL (pg-boss, e.g. POSTGRES_URL=postgres://127.0.0.1:5432/postgres)',
    );
    process.exitCode = 1;
    return;
  }
  const app = await NestFactory.createApplicationContext(DemoModule.withStorage(storage, queue));
  app.enableShutdownHooks();
  console.log(demoQueueLine());
  console.log('Worker: running long_job jobs from the queue demo-jobs (Ctrl-C to stop)');
}

void main();
