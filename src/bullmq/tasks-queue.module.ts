import { type DynamicModule, Module } from '@nestjs/common';
import { ConfigurableModuleClass, type OPTIONS_TYPE } from './tasks-queue.module-definition.js';

/**
 * Runs queue-run task tools (`@TaskTool({ queue })`) on BullMQ. The app registers each queue with
 * `@nestjs/bullmq` as usual (`BullModule.forRoot({ connection })`,
 * `BullModule.registerQueue({ name })`, with its `defaultJobOptions`); a call stores its task and
 * adds a job; every process with `worker: true` (the default) runs those jobs with the same
 * providers, on BullMQ Workers started once the app is ready. A queue that tools use must have a
 * connection of its own (not BullMQ's silent default, 127.0.0.1:6379): the boot fails otherwise.
 *
 * ```ts
 * // One Redis setting: const redis = { connection: REDIS_URL }
 * imports: [
 *   BullModule.forRoot({ connection: { url: REDIS_URL } }),
 *   BullModule.registerQueue({ name: 'reports' }),
 *   TasksModule.forRoot({ store: new RedisTaskStore(redis), notifier: redisNotifier(redis) }),
 *   TasksQueueModule.forRoot({ workers: { reports: { concurrency: 4 } } }),
 * ]
 * ```
 */
@Module({})
export class TasksQueueModule extends ConfigurableModuleClass {
  /** Registers the module once, in the root module; `forRoot()` takes every default. */
  static override forRoot(options: typeof OPTIONS_TYPE = {}): DynamicModule {
    return super.forRoot(options);
  }
}
