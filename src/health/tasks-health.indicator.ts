import { randomUUID } from 'node:crypto';
import { Inject, Injectable } from '@nestjs/common';
import { type HealthIndicatorResult, HealthIndicatorService } from '@nestjs/terminus';
import { TaskNotifier } from '../notify/task-notifier.js';
import { withTimeout } from '../redis/redis-connection.js';
import { RedisTaskNotifier } from '../redis/redis.notifier.js';
import { TaskStore } from '../store/task-store.js';

/** How long a check waits for the store by default, in milliseconds. */
export const DEFAULT_HEALTH_TIMEOUT_MS = 1_000;

export interface TasksHealthCheckOptions {
  /** The check is down when the store takes longer to answer. Default 1,000 ms. */
  timeoutMs?: number;
}

/** Which notifier the app runs: the Redis one, another (in this process), or none. */
export type TasksHealthNotifier = 'redis' | 'in-process' | 'none';

/** What the indicator reports under its key, next to `status`. */
export interface TasksHealthDetails extends Record<string, unknown> {
  /** The store's class name (`RedisTaskStore`, `InMemoryTaskStore`, or the app's own). */
  store: string;
  notifier: TasksHealthNotifier;
  /** How long the store took to answer; absent when it did not. */
  storeLatencyMs?: number;
  /** Why the check is down; absent when it is up. */
  reason?: string;
}

/** A reason is one line of bounded length: a health answer is no place for a stack trace. */
const MAX_REASON = 200;

function shortReason(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  const line = message.split('\n', 1)[0]!.trim() || 'unknown error';
  return line.length > MAX_REASON ? `${line.slice(0, MAX_REASON - 1)}…` : line;
}

class HealthTimeoutError extends Error {
  constructor(ms: number) {
    super(`the store did not answer within ${ms} ms`);
  }
}

/**
 * A `@nestjs/terminus` health indicator for the tasks: it pings the TaskStore (its `ping`, or a
 * read of a task that does not exist when the store has none) and times it; with the Redis
 * notifier it also checks that the notifier's subscriber is connected, since without it this
 * instance would not hear what other instances write. Down when the store fails or takes longer
 * than the timeout, or when the subscriber is away.
 *
 * ```ts
 * @Get('health')
 * @HealthCheck()
 * check() {
 *   return this.health.check([() => this.tasksHealth.isHealthy('tasks')]);
 * }
 * ```
 */
@Injectable()
export class TasksHealthIndicator {
  constructor(
    private readonly indicators: HealthIndicatorService,
    @Inject(TaskStore) private readonly store: TaskStore,
    @Inject(TaskNotifier) private readonly notifier: TaskNotifier | null,
  ) {}

  /** Checks the store (and the Redis notifier); resolves within `timeoutMs`, never rejects. */
  async isHealthy<const Key extends string = 'tasks'>(
    key: Key = 'tasks' as Key,
    options: TasksHealthCheckOptions = {},
  ): Promise<HealthIndicatorResult<Key>> {
    const check = this.indicators.check(key);
    const details: TasksHealthDetails = {
      store: this.store.constructor?.name || 'TaskStore',
      notifier: this.notifierKind(),
    };
    const timeoutMs = options.timeoutMs ?? DEFAULT_HEALTH_TIMEOUT_MS;
    const started = performance.now();
    try {
      await withTimeout(this.ping(), timeoutMs, () => new HealthTimeoutError(timeoutMs));
    } catch (error) {
      const reason =
        error instanceof HealthTimeoutError
          ? error.message
          : shortReason(
              `the store failed: ${error instanceof Error ? error.message : String(error)}`,
            );
      return check.down({ ...details, reason });
    }
    details.storeLatencyMs = Math.round((performance.now() - started) * 10) / 10;
    if (this.notifier instanceof RedisTaskNotifier && !this.notifier.subscribed) {
      return check.down({ ...details, reason: 'the Redis notifier is not subscribed' });
    }
    return check.up(details);
  }

  private notifierKind(): TasksHealthNotifier {
    if (this.notifier === null || this.notifier === undefined) return 'none';
    return this.notifier instanceof RedisTaskNotifier ? 'redis' : 'in-process';
  }

  /** The store's own ping, or a read of a random id: one round trip either way. */
  private async ping(): Promise<void> {
    if (typeof this.store.ping === 'function') await this.store.ping();
    else await this.store.get(`health-${randomUUID()}`);
  }
}
