/**
 * `nestjs-mcp-tasks/bullmq`: queue-run task tools on BullMQ. Needs `bullmq` and `@nestjs/bullmq`
 * (optional peer dependencies: `npm install bullmq @nestjs/bullmq`).
 */
export { TasksQueueModule } from './tasks-queue.module.js';
export type { TasksQueueModuleOptions, TaskWorkerOptions } from './tasks-queue.options.js';
export { BullTaskQueue, type TaskJobData } from './bull-task-queue.js';
