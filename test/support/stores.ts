import type { TasksModuleExtras } from '../../src/entries/options.js';
import { InMemoryTaskStore } from '../../src/entries/store.js';
import { PostgresTaskStore, postgresNotifier } from '../../src/postgres/index.js';
import { RedisTaskStore, redisNotifier } from '../../src/redis/index.js';
import { startTestPostgres } from './postgres-server.js';
import { startTestRedis } from './redis-server.js';

/**
 * The three stores as deployed, each with its notifier, for specs that run one app per store in
 * their own process. Starting Redis or PostgreSQL makes a spec `integration` (jest.config.js).
 */

/** A store (and notifier) for an app under test, and how to stop its server. */
export interface Storage {
  parts: () => TasksModuleExtras;
  stop: () => Promise<void>;
}

/** Memory, a private Redis and a private PostgreSQL; `space` names the key prefix and schema. */
export const STORES: Record<string, (space: string) => Promise<Storage>> = {
  memory: async () => ({ parts: () => ({ store: new InMemoryTaskStore() }), stop: async () => {} }),
  redis: async (space) => {
    const redis = await startTestRedis();
    const connection = { connection: redis.url, prefix: `${space}:` };
    return {
      parts: () => ({ store: new RedisTaskStore(connection), notifier: redisNotifier(connection) }),
      stop: () => redis.stop(),
    };
  },
  postgres: async (space) => {
    const postgres = await startTestPostgres();
    const connection = { connection: postgres.url, schema: space };
    return {
      parts: () => ({
        store: new PostgresTaskStore(connection),
        notifier: postgresNotifier(connection),
      }),
      stop: () => postgres.stop(),
    };
  },
};
