/**
 * A change written elsewhere just after the store came back, whose message never arrives (its
 * writer's notifier connection was still away): an instance whose listen stream watches the task
 * reads the watched tasks again a little after its own reconnect, so the stream hears the end
 * all the same. Real Redis, restarted; the change written by a service with no Redis notifier.
 */
import { Module } from '@nestjs/common';
import { TasksModule, TasksService } from '../../src/index.js';
import { RedisTaskNotifier, RedisTaskStore, redisNotifier } from '../../src/redis/index.js';
import { TaskNotifier } from '../../src/notify/task-notifier.js';
import { type RunningApp, startApp } from '../support/app.js';
import { eventually, openListen } from '../support/sse.js';
import { serviceWith, textResult } from '../support/helpers.js';
import { startTestRedis, type TestRedis } from '../support/redis-server.js';

describe('a change whose message never came, written just after a reconnect', () => {
  let redis: TestRedis;
  let app: RunningApp;

  beforeAll(async () => {
    redis = await startTestRedis();
    const connection = { connection: redis.url, prefix: 'unsent:', timeoutMs: 1_000 };
    @Module({
      imports: [
        TasksModule.forRoot({
          principal: () => 'alice',
          janitor: false,
          store: new RedisTaskStore(connection),
          notifier: redisNotifier(connection),
        }),
      ],
    })
    class UnsentModule {}
    app = await startApp(UnsentModule, 'express');
  });
  afterAll(async () => {
    await app?.close();
    await redis?.stop();
  });

  it('is heard by a listen stream within a few seconds of the reconnect', async () => {
    const tasks = app.app.get(TasksService);
    const { taskId } = await tasks.create({ principal: 'alice' });
    const listen = await openListen(app.url, { principal: 'alice', taskIds: [taskId] });
    const stream = listen.stream!;
    expect((await stream.next(5_000)).method).toBe('notifications/subscriptions/acknowledged');

    await redis.restart();
    const notifier = app.app.get<RedisTaskNotifier>(TaskNotifier);
    await eventually(() => notifier.subscribed || undefined, 10_000);
    // Past this instance's first catch-up read after the reconnect.
    await new Promise((resolve) => setTimeout(resolve, 500));
    // Another writer, whose change is never sent (its notifier records, publishes nothing).
    const writer = serviceWith(
      {},
      new RedisTaskStore({ connection: redis.url, prefix: 'unsent:', timeoutMs: 1_000 }),
    );
    await eventually(async () => {
      try {
        return await writer.service.complete(taskId, textResult('done elsewhere'));
      } catch {
        return undefined;
      }
    }, 5_000);

    const heard = await eventually(async () => {
      const message = await stream.next(6_000).catch(() => undefined);
      return (message?.params as { status?: string } | undefined)?.status === 'completed'
        ? message
        : undefined;
    }, 12_000);
    expect(heard).toBeDefined();
    await stream.close();
    await (writer.store as RedisTaskStore).onApplicationShutdown();
  }, 30_000);
});
