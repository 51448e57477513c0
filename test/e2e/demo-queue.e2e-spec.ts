import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { demoQueue, demoQueueLine } from '../../examples/demo.module.js';
import {
  DEMO_QUEUE_SERVERS,
  type DemoOnQueue,
  startDemoOnQueue,
} from '../support/demo-on-queue.js';
import type { RunningApp } from '../support/app.js';
import { eventually, rpc } from '../support/sse.js';

/**
 * The demo as the README runs it with REDIS_URL alone (BullMQ) and with POSTGRES_URL alone
 * (pg-boss): `npm start` offers long_job, a queue-run tool, and `npm run worker` (the same module
 * as an application context) runs its jobs. Here the instance that takes the call runs none
 * (`worker: false`), so the job can only run on the worker.
 */
describe('the runner the demo picks from its environment', () => {
  it('BullMQ with REDIS_URL (with or without POSTGRES_URL), pg-boss with POSTGRES_URL alone', () => {
    const redis = 'redis://127.0.0.1:6379';
    const postgres = 'postgres://127.0.0.1:5432/postgres';
    expect(demoQueue({})).toBeUndefined();
    expect(demoQueue({ REDIS_URL: redis })?.runner).toBe('bullmq');
    expect(demoQueue({ REDIS_URL: redis, POSTGRES_URL: postgres })?.runner).toBe('bullmq');
    expect(demoQueue({ POSTGRES_URL: postgres })?.runner).toBe('pg-boss');
    // The startup line names the runner and the variable that chose it.
    expect(demoQueueLine({})).toMatch(/not offered \(neither REDIS_URL nor POSTGRES_URL/);
    expect(demoQueueLine({ REDIS_URL: redis })).toMatch(/BullMQ on Redis \(REDIS_URL is set\)/);
    expect(demoQueueLine({ POSTGRES_URL: postgres })).toMatch(
      /pg-boss on PostgreSQL \(POSTGRES_URL is set, REDIS_URL is not\)/,
    );
  });
});

describe.each(DEMO_QUEUE_SERVERS)('the demo on %s: long_job runs on the worker', (server) => {
  let demo: DemoOnQueue;
  let api: RunningApp;

  beforeAll(async () => {
    demo = await startDemoOnQueue(server);
    api = demo.api;
  }, 60_000);

  afterAll(async () => {
    await demo?.close();
  }, 30_000);

  it('runs on the runner the README says', () => {
    expect(demo.runner).toBe(server === 'redis' ? 'bullmq' : 'pg-boss');
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
