import { createRequire } from 'node:module';
import type { Cluster, ClusterNode, ClusterOptions, Redis, RedisOptions } from 'ioredis';
import { TasksConfigError } from '../errors.js';

/** A client of one Redis, or of a Redis Cluster (see docs/redis-cluster.md). */
export type RedisClient = Redis | Cluster;

/** The nodes of a Redis Cluster to start from, and ioredis `Cluster` options. */
export interface RedisClusterConnection {
  cluster: ClusterNode[];
  options?: ClusterOptions;
}

/** How a Redis-backed part reaches Redis: a client the app owns, or options to make one. */
export interface RedisConnectionOptions {
  /** An ioredis client (`Redis` or `Cluster`) the app owns; the part uses it, never closes it. */
  client?: RedisClient;
  /**
   * A `redis://` URL or ioredis options, or `{ cluster: nodes, options? }` for a Redis Cluster:
   * the part makes its own client and closes it.
   */
  connection?: string | RedisOptions | RedisClusterConnection;
  /** Prefix of every key and channel. Default `'mcp-tasks:'`. */
  prefix?: string;
  /** A Redis call that takes longer fails with "Task store unavailable". Default 5 s. */
  timeoutMs?: number;
}

export const DEFAULT_PREFIX = 'mcp-tasks:';
export const DEFAULT_REDIS_TIMEOUT_MS = 5_000;

interface Ioredis {
  Redis: new (...args: unknown[]) => Redis;
  Cluster: new (nodes: ClusterNode[], options?: ClusterOptions) => Cluster;
}

/** Loads ioredis, an optional peer dependency, with a clear message when it is missing. */
function loadIoredis(): Ioredis {
  try {
    const module = createRequire(import.meta.url)('ioredis') as Partial<Ioredis> & {
      default?: Ioredis['Redis'] & { Cluster?: Ioredis['Cluster'] };
    };
    const Redis = (module.Redis ?? module.default) as Ioredis['Redis'];
    return { Redis, Cluster: (module.Cluster ?? module.default?.Cluster) as Ioredis['Cluster'] };
  } catch {
    throw new TasksConfigError('The Redis store and notifier need ioredis: npm install ioredis');
  }
}

/** The client to use, and whether the part made it (and so closes it). */
export function connect(
  options: RedisConnectionOptions,
  role: string,
): { client: RedisClient; owned: boolean } {
  if (options.client !== undefined) return { client: options.client, owned: false };
  const { connection } = options;
  if (connection === undefined) {
    throw new TasksConfigError(`${role} needs a client or connection options`);
  }
  const { Redis, Cluster } = loadIoredis();
  const timeoutMs = options.timeoutMs ?? DEFAULT_REDIS_TIMEOUT_MS;
  // While Redis is away, a queued call fails after one reconnect attempt (maxRetriesPerRequest),
  // not when Redis comes back: a call reported as failed must not run later, unseen. Calls
  // issued before the first connection wait for it. ioredis keeps reconnecting by itself.
  const defaults: RedisOptions = { maxRetriesPerRequest: 1, connectTimeout: timeoutMs };
  let client: RedisClient;
  if (typeof connection === 'string') {
    client = new Redis(connection, defaults);
  } else if ('cluster' in connection) {
    // The same defaults for the connection to each node (the cluster's own retries stay).
    const { cluster: nodes, options: clusterOptions = {} } = connection;
    client = new Cluster(nodes, {
      ...clusterOptions,
      redisOptions: { ...defaults, ...clusterOptions.redisOptions },
    });
  } else {
    client = new Redis({ ...defaults, ...connection });
  }
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
export async function release(client: RedisClient, owned: boolean, ms: number): Promise<void> {
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
