import { afterAll, beforeAll, expect, it } from '@jest/globals';
import { RedisTaskStore, redisNotifier } from '../../src/redis/index.js';
import { eventually, rpc } from '../support/sse.js';
import { startTestRedis, type TestRedis } from '../support/redis-server.js';
import { follow, heardEnd, startInstance, startSteady } from './harness.js';

/**
 * A store that stays away past `storeOutageMs`: the call gives up (its signal fires, and the tool,
 * which checks it, stops), and its task fails saying that its store was unreachable, not that its
 * tool failed; the failure is written once the store is back, and its listener hears it.
 */

const sleep = (ms: number): Promise<void> => new Promise((done) => setTimeout(done, ms));
let redis: TestRedis;

beforeAll(async () => {
  redis = await startTestRedis();
});
afterAll(async () => {
  await redis?.stop();
});

it('past storeOutageMs the call stops and its task fails with "Task store unreachable"', async () => {
  const connection = { connection: redis.url, prefix: `give-up-${process.pid}:`, timeoutMs: 500 };
  const parts = () => ({
    store: new RedisTaskStore(connection),
    notifier: redisNotifier(connection),
  });
  const app = await startInstance(parts, { storeOutageMs: 1_000 });
  try {
    const taskId = await startSteady(app.url, 'gives-up', 30_000);
    const stream = await follow(app.url, taskId);
    await sleep(500);
    await redis.kill();
    await sleep(4_000);
    await redis.start();
    const end = await eventually(() => heardEnd(stream), 15_000, 'the end of the task');
    expect(end.params).toMatchObject({ taskId, status: 'failed' });
    const error = end.params?.error as { code: number; message: string; data: unknown };
    expect(error.code).toBe(-32603);
    expect(error.message).toMatch(/^Task store unreachable for \d+ s: the call was stopped$/);
    expect(error.data).toMatchObject({ reason: 'storeUnreachable' });
    const { body } = await rpc(app.url, 'tasks/get', { taskId }, { principal: 'alice' });
    expect(body.result).toMatchObject({ status: 'failed', error: { code: -32603 } });
    await stream.close();
  } finally {
    await app.close();
  }
}, 60_000);
