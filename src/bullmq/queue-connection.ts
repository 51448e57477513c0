import type { Queue } from 'bullmq';
import { TasksConfigError } from '../errors.js';

/** BullMQ's own defaults for a connection without a host or port. */
const BULLMQ_HOST = '127.0.0.1';
const BULLMQ_PORT = 6379;

/** How often a queue's repeated errors are logged, after the first. */
export const QUEUE_ERROR_LOG_MS = 60_000;

/** The options of a connection: its own, or those of an ioredis client given as the connection. */
function optionsOf(connection: unknown): Record<string, unknown> | undefined {
  if (connection === null || typeof connection !== 'object') return undefined;
  const client = connection as { status?: unknown; options?: unknown };
  if (typeof client.status === 'string' && typeof client.options === 'object') {
    return (client.options ?? {}) as Record<string, unknown>;
  }
  return connection as Record<string, unknown>;
}

/** Whether the app gave the queue a connection (an ioredis client, or options naming a server). */
export function hasConnection(connection: unknown): boolean {
  const options = optionsOf(connection);
  if (options === undefined) return false;
  if (options !== connection) return true;
  // A port read from an unset environment variable (`Number(undefined)`) names nothing either.
  return ['host', 'port', 'path', 'url', 'sentinels'].some(
    (key) => options[key] !== undefined && options[key] !== '' && !Number.isNaN(options[key]),
  );
}

/** `host:port`, with an IPv6 host in brackets. */
function hostPort(host: string, port: unknown): string {
  return `${host.includes(':') ? `[${host}]` : host}:${String(port)}`;
}

/**
 * Where a queue's connection leads, for messages: `Redis at host:port` (a socket path, a Sentinel
 * group or a Cluster's first nodes). Never a password: a URL is read for its host and port only.
 */
export function queueAddress(connection: unknown): string {
  const client = connection as { isCluster?: boolean; startupNodes?: unknown[] } | undefined;
  if (client?.isCluster === true) {
    const nodes = (client.startupNodes ?? []).map((node) => {
      const { host, port } = (typeof node === 'object' ? node : {}) as {
        host?: string;
        port?: number;
      };
      return hostPort(host ?? BULLMQ_HOST, port ?? BULLMQ_PORT);
    });
    return `the Redis Cluster at ${nodes.join(', ') || 'no node'}`;
  }
  const options = optionsOf(connection) ?? {};
  if (typeof options.url === 'string') {
    try {
      const url = new URL(options.url);
      return `Redis at ${hostPort(url.hostname || BULLMQ_HOST, url.port || BULLMQ_PORT)}`;
    } catch {
      return 'Redis at an unreadable URL';
    }
  }
  if (Array.isArray(options.sentinels) && options.sentinels.length > 0) {
    const sentinels = (options.sentinels as { host?: string; port?: number }[])
      .map((node) => hostPort(node.host ?? 'localhost', node.port ?? 26379))
      .join(', ');
    return `the Redis primary "${String(options.name ?? 'mymaster')}" of the Sentinels at ${sentinels}`;
  }
  if (typeof options.path === 'string') return `Redis at ${options.path}`;
  const host = typeof options.host === 'string' ? options.host : BULLMQ_HOST;
  return `Redis at ${hostPort(host, options.port ?? BULLMQ_PORT)}`;
}

/**
 * Fails the boot when a queue that task tools use has no connection of its own: BullMQ would use
 * 127.0.0.1:6379 without a word, while the task store may be elsewhere (a REDIS_URL).
 */
export function checkQueueConnection(queue: Queue): void {
  if (hasConnection(queue.opts.connection)) return;
  throw new TasksConfigError(
    `Task tools run on the queue "${queue.name}", which has no Redis connection (BullMQ would ` +
      `use ${BULLMQ_HOST}:${BULLMQ_PORT} without a word): give BullModule.forRoot({ connection }) ` +
      `from '@nestjs/bullmq' the Redis of your tasks, e.g. { connection: { url: process.env.REDIS_URL } }`,
  );
}

/** Whether an error says the connection failed (refused, unresolved, cut), not a command. */
function isConnectionError(error: unknown): boolean {
  const { syscall, message } = (error ?? {}) as { syscall?: unknown; message?: unknown };
  return (
    typeof syscall === 'string' ||
    (typeof message === 'string' && /Connection is closed|ECONN|ENOTFOUND|EAI_AGAIN/.test(message))
  );
}

/**
 * The log line of a queue's error: the queue, where its Redis is and, for a connection that
 * failed, what to check.
 */
export function queueFault(queue: string, connection: unknown, error: unknown): string {
  const address = queueAddress(connection);
  // Some connection errors repeat "Error: " in their message.
  const own = (error instanceof Error ? error.message : String(error)).replace(/^Error: /, '');
  if (!isConnectionError(error)) return `Queue ${queue} (${address}): ${own}`;
  return (
    `Queue ${queue} could not reach ${address} (${own}): check that Redis runs there and that ` +
    `the queue's connection (BullModule.forRoot or registerQueue) names the right host and port`
  );
}
