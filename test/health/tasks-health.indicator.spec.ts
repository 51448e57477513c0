import { afterEach, describe, expect, it } from '@jest/globals';
import type { INestApplicationContext } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { TasksHealthIndicator, TasksHealthModule } from '../../src/health/index.js';
import type { Redis } from 'ioredis';
import { type TaskRecord, TasksModule } from '../../src/index.js';
import type { PartProvider } from '../../src/entries/options.js';
import { InMemoryTaskStore, type TaskNotifier, type TaskStore } from '../../src/entries/store.js';
import { ListenFeed } from '../../src/notify/listen-feed.js';
import { RedisTaskNotifier } from '../../src/redis/index.js';
import type {
  TaskStoreCleanupOptions,
  TaskStoreCreateOptions,
} from '../../src/store/task-store.js';

/** TasksHealthIndicator on stores that answer, hang, fail, or have no `ping`. */

const apps: INestApplicationContext[] = [];

async function indicatorFor(
  options: Parameters<typeof TasksModule.forRoot>[0],
): Promise<TasksHealthIndicator> {
  const moduleRef = await Test.createTestingModule({
    imports: [TasksModule.forRoot({ janitor: false, ...options }), TasksHealthModule],
  }).compile();
  const app = await moduleRef.init();
  apps.push(app);
  return app.get(TasksHealthIndicator);
}

afterEach(async () => {
  while (apps.length > 0) await apps.pop()!.close();
});

/**
 * A store whose ping never answers once `away` (set after the boot: startup waits for a store
 * that does not answer).
 */
class HangingStore extends InMemoryTaskStore {
  away = false;
  override ping(): Promise<void> {
    return this.away ? new Promise(() => undefined) : super.ping();
  }
}

/** A store whose ping fails with a multi-line message once `away`. */
class FailingStore extends InMemoryTaskStore {
  away = false;
  override ping(): Promise<void> {
    return this.away
      ? Promise.reject(new Error('connection refused\n    at somewhere (file.js:1:1)'))
      : super.ping();
  }
}

/** The indicator of an app on `store`, which goes away once the app has started. */
async function indicatorAway(store: HangingStore | FailingStore): Promise<TasksHealthIndicator> {
  const indicator = await indicatorFor({ store });
  store.away = true;
  return indicator;
}

/** A store without `ping`: the indicator reads a task that does not exist. */
class PinglessStore implements TaskStore {
  readonly reads: string[] = [];
  private readonly inner = new InMemoryTaskStore();
  create(record: TaskRecord, options: TaskStoreCreateOptions): Promise<void> {
    return this.inner.create(record, options);
  }
  get(taskId: string): Promise<TaskRecord | null> {
    this.reads.push(taskId);
    return this.inner.get(taskId);
  }
  compareAndSet(record: TaskRecord, expectedVersion: number): Promise<boolean> {
    return this.inner.compareAndSet(record, expectedVersion);
  }
  delete(taskId: string): Promise<boolean> {
    return this.inner.delete(taskId);
  }
  cleanup(now: number, options: TaskStoreCleanupOptions): Promise<number> {
    return this.inner.cleanup(now, options);
  }
}

describe('TasksHealthIndicator', () => {
  it('is up on the in-memory store, with its latency, class and notifier', async () => {
    const indicator = await indicatorFor({});
    const result = await indicator.isHealthy('tasks');
    expect(result).toEqual({
      tasks: {
        status: 'up',
        store: 'InMemoryTaskStore',
        notifier: 'in-process',
        storeLatencyMs: expect.any(Number),
      },
    });
    expect(result.tasks.storeLatencyMs).toBeGreaterThanOrEqual(0);
    expect(result.tasks.storeLatencyMs).toBeLessThan(100);
  });

  it('reports under the key it is given, and notifier "none" when notifications are off', async () => {
    const indicator = await indicatorFor({ notifier: null });
    const result = await indicator.isHealthy('my-tasks');
    expect(result['my-tasks']).toMatchObject({ status: 'up', notifier: 'none' });
  });

  it('is down within its timeout when the store does not answer', async () => {
    const indicator = await indicatorAway(new HangingStore());
    const started = Date.now();
    const result = await indicator.isHealthy('tasks', { timeoutMs: 200 });
    const elapsed = Date.now() - started;
    expect(result).toEqual({
      tasks: {
        status: 'down',
        store: 'HangingStore',
        notifier: 'in-process',
        reason: 'the store did not answer within 200 ms',
      },
    });
    expect(elapsed).toBeGreaterThanOrEqual(190);
    expect(elapsed).toBeLessThan(400);
  });

  it('waits 1,000 ms by default', async () => {
    const indicator = await indicatorAway(new HangingStore());
    const started = Date.now();
    const result = await indicator.isHealthy();
    const elapsed = Date.now() - started;
    expect(result.tasks).toMatchObject({
      status: 'down',
      reason: 'the store did not answer within 1000 ms',
    });
    expect(elapsed).toBeGreaterThanOrEqual(990);
    expect(elapsed).toBeLessThan(1_300);
  });

  it('is down with the first line of the error when the store fails, never a stack', async () => {
    const indicator = await indicatorAway(new FailingStore());
    const result = await indicator.isHealthy();
    expect(result.tasks).toEqual({
      status: 'down',
      store: 'FailingStore',
      notifier: 'in-process',
      reason: 'the store failed: connection refused',
    });
  });

  it('reads a random task id on a store without ping', async () => {
    const store = new PinglessStore();
    const indicator = await indicatorFor({ store });
    const result = await indicator.isHealthy();
    expect(result.tasks).toMatchObject({ status: 'up', store: 'PinglessStore' });
    expect(store.reads).toHaveLength(1);
    expect(store.reads[0]).toMatch(/^health-[0-9a-f-]{36}$/);
    await indicator.isHealthy();
    expect(new Set(store.reads).size).toBe(2);
  });

  it('with the Redis notifier, is down while its subscriber is not connected', async () => {
    const subscriber = {
      status: 'reconnecting',
      on: () => subscriber,
      once: () => subscriber,
      subscribe: () => Promise.resolve(1),
      // What the notifier's shutdown calls on a subscriber that is not ready.
      disconnect: () => {
        subscriber.status = 'end';
      },
    };
    const client = { status: 'ready', duplicate: () => subscriber } as unknown as Redis;
    const indicator = await indicatorFor({
      notifier: {
        useFactory: (feed: ListenFeed) => new RedisTaskNotifier({ client }, feed),
        inject: [ListenFeed],
      } as PartProvider<TaskNotifier>,
    });
    expect((await indicator.isHealthy()).tasks).toMatchObject({
      status: 'down',
      store: 'InMemoryTaskStore',
      notifier: 'redis',
      storeLatencyMs: expect.any(Number),
      reason: 'the Redis notifier is not subscribed',
    });
    subscriber.status = 'ready';
    expect((await indicator.isHealthy()).tasks).toMatchObject({ status: 'up', notifier: 'redis' });
    subscriber.status = 'end';
  });
});
