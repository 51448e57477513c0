import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { type DemoOnRedis, startDemoOnRedis } from '../support/demo-on-redis.js';
import { startTestRedis, type TestRedis } from '../support/redis-server.js';
import type { RunningApp } from '../support/app.js';
import { eventually, rpc } from '../support/sse.js';

/**
 * The demo as the README runs it with REDIS_URL: `npm start` offers long_job, a queue-run tool,
 * and `npm run worker` (the same module as an application context) runs its jobs. Here the
 * instance that takes the call runs none (`worker: false`), so the job can only run on the worker.
 */
describe('the demo on Redis: long_job runs on the worker process', () => {
  let redis: TestRedis;
  let demo: DemoOnRedis;
  let api: RunningApp;

  beforeAll(async () => {
    redis = await startTestRedis();
    demo = await startDemoOnRedis(redis.url);
    api = demo.api;
  }, 60_000);

  afterAll(async () => {
    await demo?.close();
    await redis?.stop();
  });

  it('lists long_job, reports progress each second and completes with its text', async () => {
    const tools = await rpc(api.url, 'tools/list', {}, { principal: 'alice' });
    const names = (tools.body.result as { tools: { name: string }[] }).tools.map((t) => t.name);
    expect(names).toContain('long_job');

    const created = await rpc(
      api.url,
      'tools/call',
      { name: 'long_job', arguments: { seconds: 2 } },
      { principal: 'alice', declareTasks: true },
    );
    const taskId = (created.body.result as { taskId: string }).taskId;
    expect(typeof taskId).toBe('string');
    const get = async () =>
      (await rpc(api.url, 'tasks/get', { taskId }, { principal: 'alice' })).body.result as {
        status: string;
        statusMessage?: string;
        result?: { content: { text: string }[] };
      };
    await eventually(
      async () => ((await get()).statusMessage === '1s of 2s' ? true : undefined),
      5_000,
      'the first progress message',
    );
    const done = await eventually(
      async () => {
        const task = await get();
        return task.status === 'working' ? undefined : task;
      },
      10_000,
      'the end of long_job',
    );
    expect(done.status).toBe('completed');
    expect(done.result?.content[0]?.text).toBe('done after 2s');
  }, 30_000);

  it('refuses arguments that are not an integer number of seconds, creating no task', async () => {
    const answer = await rpc(
      api.url,
      'tools/call',
      { name: 'long_job', arguments: { seconds: 1.5 } },
      { principal: 'alice', declareTasks: true },
    );
    const result = answer.body.result as { isError?: boolean; taskId?: string };
    expect(result.isError).toBe(true);
    expect(result.taskId).toBeUndefined();
  });
});
