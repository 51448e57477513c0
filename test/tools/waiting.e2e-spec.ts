/**
 * Waiting costs no store reads: a running call and an input wait hear changes through the
 * in-process feed (the in-memory store) or the Redis notifier, and re-read the store only where
 * a change could otherwise be missed (a lost message: once per janitor interval; an expiry).
 */
import { Injectable, Module } from '@nestjs/common';
import {
  TaskTool,
  TasksModule,
  TasksService,
  type TaskContext,
  type TaskRecord,
} from '../../src/index.js';
import { InMemoryTaskStore, type TaskOwner } from '../../src/entries/store.js';
import { TaskToolRunner } from '../../src/tools/task-tool.runner.js';
import { RedisTaskStore, redisNotifier } from '../../src/redis/index.js';
import { startTestRedis, type TestRedis } from '../support/redis-server.js';
import { ADAPTERS, type RunningApp, startApp } from '../support/app.js';
import { mcpRequest, post } from '../support/raw.js';
import { parseMessage } from '../support/wire.js';
import { elicit } from '../support/helpers.js';

/** The in-memory store, counting its reads. */
class CountingStore extends InMemoryTaskStore {
  reads = 0;
  override async get(taskId: string, owner?: TaskOwner): Promise<TaskRecord | null> {
    this.reads++;
    return super.get(taskId, owner);
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function until(check: () => boolean | Promise<boolean>, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await sleep(10);
  }
}

@Injectable()
class WaitingTools {
  /** Polls every 20 ms by its own account: a periodic re-read would show at once. */
  @TaskTool({ name: 'ask', pollIntervalMs: 20 })
  async ask(_input: unknown, task: TaskContext) {
    const { name } = await task.requireInput({ name: elicit('Name?') });
    return `Hello, ${String((name.content as { name?: unknown } | undefined)?.name)}!`;
  }

  @TaskTool({ name: 'work', pollIntervalMs: 20 })
  async work(_input: unknown, task: TaskContext) {
    await new Promise((_, reject) =>
      task.signal.addEventListener('abort', () => reject(task.signal.reason), { once: true }),
    );
  }

  /** A task of 300 ms that waits for input longer than it lives. */
  @TaskTool({ name: 'short_lived', ttlMs: 300, pollIntervalMs: 20 })
  async shortLived(_input: unknown, task: TaskContext) {
    await task.requireInput({ name: elicit('Name?') });
    return 'answered';
  }
}

const call = async (url: string, name: string, principal = 'alice') => {
  const answer = await post(url, mcpRequest('tools/call', { name, arguments: {} }, { principal }));
  return parseMessage(answer.text)!.result as { taskId: string; status: string };
};

describe.each(ADAPTERS)('waiting without store reads: in-memory store (%s)', (adapter) => {
  let app: RunningApp;
  let store: CountingStore;
  beforeEach(async () => {
    store = new CountingStore();
    @Module({
      imports: [TasksModule.forRoot({ store, principal: () => 'alice' })],
      providers: [WaitingTools],
    })
    class WaitingModule {}
    app = await startApp(WaitingModule, adapter);
  });
  afterEach(() => app.close());

  it('a call waiting for input and a working call read nothing while they wait', async () => {
    const asking = await call(app.url, 'ask');
    const working = await call(app.url, 'work');
    const service = app.app.get(TasksService);
    await until(async () => (await service.status(asking.taskId)).status === 'input_required');
    await sleep(50);
    const before = store.reads;
    await sleep(500); // 25 poll intervals of these tools
    expect(store.reads - before).toBe(0);

    // The answer and the cancel still reach the calls at once, through the feed.
    await service.update(
      asking.taskId,
      { principal: 'alice' },
      {
        name: { action: 'accept', content: { name: 'Ada' } },
      },
    );
    await service.cancel(working.taskId, { principal: 'alice' });
    await until(async () => (await service.status(asking.taskId)).status === 'completed', 1_000);
    const runner = app.app.get(TaskToolRunner);
    await until(() => runner.size === 0, 1_000);
  });

  it('a wait on a task that expires ends when it expires (one read at the expiry)', async () => {
    await call(app.url, 'short_lived');
    const runner = app.app.get(TaskToolRunner);
    expect(runner.size).toBe(1);
    await until(() => runner.size === 0, 2_000);
  });
});

describe('waiting without periodic reads: Redis store and notifier, two instances', () => {
  let redis: TestRedis;
  let a: RunningApp;
  let b: RunningApp;
  const prefix = `waiting-${process.pid}-${Date.now()}:`;

  /** The Redis store, counting its reads. */
  class CountingRedisStore extends RedisTaskStore {
    reads = 0;
    override async get(taskId: string, owner?: TaskOwner): Promise<TaskRecord | null> {
      this.reads++;
      return super.get(taskId, owner);
    }
  }
  let storeOfA: CountingRedisStore;

  /** An instance on the shared Redis; `notify: false` writes without telling anyone. */
  const boot = async (notify: boolean, store?: RedisTaskStore): Promise<RunningApp> => {
    const connection = { connection: redis.url, prefix };
    @Module({
      imports: [
        TasksModule.forRoot({
          principal: () => 'alice',
          store: store ?? new RedisTaskStore(connection),
          notifier: notify ? redisNotifier(connection) : null,
          janitor: { intervalMs: 400 },
        }),
      ],
      providers: [WaitingTools],
    })
    class RedisWaitingModule {}
    return startApp(RedisWaitingModule, 'express');
  };

  beforeAll(async () => {
    redis = await startTestRedis();
    storeOfA = new CountingRedisStore({ connection: redis.url, prefix });
    a = await boot(true, storeOfA);
  });
  afterAll(async () => {
    await a?.close();
    await redis?.stop();
  });

  it('a cancel written where no message goes out reaches the running call by the safety re-read', async () => {
    b = await boot(false);
    try {
      const working = await call(a.url, 'work');
      const runner = a.app.get(TaskToolRunner);
      expect(runner.size).toBe(1);
      // B cancels with no notifier: A hears nothing, as when a Redis message is lost.
      await b.app.get(TasksService).cancel(working.taskId, { principal: 'alice' });
      await until(() => runner.size === 0, 3_000);
    } finally {
      await b.close();
    }
  });

  it('with the notifier, a cancel from another instance reaches the call at once', async () => {
    b = await boot(true);
    try {
      const working = await call(a.url, 'work');
      const runner = a.app.get(TaskToolRunner);
      // While it works: at most a safety re-read per janitor interval (400 ms), where the tool's
      // own poll interval (20 ms) would have read 40 times in these 800 ms.
      await sleep(100);
      const before = storeOfA.reads;
      await sleep(800);
      expect(storeOfA.reads - before).toBeLessThanOrEqual(3);
      await b.app.get(TasksService).cancel(working.taskId, { principal: 'alice' });
      await until(() => runner.size === 0, 3_000);
    } finally {
      await b.close();
    }
  });
});
