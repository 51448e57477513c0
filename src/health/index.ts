/**
 * `nestjs-mcp-tasks/health`: a `@nestjs/terminus` health indicator for the task store and the
 * Redis notifier. Needs `@nestjs/terminus` (an optional peer dependency:
 * `npm install @nestjs/terminus`).
 */
export { TasksHealthModule } from './tasks-health.module.js';
export {
  DEFAULT_HEALTH_TIMEOUT_MS,
  TasksHealthIndicator,
  type TasksHealthCheckOptions,
  type TasksHealthDetails,
  type TasksHealthNotifier,
} from './tasks-health.indicator.js';
