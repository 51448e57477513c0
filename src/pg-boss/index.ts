/**
 * `nestjs-mcp-tasks/pg-boss`: queue-run task tools on pg-boss, for apps whose only server is
 * PostgreSQL. Needs `pg-boss` 10 (an optional peer dependency: `npm install pg-boss@10`).
 */
export { TasksQueueModule } from './tasks-queue.module.js';
export type {
  TasksQueueModuleOptions,
  TaskQueueOptions,
  TaskWorkerOptions,
} from './tasks-queue.options.js';
export { PgBossTaskQueue, type PgBossJobData } from './pg-boss-task-queue.js';
