export interface PrivateRedis {
  url: string;
  port: number;
  /** Whether the server is this process's own (false with REDIS_URL). */
  own: boolean;
  /** Stops the server and removes its directory (a no-op with REDIS_URL). */
  stop(): Promise<void>;
  /** Stops and starts the server on the same port and data directory (fault tests). */
  restart(): Promise<void>;
  /** Stops the server without forgetting it; `start()` brings it back on the same port. */
  kill(): Promise<void>;
  start(): Promise<void>;
}

export function startRedis(options?: {
  /** Part of the temporary directory's name. Default `'redis'`. */
  name?: string;
  /** An append-only file synced at every command, so `restart()` keeps the data. Default true. */
  persistence?: boolean;
  /** Called when redis-server is not on PATH; by default it throws. */
  onMissing?: () => never;
  /** Gets at once a synchronous `halt()` that kills the server and removes its directory. */
  track?: (halt: () => void) => void;
}): Promise<PrivateRedis>;
