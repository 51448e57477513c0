import { createRequire } from 'node:module';
import type { Cluster, ClusterNode, ClusterOptions, Redis, RedisOptions } from 'ioredis';
import { StoreUnavailableError, TasksConfigError } from '../errors.js';

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

/** A Redis-backed part's connection: its client, and the options' values with their defaults. */
export interface RedisLink {
  readonly client: RedisClient;
  /** Whether the part made the client (and so closes it). */
  readonly owned: boolean;
  /** Prefix of every key and channel (`options.prefix`, or DEFAULT_PREFIX). */
  readonly prefix: string;
  /** Bound of every call (`options.timeoutMs`, or DEFAULT_REDIS_TIMEOUT_MS). */
  readonly timeoutMs: number;
}

/** The client to use, whether the part made it, and the prefix and timeout it works with. */
export function connect(options: RedisConnectionOptions, role: string): RedisLink {
  const prefix = options.prefix ?? DEFAULT_PREFIX;
  const timeoutMs = options.timeoutMs ?? DEFAULT_REDIS_TIMEOUT_MS;
  return { ...clientOf(options, role, timeoutMs), prefix, timeoutMs };
}

/** The app's client, or one made from the connection options. */
function clientOf(
  options: RedisConnectionOptions,
  role: string,
  timeoutMs: number,
): { client: RedisClient; owned: boolean } {
  if (options.client !== undefined) return { client: options.client, owned: false };
  const { connection } = options;
  if (connection === undefined) {
    throw new TasksConfigError(`${role} needs a client or connection options`);
  }
  const { Redis, Cluster } = loadIoredis();
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
  // A connection error is reported by the calls that fail (see `redisFault`, which names it);
  // ioredis reconnects by itself.
  watchErrors(client);
  return { client, owned: true };
}

/** The last connection error of each client a part made (`connect`, or a duplicate it made). */
const lastErrors = new WeakMap<RedisClient, string>();

/**
 * Keeps `client`'s connection errors (ECONNREFUSED, ENOTFOUND, WRONGPASS...) for `redisFault`,
 * which names the last one: a failed call alone says only that it ran out of retries. For clients
 * a part made; an app's own client keeps its own error listeners.
 */
export function watchErrors(client: RedisClient): void {
  client.on('error', (error: unknown) => {
    lastErrors.set(client, messageOfError(error));
  });
}

/**
 * Where `client` connects, for messages: `host:port`, a socket path, a Sentinel group or a
 * Cluster's first nodes. Never a password (a URL's is parsed into options, and not read here).
 */
export function redisAddress(client: RedisClient): string {
  if (client.isCluster) {
    const nodes = (client as unknown as { startupNodes?: unknown[] }).startupNodes ?? [];
    return `the Redis Cluster at ${nodes.map(nodeAddress).join(', ') || 'no node'}`;
  }
  const options = (client as Redis).options ?? {};
  if (options.sentinels?.length) {
    const sentinels = options.sentinels.map((node) => nodeAddress(node)).join(', ');
    return `the Redis primary "${options.name ?? 'mymaster'}" of the Sentinels at ${sentinels}`;
  }
  if (options.path) return `Redis at ${options.path}`;
  return `Redis at ${hostPort(options.host ?? 'localhost', options.port ?? 6379)}`;
}

/** `host:port`, with an IPv6 host in brackets. */
function hostPort(host: string, port: number | string): string {
  return `${host.includes(':') ? `[${host}]` : host}:${port}`;
}

/** A Cluster or Sentinel node as `host:port` (its options may be a port, a string or an object). */
function nodeAddress(node: unknown): string {
  if (typeof node === 'number') return hostPort('localhost', node);
  if (typeof node === 'string') {
    // A URL: only its host and port (it may hold a password).
    try {
      const url = new URL(node.includes('://') ? node : `redis://${node}`);
      return hostPort(url.hostname || 'localhost', url.port || 6379);
    } catch {
      return 'an unreadable address';
    }
  }
  const { host, port } = (node ?? {}) as { host?: string; port?: number };
  return hostPort(host ?? 'localhost', port ?? 6379);
}

/** An error's message, without the "Error: " some connection errors repeat in it. */
function messageOfError(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).replace(/^Error: /, '');
}

/**
 * A Redis call that failed, naming where Redis was sought: the part's `role`, the address, what
 * went wrong (the last connection error when the client is not connected: "connect ECONNREFUSED
 * 127.0.0.1:6379" says more than ioredis's "Reached the max retries per request limit") and what
 * to check. The original error is its `cause`.
 */
export class RedisUnavailableError extends StoreUnavailableError {}

/** `error` of a call on `client` by `role`, as a RedisUnavailableError that names the address. */
export function redisFault(client: RedisClient, role: string, error: unknown): Error {
  if (error instanceof RedisUnavailableError) return error;
  const address = redisAddress(client);
  const own = messageOfError(error);
  // Redis answered with an error: where it came from is what to add (and, for a refused login,
  // what to check).
  if (isReplyError(error)) {
    const hint = /^(NOAUTH|WRONGPASS)/.test(own)
      ? `: check the username and password of ${role}'s connection`
      : '';
    return new RedisUnavailableError(address, `${address} answered ${role}: ${own}${hint}`, {
      cause: error,
    });
  }
  const last = client.status === 'ready' ? undefined : lastErrors.get(client);
  let reason = own;
  if (last !== undefined && last !== own) {
    reason = (error as Error)?.name === 'MaxRetriesPerRequestError' ? last : `${own}; ${last}`;
  }
  return new RedisUnavailableError(
    address,
    `${role} could not reach ${address} (${reason}): check that Redis runs there and that ` +
      `${role}'s connection names the right host and port`,
    { cause: error },
  );
}

/** Whether Redis itself answered with this error (ioredis's ReplyError), rather than not at all. */
function isReplyError(error: unknown): boolean {
  return error instanceof Error && error.name === 'ReplyError';
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
  // One promise and one timer per call (no race, no finally): this wraps every store call.
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(timedOut()), ms);
    timer.unref();
    operation.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error);
      },
    );
  });
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
