import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Redis } from 'ioredis';
import pg from 'pg';
import {
  DEMO_PG_BOSS_SCHEMA,
  DemoModule,
  demoQueue,
  demoStorage,
} from '../../examples/demo.module.js';
import { type RunningApp, startApp } from './app.js';
import { startTestPostgres } from './postgres-server.js';
import { startTestRedis } from './redis-server.js';

/**
 * The demo with its queue-run tool `long_job`, on each server the README runs it on: Redis alone
 * (`REDIS_URL`: the tasks in Redis, the jobs on BullMQ) and PostgreSQL alone (`POSTGRES_URL`: the
 * tasks in PostgreSQL, the jobs on pg-boss). The runner is the one the demo picks from that
 * environment (`demoQueue`), so a spec run on both checks the demo's own choice.
 */
export const DEMO_QUEUE_SERVERS = ['redis', 'postgres'] as const;
export type DemoQueueServer = (typeof DEMO_QUEUE_SERVERS)[number];

/**
 * The demo as the README runs it: an instance that takes calls and runs no job (`worker: false`),
 * so a queue-run tool's job can only run on the worker, and the worker (`npm run worker`: the same
 * module as an application context, with the demo's worker settings). Each is a Nest app of its
 * own, with its own connections: on pg-boss a job one sends wakes no slot of the other, as between
 * two processes (the worker finds it by polling).
 */
export interface DemoOnQueue {
  api: RunningApp;
  /** The runner the demo chose for this server. */
  runner: 'bullmq' | 'pg-boss';
  /**
   * What the queue still holds of `long_job`'s jobs that should be gone once every job ended:
   * on BullMQ the owners' fair-turn keys (`demo:bull:demo-jobs:fair:*`), on pg-boss the jobs not
   * yet completed, cancelled or failed (the fair turns are counted from those rows).
   */
  leftOnQueue(): Promise<string[]>;
  /** Closes the instance, then the worker, then the server. */
  close(): Promise<void>;
}

/** Starts a private server of that kind, then the demo's instance and worker on it. */
export async function startDemoOnQueue(server: DemoQueueServer): Promise<DemoOnQueue> {
  const started = server === 'redis' ? await startRedisForDemo() : await startPostgresForDemo();
  let api: RunningApp | undefined;
  let worker: Awaited<ReturnType<typeof NestFactory.createApplicationContext>> | undefined;
  try {
    const { env } = started;
    const queue = demoQueue(env)!;
    @Module({
      imports: [DemoModule.withStorage(demoStorage(env)!, { ...queue, worker: false })],
    })
    class DemoApi {}
    api = await startApp(DemoApi, 'express');
    worker = await NestFactory.createApplicationContext(
      DemoModule.withStorage(demoStorage(env)!, demoQueue(env)),
      { logger: false },
    );
    await worker.init();
    const [running, context] = [api, worker];
    return {
      api: running,
      runner: queue.runner,
      leftOnQueue: started.leftOnQueue,
      close: async () => {
        await running.close();
        await context.close();
        await started.stop();
      },
    };
  } catch (error) {
    await api?.close();
    await worker?.close();
    await started.stop();
    throw error;
  }
}

interface StartedServer {
  /** The demo's environment on it. */
  env: NodeJS.ProcessEnv;
  leftOnQueue(): Promise<string[]>;
  stop(): Promise<void>;
}

async function startRedisForDemo(): Promise<StartedServer> {
  const redis = await startTestRedis({ persistence: false });
  return {
    env: { REDIS_URL: redis.url },
    leftOnQueue: async () => {
      const raw = new Redis(redis.url);
      try {
        return await raw.keys('demo:bull:demo-jobs:fair:*');
      } finally {
        raw.disconnect();
      }
    },
    stop: () => redis.stop(),
  };
}

async function startPostgresForDemo(): Promise<StartedServer> {
  const postgres = await startTestPostgres();
  return {
    env: { POSTGRES_URL: postgres.url },
    leftOnQueue: async () => {
      const client = new pg.Client({ connectionString: postgres.url });
      await client.connect();
      try {
        const { rows } = await client.query<{ id: string; state: string }>(
          `SELECT id, state FROM ${DEMO_PG_BOSS_SCHEMA}.job ` +
            `WHERE name = 'demo-jobs' AND state < 'completed'`,
        );
        return rows.map(({ id, state }) => `${id} ${state}`);
      } finally {
        await client.end();
      }
    },
    stop: () => postgres.stop(),
  };
}
