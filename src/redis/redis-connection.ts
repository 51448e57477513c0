import { createRequire } from 'node:module';
import type { Redis, RedisOptions } from 'ioredis';
import { TasksConfigError } from '../errors.js';

/** How a Redis-backed part reaches Redis: a client the app owns, or options to make one. */
export interface RedisConnectionOptions {
  /** An ioredis client the app owns; the part uses it and never closes it. */
  client?: Redis;
  /** A `redis://` URL or ioredis options: the part makes its own client and closes it. */
  connection?: string | RedisOptions;
  /** Prefix of every key and channel. Default `'mcp-tasks:'`. */
  prefix?: string;
  /** A Redis call that takes longer fails with "Task store unavailable". Default 5 s. */
  timeoutMs?: number;
}

export const DEFAULT_PREFIX = 'mcp-tasks:';
export const DEFAULT_REDIS_TIMEOUT_MS = 5_000;

type RedisConstructor = new (...args: unknown[]) => Redis;

/** Loads ioredis, an optional peer dependency, with a clear message when it is missing. */
function loadIoredis(): RedisConstructor {
  try {
    const module = createRequire(import.meta.url)('ioredis') as {
      Redis?: RedisConstructor;
      default?: RedisConstructor;
    };
    return (module.Redis ?? module.default) as RedisConstructor;
  } catch {
    throw new TasksConfigError('The Redis store and notifier need ioredis: npm install ioredis');
  }
}

/** The client to use, and whether the part made it (and so closes it). */
export function connect(
  options: RedisConnectionOptions,
  role: string,
): { client: Redis; owned: boolean } {
  if (options.client !== undefined) return { client: options.client, owned: false };
  if (options.connection === undefined) {
    throw new TasksConfigError(`${role} needs a client or connection options`);
  }
  const Redis = loadIoredis();
  const timeoutMs = options.timeoutMs ?? DEFAULT_REDIS_TIMEOUT_MS;
  // While Redis is away, a queued call fails after one reconnect attempt (maxRetriesPerRequest),
  // not when Redis comes back: a call reported as failed must not run later, unseen. Calls
  // issued before the first connection wait for it. ioredis keeps reconnecting by itself.
  const defaults: RedisOptions = { maxRetriesPerRequest: 1, connectTimeout: timeoutMs };
  const client =
    typeof options.connection === 'string'
      ? new Redis(options.connection, defaults)
      : new Redis({ ...defaults, ...options.connection });
  // A connection error is reported by the calls that fail; ioredis reconnects by itself.
  client.on('error', () => undefined);
  return { client, owned: true };
}

export class RedisTimeoutError extends Error {
  constructor(ms: number) {
    super(`Redis did not answer within ${ms} ms`);
    this.name = 'RedisTimeoutError';
  }
}

/** Rejects when `operation` takes longer than `ms`, with `timedOut()` (a RedisTimeoutError). */
export function withTimeout<T>(
  operation: Promise<T>,
  ms: number,
  timedOut: () => Error = () => new RedisTimeoutError(ms),
): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(timedOut()), ms);
    timer.unref();
  });
  return Promise.race([operation, timeout]).finally(() => clearTimeout(timer));
}

/** Closes a client the part made; leaves the app's own alone. Idempotent, bounded by `ms`. */
export async function release(client: Redis, owned: boolean, ms: number): Promise<void> {
  if (!owned || client.status === 'end') return;
  if (client.status !== 'ready') {
    // Between reconnect attempts there is nothing to say goodbye to.
    client.disconnect();
    return;
  }
  const ended = new Promise<void>((resolve) => client.once('end', () => resolve()));
  try {
    await withTimeout(client.quit(), ms);
    await withTimeout(ended, ms);
  } catch {
    client.disconnect();
  }
}
