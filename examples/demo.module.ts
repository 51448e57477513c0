import { cpSync, existsSync } from 'node:fs';
import { type DynamicModule, Module } from '@nestjs/common';
import * as z from 'zod/v4';
import { TasksModule } from '../src/index.js';
import type { TasksModuleExtras } from '../src/entries/options.js';
import { PostgresTaskStore, postgresNotifier } from '../src/postgres/index.js';
import { RedisTaskStore, redisNotifier } from '../src/redis/index.js';
import { BullModule } from '@nestjs/bullmq';
import { TasksQueueModule as BullTasksQueueModule } from '../src/bullmq/index.js';
import { TasksQueueModule as PgBossTasksQueueModule } from '../src/pg-boss/index.js';
import { DemoAuthGuard } from './demo-auth.guard.js';
import { DemoAdminGuard, prepareConsoleAssets } from './demo-console.js';
import { DemoQueueTools } from './demo-queue.tools.js';
import { DemoTools } from './demo.tools.js';

/** Where the demo keeps its tasks and how it shares their changes. */
export type DemoStorage = Pick<TasksModuleExtras, 'store' | 'notifier'>;

/**
 * The storage the environment names: with `POSTGRES_URL`, the PostgreSQL store and notifier in
 * the schema `demo` (set up on first use); else with `REDIS_URL`, the Redis store and notifier
 * under the prefix `demo:`. Either way demo instances on several ports share their tasks, and the
 * queue-run tool runs on the same server (see `demoQueue`; with both set, tasks live in
 * PostgreSQL and the queue keeps BullMQ on Redis). Without either, `undefined` (the in-memory
 * store of a single instance).
 */
export function demoStorage(env: NodeJS.ProcessEnv = process.env): DemoStorage | undefined {
  if (env.POSTGRES_URL) {
    preparePostgresSchema();
    const postgres = { connection: env.POSTGRES_URL, schema: 'demo' };
    return { store: new PostgresTaskStore(postgres), notifier: postgresNotifier(postgres) };
  }
  const url = env.REDIS_URL;
  if (!url) return undefined;
  const redis = { connection: url, prefix: 'demo:' };
  return { store: new RedisTaskStore(redis), notifier: redisNotifier(redis) };
}

/**
 * The PostgreSQL store reads its schema's SQL beside its module: when the demo runs from
 * `.demo-build` (tsc copies no .sql file), the files are copied there from `src/postgres/schema`,
 * as the package's build copies them into `dist`.
 */
function preparePostgresSchema(): void {
  if (!new URL('.', import.meta.url).pathname.includes('/.demo-build/')) return;
  const source = new URL('../../src/postgres/schema/', import.meta.url);
  if (!existsSync(source)) return;
  cpSync(source, new URL('../src/postgres/schema/', import.meta.url), {
    recursive: true,
    force: true,
  });
}

/**
 * Where the demo's queue-run tool (`long_job`, queue `demo-jobs`) sends its jobs: with
 * `REDIS_URL`, BullMQ on that Redis (prefix `demo:bull`), also when `POSTGRES_URL` holds the
 * tasks; with `POSTGRES_URL` alone, pg-boss in that PostgreSQL (its tables in the schema
 * `demo_pgboss`, beside the tasks' `demo`), so a demo on PostgreSQL alone needs no other server;
 * without either, `undefined` (the tool is then not offered). `worker: false` for a process that
 * only takes calls.
 */
export interface DemoQueue {
  runner: 'bullmq' | 'pg-boss';
  /** The `REDIS_URL` (BullMQ) or the `POSTGRES_URL` (pg-boss). */
  url: string;
  worker?: boolean;
}

export function demoQueue(env: NodeJS.ProcessEnv = process.env): DemoQueue | undefined {
  if (env.REDIS_URL) return { runner: 'bullmq', url: env.REDIS_URL };
  if (env.POSTGRES_URL) return { runner: 'pg-boss', url: env.POSTGRES_URL };
  return undefined;
}

/** pg-boss's schema in the demo's PostgreSQL: its own, beside the tasks' schema `demo`. */
export const DEMO_PG_BOSS_SCHEMA = 'demo_pgboss';

