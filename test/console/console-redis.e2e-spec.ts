import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { TasksService } from '../../src/index.js';
import { RedisTaskStore, redisNotifier } from '../../src/redis/index.js';
import { startApp, type RunningApp } from '../support/app.js';
import { startTestRedis, type TestRedis } from '../support/redis-server.js';
import { ADMIN, call, consoleApp, openStream } from './console-app.js';

/**
 * The console of one instance, with two instances sharing a real Redis (store and notifier): it
 * lists the tasks the other instance made, streams the changes the other instance writes (but not
 * its creations, which the notifier does not publish), and cancels a task the other instance runs.
 */
describe('task console across two instances on Redis', () => {
  let redis: TestRedis;
  let a: RunningApp;
  let b: RunningApp;
  let baseA: string;
  let tasksB: TasksService;

  beforeAll(async () => {
    redis = await startTestRedis();
    const connection = { connection: redis.url, prefix: `console-e2e-${process.pid}:` };
    const instance = () =>
      consoleApp(
        {},
        { store: new RedisTaskStore(connection), notifier: redisNotifier(connection) },
      );
    a = await startApp(instance(), 'express');
    b = await startApp(instance(), 'express');
    baseA = new URL('/', a.url).href;
    tasksB = b.app.get(TasksService);
  });

  afterAll(async () => {
    await a?.close();
    await b?.close();
    await redis?.stop();
  });

  it("lists and shows the other instance's tasks, and streams the changes it writes", async () => {
    const stream = await openStream(baseA, '/mcp-tasks/api/stream', ADMIN);
    try {
      await stream.waitFor(/: connected/);
      const made = await tasksB.create({ principal: 'grace' }, {}, { toolName: 'far_away' });

      // Its creation is not published to other instances: the listing shows it.
      const listing = await call(baseA, 'GET', '/mcp-tasks/api/tasks?tool=far_away', ADMIN);
      expect(listing.status).toBe(200);
      const listed = listing.json().tasks as { taskId: string; owner: { principal: string } }[];
      expect(listed.map((task) => task.taskId)).toEqual([made.taskId]);
      expect(listed[0]!.owner.principal).toBe('grace');

      // A change written on B reaches A's stream through the Redis notifier.
      const written = await tasksB.progress(made.taskId, 'written on B');
      const frame = await stream.waitFor(
        new RegExp(`data: [^\\n]*${made.taskId}[^\\n]*written on B[^\\n]*`),
        5_000,
      );
      expect(JSON.parse(frame.slice('data: '.length))).toMatchObject({
        taskId: made.taskId,
        statusMessage: 'written on B',
        version: written.version,
      });
      expect(stream.text()).not.toMatch(new RegExp(`${made.taskId}[^\\n]*"version":1\\}`));

      // A's detail reads the store, and its history has what A heard.
      const detail = await call(baseA, 'GET', `/mcp-tasks/api/tasks/${made.taskId}`, ADMIN);
      expect(detail.status).toBe(200);
      const body = detail.json();
      expect(body).toMatchObject({ toolName: 'far_away', statusMessage: 'written on B' });
      expect((body.history as { statusMessage: string | null }[]).at(-1)).toMatchObject({
        statusMessage: 'written on B',
      });
    } finally {
      stream.close();
    }
    await stream.ended;
  });

  it("cancels, from A's console, a task B made; B sees it cancelled", async () => {
    const made = await tasksB.create({ principal: 'heidi' }, {}, { toolName: 'far_away' });
    const cancelled = await call(
      baseA,
      'POST',
      `/mcp-tasks/api/tasks/${made.taskId}/cancel`,
      { ...ADMIN, 'content-type': 'application/json' },
      '{}',
    );
    expect(cancelled.status).toBe(200);
    expect(cancelled.json()).toMatchObject({ taskId: made.taskId, status: 'cancelled' });
    expect((await tasksB.get(made.taskId, { principal: 'heidi' })).status).toBe('cancelled');
  });
});
