import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { DemoModule, demoQueue, demoStorage } from '../../examples/demo.module.js';
import { type RunningApp, startApp } from './app.js';

/**
 * The demo as the README runs it with `REDIS_URL`: an instance that takes calls and runs no job
 * (`worker: false`), so a queue-run tool's job can only run on the worker, and the worker (`npm
 * run worker`: the same module as an application context, with the demo's worker settings).
 */
export interface DemoOnRedis {
  api: RunningApp;
  /** Closes the instance, then the worker. */
  close(): Promise<void>;
}

export async function startDemoOnRedis(redisUrl: string): Promise<DemoOnRedis> {
  const env = { REDIS_URL: redisUrl };
  @Module({
    imports: [DemoModule.withStorage(demoStorage(env)!, { ...demoQueue(env)!, worker: false })],
  })
  class DemoApi {}
  const api = await startApp(DemoApi, 'express');
  const worker = await NestFactory.createApplicationContext(
    DemoModule.withStorage(demoStorage(env)!, demoQueue(env)),
    { logger: false },
  );
  await worker.init();
  return {
    api,
    close: async () => {
      await api.close();
      await worker.close();
    },
  };
}