/**
 * The one line the demo logs at startup on the queue-run tool: which runner it chose, and the
 * variables that chose it.
 */
export function demoQueueLine(env: NodeJS.ProcessEnv = process.env): string {
  const queue = demoQueue(env);
  if (queue === undefined) {
    return (
      'Queue-run tool long_job: not offered (neither REDIS_URL nor POSTGRES_URL is set); ' +
      'the task tools run in this process'
    );
  }
  const runs = 'jobs on demo-jobs, run by `npm start` and `npm run worker`';
  if (queue.runner === 'bullmq') {
    const tasks = env.POSTGRES_URL ? '; the tasks stay in PostgreSQL' : '';
    return `Queue-run tool long_job: BullMQ on Redis (REDIS_URL is set${tasks}), prefix demo:bull, ${runs}`;
  }
  return (
    'Queue-run tool long_job: pg-boss on PostgreSQL (POSTGRES_URL is set, REDIS_URL is not), ' +
    `schema ${DEMO_PG_BOSS_SCHEMA}, ${runs}`
  );
}

/** BullMQ's connection options for a `redis://` URL. */
function bullConnection(url: string) {
  const parsed = new URL(url);
  const db = Number(parsed.pathname.slice(1) || 0);
  return {
    host: parsed.hostname,
    port: Number(parsed.port || 6379),
    ...(parsed.username && { username: decodeURIComponent(parsed.username) }),
    ...(parsed.password && { password: decodeURIComponent(parsed.password) }),
    ...(db > 0 && { db }),
    ...(parsed.protocol === 'rediss:' && { tls: {} }),
  };
}

/** The modules and provider of the queue-run tool, on the runner `demoQueue` chose. */
function demoQueueParts(queue: DemoQueue): Pick<DynamicModule, 'imports' | 'providers'> {
  const worker = queue.worker !== false;
  if (queue.runner === 'pg-boss') {
    return {
      imports: [
        PgBossTasksQueueModule.forRoot({
          connection: { connectionString: queue.url, schema: DEMO_PG_BOSS_SCHEMA },
          worker,
        }),
      ],
      providers: [DemoQueueTools],
    };
  }
  return {
    imports: [
      BullModule.forRoot({ connection: bullConnection(queue.url), prefix: 'demo:bull' }),
      BullModule.registerQueue({ name: 'demo-jobs' }),
      BullTasksQueueModule.forRoot({ worker }),
    ],
    providers: [DemoQueueTools],
  };
}

/** Where the demo serves the task console (`DemoAdminGuard` lets in the principal `admin`). */
export const DEMO_CONSOLE_PATH = 'mcp-tasks';

prepareConsoleAssets();

/** The demo's TasksModule on the given storage (the in-memory store by default). */
function demoTasks(storage: DemoStorage = {}): DynamicModule {
  return TasksModule.forRoot({
    serverInfo: { name: 'nestjs-mcp-tasks-demo', version: '0.1.0' },
    guards: [DemoAuthGuard],
    // A plain (synchronous) tool beside the task tools, on the same server.
    configure: (server) => {
      server.registerTool(
        'echo',
        { description: 'Returns the text.', inputSchema: z.object({ text: z.string() }) },
        ({ text }) => ({ content: [{ type: 'text', text }] }),
      );
    },
    ...storage,
    console: { path: DEMO_CONSOLE_PATH, guards: [DemoAdminGuard] },
  });
}

/** The demo on a storage of its own (see `DemoModule.withStorage`). */
@Module({})
class DemoWithStorageModule {}

/** The demo app on the in-memory store. */
@Module({
  imports: [demoTasks()],
  providers: [DemoTools],
})
export class DemoModule {
  /**
   * The same app on another storage, `DemoModule.withStorage(demoStorage(), demoQueue())`; with
   * a queue, it offers `long_job` and (unless `worker: false`) runs its jobs.
   */
  static withStorage(storage: DemoStorage, queue?: DemoQueue): DynamicModule {
    const queued = queue ? demoQueueParts(queue) : { imports: [], providers: [] };
    return {
      module: DemoWithStorageModule,
      imports: [demoTasks(storage), ...(queued.imports ?? [])],
      providers: [DemoTools, ...(queued.providers ?? [])],
    };
  }
}
