import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Redis } from 'ioredis';
import { type DemoOnRedis, startDemoOnRedis } from '../support/demo-on-redis.js';
import type { RunningApp } from '../support/app.js';
import { rpc } from '../support/sse.js';
import { startTestRedis, type TestRedis } from '../support/redis-server.js';

/**
 * Issue 34, item 4: one principal cannot starve the others on a queue-run tool. The demo as the
 * README runs it on Redis: an instance that takes calls (`worker: false`) and a worker process
 * (`npm run worker`: the same module as an application context, with the demo's worker settings,
 * BullMQ's default concurrency of 1). `mallory` queues 20 `long_job` calls of 3 s each; `bob`
 * then calls `long_job` for 1 s. Bob's task must complete within 6 s of his call: the job
 * mallory's worker is running (up to 3 s), then his own (1 s), with room for the polls. First
 * come, first served, he would wait behind all 20 (about 60 s: 61,117 ms on main before the
 * fix). Once mallory cancels hers, every owner's set of turns on the queue must be empty, and
 * every job must end (before the fix of JobCall, a job taken as its task was cancelled could wait
 * forever for its first read, and the worker never closed).
 */

/** How long bob's call may take, call to completed task. */
const BOB_WITHIN_MS = 6_000;
const MALLORY_JOBS = 20;

interface TaskView {
  status: string;
  statusMessage?: string;
}

describe("queue fairness: the demo's long_job across principals", () => {
  let redis: TestRedis;
  let demo: DemoOnRedis;
  let api: RunningApp;

  beforeAll(async () => {
    redis = await startTestRedis({ persistence: false });
    demo = await startDemoOnRedis(redis.url);
    api = demo.api;
  }, 30_000);

  afterAll(async () => {
    await demo?.close();
    await redis?.stop();
  }, 30_000);

  const call = async (principal: string, seconds: number): Promise<string> => {
    const answer = await rpc(
      api.url,
      'tools/call',
      { name: 'long_job', arguments: { seconds } },
      { principal, declareTasks: true },
    );
    const taskId = (answer.body.result as { taskId?: string } | undefined)?.taskId;
    if (typeof taskId !== 'string') throw new Error(`long_job: ${JSON.stringify(answer.body)}`);
    return taskId;
  };

  const get = async (principal: string, taskId: string): Promise<TaskView> =>
    (await rpc(api.url, 'tasks/get', { taskId }, { principal })).body.result as unknown as TaskView;

  it("bob's 1 s job completes within 6 s of his call while mallory has 20 jobs of 3 s queued", async () => {
    const mallory: string[] = [];
    for (let i = 0; i < MALLORY_JOBS; i++) mallory.push(await call('mallory', 3));

    const called = Date.now();
    const bob = await call('bob', 1);
    let task = await get('bob', bob);
    while (task.status === 'working' && Date.now() - called < BOB_WITHIN_MS + 1_000) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      task = await get('bob', bob);
    }
    const tookMs = Date.now() - called;
    process.stdout.write(
      `queue fairness: bob's task ${task.status} ${tookMs} ms after his call ` +
        `(statusMessage ${JSON.stringify(task.statusMessage ?? null)})\n`,
    );

    // Mallory's jobs are stopped (cancelled tasks): each ends as the worker takes it.
    for (const taskId of mallory) {
      await rpc(api.url, 'tasks/cancel', { taskId }, { principal: 'mallory' });
    }
    expect(task.status).toBe('completed');
    expect(tookMs).toBeLessThanOrEqual(BOB_WITHIN_MS);

    const raw = new Redis(redis.url);
    try {
      const deadline = Date.now() + 10_000;
      let left = await raw.keys('demo:bull:demo-jobs:fair:*');
      while (left.length > 0 && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 50));
        left = await raw.keys('demo:bull:demo-jobs:fair:*');
      }
      expect(left).toEqual([]);
    } finally {
      raw.disconnect();
    }
    // The job that ran when bob called completed; the rest were cancelled, run or not.
    const statuses = new Set<string>();
    for (const taskId of mallory) statuses.add((await get('mallory', taskId)).status);
    expect([...statuses].sort()).toEqual(['cancelled', 'completed']);
  }, 30_000);
});
