import type { LoggerService } from '@nestjs/common';
import { InMemoryTaskStore, type TasksModuleExtras } from '../../src/index.js';
import { PostgresTaskStore, postgresNotifier } from '../../src/postgres/index.js';
import { RedisTaskStore, redisNotifier } from '../../src/redis/index.js';
import { startTestPostgres } from './postgres-server.js';
import { startTestRedis } from './redis-server.js';

/**
 * What the in-process hostile specs share (running-work, ids): the three stores as deployed (each
 * with its notifier), a logger that keeps WARN and ERROR lines, and the bearer principal.
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

/** What the server logs at WARN and ERROR level. */
export class KeptLog implements LoggerService {
  errors: string[] = [];
  warnings: string[] = [];
  log(): void {}
  debug(): void {}
  verbose(): void {}
  warn(message: unknown): void {
    this.warnings.push(String(message));
  }
  error(message: unknown): void {
    this.errors.push(String(message));
  }
}

/** `Authorization: Bearer <name>` makes `<name>` the principal; none is anonymous. */
export const bearerPrincipal = (request: unknown): string | undefined => {
  const header = (request as { headers: Record<string, string | undefined> }).headers.authorization;
  return header === undefined ? undefined : /^Bearer\s+(\S+)$/i.exec(header)?.[1];
};
