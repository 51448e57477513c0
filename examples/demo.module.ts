import { type DynamicModule, Module } from '@nestjs/common';
import * as z from 'zod/v4';
import {
  TasksModule,
  type TasksModuleExtras,
} from '../src/index.js';
import {
  RedisTaskStore,
  redisNotifier,
} from '../src/redis/index.js';
import { DemoAuthGuard } from './demo-auth.guard.js';
import { DemoTools } from './demo.tools.js';

/** Where the demo keeps its tasks and how it shares their changes. */
export type DemoStorage = Pick<TasksModuleExtras, 'store' | 'notifier'>;

/**
 * The storage the environment names: with `REDIS_URL`, the Redis store and notifier under the
 * prefix `demo:`, so demo instances on several ports share their tasks; without it, `undefined`
 * (the in-memory store of a single instance).
 */
export function demoStorage(env: NodeJS.ProcessEnv = process.env): DemoStorage | undefined {
  const url = env.REDIS_URL;
  if (!url) return undefined;
  const redis = { connection: url, prefix: 'demo:' };
  return { store: new RedisTaskStore(redis), notifier: redisNotifier(redis) };
}

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
  /** The same app on another storage: `DemoModule.withStorage(demoStorage())`. */
  static withStorage(storage: DemoStorage): DynamicModule {
    return {
      module: DemoWithStorageModule,
      imports: [demoTasks(storage)],
      providers: [DemoTools],
    };
  }
}
