import { freePort } from './servers/free-port.mjs';
import { startRedis } from './servers/redis.mjs';

export { freePort };

/** A real Redis for the tests: `REDIS_URL` when set, else a private redis-server from PATH. */
export interface TestRedis {
  url: string;
  port: number;
  /** Stops a private server (a no-op with REDIS_URL). */
  stop(): Promise<void>;
  /** Stops and starts a private server on the same port and data directory (fault tests). */
  restart(): Promise<void>;
  /** Stops a private server without forgetting it; `start()` brings it back on the same port. */
  kill(): Promise<void>;
  start(): Promise<void>;
}

export interface TestRedisOptions {
  /**
   * Write every command to an append-only file, synced at once (default true), so `restart()`
   * keeps the data. `false` for tests that write a lot and never restart Redis.
   */
  persistence?: boolean;
}

/** See servers/redis.mjs, which the benches start too. */
export function startTestRedis({ persistence = true }: TestRedisOptions = {}): Promise<TestRedis> {
  return startRedis({
    persistence,
    onMissing: () => {
      throw new Error(
        'These tests need Redis: run `npm test` (it installs redis-server when it can, or says how), install redis-server (apt-get install -y redis-server) or set REDIS_URL',
      );
    },
  });
}
