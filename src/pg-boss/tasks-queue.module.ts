import { type DynamicModule, Module } from '@nestjs/common';
import { ConfigurableModuleClass, type OPTIONS_TYPE } from './tasks-queue.module-definition.js';

/**
 * Runs queue-run task tools (`@TaskTool({ queue })`) on pg-boss, in PostgreSQL: the same module
 * and options as `nestjs-mcp-tasks/bullmq`'s, with the queues' `connection` given here (pg-boss
 * has no Nest module of its own to hold it). A call stores its task and sends a job; every
 * process with `worker: true` (the default) runs those jobs with the same providers, once the app
 * is ready.
 *
 * ```ts
 * imports: [
 *   TasksModule.forRoot({ store: new PostgresTaskStore({ connection: POSTGRES_URL }) }),
 *   TasksQueueModule.forRoot({ connection: POSTGRES_URL, workers: { reports: { concurrency: 4 } } }),
 * ]
 * ```
 */
@Module({})
export class TasksQueueModule extends ConfigurableModuleClass {
  /** Registers the module once, in the root module. */
  static override forRoot(options: typeof OPTIONS_TYPE): DynamicModule {
    return super.forRoot(options);
  }
}
