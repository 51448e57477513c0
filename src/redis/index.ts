/**
 * `nestjs-mcp-tasks/redis`: the Redis store and notifier, for apps that run several instances.
 * Needs `ioredis` (an optional peer dependency: `npm install ioredis`).
 */
export { RedisTaskStore } from './redis.task-store.js';
export { RedisTaskNotifier, redisNotifier } from './redis.notifier.js';
export type {
  RedisClient,
  RedisClusterConnection,
  RedisConnectionOptions,
} from './redis-connection.js';
