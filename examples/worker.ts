import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import { DemoModule, demoQueue, demoStorage } from './demo.module.js';

/**
 * `npm run worker`: a demo process without HTTP that runs the jobs of `long_job` on the Redis of
 * REDIS_URL, beside any number of `npm start` instances on the same Redis.
 */
async function main(): Promise<void> {
  const storage = demoStorage();
  const queue = demoQueue();
  if (!storage || !queue) {
    console.error('npm run worker needs REDIS_URL (e.g. REDIS_URL=redis://127.0.0.1:6379)');
    process.exitCode = 1;
    return;
  }
  const app = await NestFactory.createApplicationContext(DemoModule.withStorage(storage, queue));
  app.enableShutdownHooks();
  console.log('Worker: running long_job jobs from the queue demo-jobs (Ctrl-C to stop)');
}

void main();
