import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startTestRedis, type TestRedis } from '../support/redis-server.js';
import {
  buildFixture,
  call,
  type FixtureEvent,
  type FixtureProcess,
  getTask,
  killAll,
  pollTask,
  startFixture,
  TERMINAL,
} from './processes.js';

/**
 * Queue-run task tools across processes, nothing mocked: a real redis-server, the fixture app
 * compiled and started as separate Node processes (instances that take calls over HTTP, BullMQ
 * workers without HTTP), killed with SIGKILL where the test says so.
 */

let redis: TestRedis;
let apiA: FixtureProcess;
let apiB: FixtureProcess;
/** The first worker: it hangs in q_hang (HANG=1), so killing it leaves a job mid-run. */
let worker1: FixtureProcess;
const created: string[] = [];

/** The instances' lease: short, so a dead instance's calls fail within the test. */
const LEASE_MS = 1_500;
const env = () => ({ REDIS_URL: redis.url, PREFIX: 'mpq:', LEASE_MS: String(LEASE_MS) });

async function startTask(api: FixtureProcess, tool: string, args: Record<string, unknown> = {}) {
  const answer = await call(api, 'tools/call', { name: tool, arguments: args });
  const result = answer.result as { taskId?: string; status?: string } | undefined;
  if (!result?.taskId) throw new Error(`tools/call ${tool}: ${JSON.stringify(answer)}`);
  expect(result.status).toBe('working');
  created.push(result.taskId);
  return result.taskId;
}

const runsOf = (workers: FixtureProcess[], taskId: string) =>
  workers.flatMap((worker) =>
    worker.events.filter((event) => event.event === 'run' && event.taskId === taskId),
  );

const textOf = (task: Record<string, unknown>) =>
  (task.result as { content: { text: string }[] }).content[0]!.text;

beforeAll(async () => {
  redis = await startTestRedis();
  buildFixture('queue');
  [apiA, apiB, worker1] = await Promise.all([
    startFixture({ ...env(), ROLE: 'api' }),
    startFixture({ ...env(), ROLE: 'api' }),
    startFixture({ ...env(), ROLE: 'worker', HANG: '1' }),
  ]);
}, 120_000);

afterAll(async () => {
  await killAll();
  await redis?.stop();
});

describe('queue-run task tools over BullMQ, across processes', () => {
  it('completes a task on a worker process other than the instance that took the call', async () => {
    const taskId = await startTask(apiA, 'q_echo', { text: 'hi' });
    const done = await pollTask(apiA, taskId, (task) => TERMINAL.has(task.status as string));
    expect(done.status).toBe('completed');
    expect(textOf(done)).toBe(`hi from ${worker1.pid}`);
    expect(worker1.pid).not.toBe(apiA.pid);
    expect(runsOf([worker1], taskId)).toHaveLength(1);
  });

  it('round-trips an input request and progress through another instance', async () => {
    const taskId = await startTask(apiA, 'q_ask');
    const asking = await pollTask(apiB, taskId, (task) => task.status === 'input_required');
    expect(Object.keys(asking.inputRequests as object)).toEqual(['name']);
    const update = await call(apiB, 'tasks/update', {
      taskId,
      inputResponses: { name: { action: 'accept', content: { name: 'Ada' } } },
    });
    expect(update.error).toBeUndefined();
    const progressed = await pollTask(
      apiB,
      taskId,
      (task) => task.statusMessage === 'greeting Ada',
    );
    expect(progressed.status).toBe('working');
    const done = await pollTask(apiA, taskId, (task) => TERMINAL.has(task.status as string));
    expect(done.status).toBe('completed');
    expect(textOf(done)).toBe(`hello Ada from ${worker1.pid}`);
  });

  it('stops the job on the worker within 1 s of a cancel on another instance, and never runs it again', async () => {
    const taskId = await startTask(apiA, 'q_until_cancel');
    await worker1.waitFor((event) => event.event === 'run' && event.taskId === taskId);
    const cancel = await call(apiB, 'tasks/cancel', { taskId });
    const cancelledAt = Date.now();
    expect(cancel.error).toBeUndefined();
    const aborted = await worker1.waitFor(
      (event) => event.event === 'aborted' && event.taskId === taskId,
      5_000,
    );
    expect(aborted.at! - cancelledAt).toBeLessThan(1_000);
    expect((await getTask(apiA, taskId)).status).toBe('cancelled');
    // Past the lock and two stalled checks: a job run again would have reported by now.
    await new Promise((resolve) => setTimeout(resolve, 3_500));
    expect(runsOf([worker1], taskId)).toHaveLength(1);
    expect((await getTask(apiA, taskId)).status).toBe('cancelled');
  });

  it('runs a job again on another worker when its worker is killed mid-job, and completes it', async () => {
    const taskId = await startTask(apiA, 'q_hang');
    await worker1.waitFor((event) => event.event === 'run' && event.taskId === taskId);
    const worker2 = await startFixture({ ...env(), ROLE: 'worker' });
    await worker1.kill();
    await worker2.waitFor((event) => event.event === 'run' && event.taskId === taskId, 20_000);
    const restarted = await pollTask(apiB, taskId, (task) =>
      /^Restarted/.test(String(task.statusMessage)),
    );
    expect(restarted.status).toBe('working');
    const done = await pollTask(
      apiA,
      taskId,
      (task) => TERMINAL.has(task.status as string),
      20_000,
    );
    expect(done.status).toBe('completed');
    expect(textOf(done)).toBe(`done by ${worker2.pid}`);
    expect(runsOf([worker1, worker2], taskId)).toHaveLength(2);
    worker1 = worker2;
  }, 60_000);

  it('fails the task with -32603 and a generic message once its attempts are spent', async () => {
    const taskId = await startTask(apiA, 'q_fail');
    const done = await pollTask(apiA, taskId, (task) => TERMINAL.has(task.status as string));
    expect(done.status).toBe('failed');
    expect(done.error).toEqual({ code: -32603, message: 'Internal error' });
    expect(runsOf([worker1], taskId)).toHaveLength(2);
  });

  it('gives a running job back to the queue when its worker stops gracefully; another worker runs it', async () => {
    const taskId = await startTask(apiA, 'q_until_cancel');
    await worker1.waitFor((event) => event.event === 'run' && event.taskId === taskId);
    const worker3 = await startFixture({ ...env(), ROLE: 'worker', HANG: '1' });
    await worker1.stop();
    expect(worker1.events.some((e) => e.event === 'aborted' && e.taskId === taskId)).toBe(true);
    await worker3.waitFor((event) => event.event === 'run' && event.taskId === taskId, 20_000);
    expect((await getTask(apiA, taskId)).status).toBe('working');
    await call(apiA, 'tasks/cancel', { taskId });
    await worker3.waitFor((event) => event.event === 'aborted' && event.taskId === taskId, 5_000);
    expect((await getTask(apiA, taskId)).status).toBe('cancelled');
    worker1 = worker3;
  }, 60_000);

  it('gives a job run again after its worker died the answers taken before, without asking again', async () => {
    const taskId = await startTask(apiA, 'q_ask_hang');
    await pollTask(apiB, taskId, (task) => task.status === 'input_required');
    await call(apiB, 'tasks/update', {
      taskId,
      inputResponses: { name: { action: 'accept', content: { name: 'Grace' } } },
    });
    // worker1 (HANG=1) took the answer and hangs; it dies there.
    await worker1.waitFor((event) => event.event === 'answered' && event.taskId === taskId);
    const worker4 = await startFixture({ ...env(), ROLE: 'worker' });
    await worker1.kill();
    const answered = await worker4.waitFor(
      (event) => event.event === 'answered' && event.taskId === taskId,
      20_000,
    );
    expect(answered.who).toBe('Grace');
    const done = await pollTask(apiA, taskId, (task) => TERMINAL.has(task.status as string));
    expect(done.status).toBe('completed');
    expect(textOf(done)).toBe(`hello Grace from ${worker4.pid}`);
    worker1 = worker4;
  }, 60_000);

  it("fails an instance's in-process calls within the lease when it is killed; a live instance's stay", async () => {
    const apiC = await startFixture({ ...env(), ROLE: 'api' });
    const doomed = await startTask(apiC, 'p_until_cancel');
    const kept = await startTask(apiA, 'p_until_cancel');
    await apiC.waitFor((event) => event.event === 'run' && event.taskId === doomed);
    await apiC.kill();
    const killedAt = Date.now();
    const failed = await pollTask(apiA, doomed, (task) => TERMINAL.has(task.status as string));
    const after = Date.now() - killedAt;
    expect(failed.status).toBe('failed');
    expect(failed.error).toEqual({
      code: -32603,
      message: 'The server stopped before the task finished',
    });
    // Renewed every third of the lease: the lease runs out at most LEASE_MS after the kill, and
    // a sweep comes within a third more (the polling adds its 50 ms).
    expect(after).toBeLessThan(LEASE_MS * 1.5 + 500);
    expect((await getTask(apiB, kept)).status).toBe('working');
    await call(apiA, 'tasks/cancel', { taskId: kept });
    expect((await getTask(apiB, kept)).status).toBe('cancelled');
  }, 30_000);

  it('fails the task with -32603 once its job stalled more often than maxStalledCount (1)', async () => {
    await worker1.kill();
    const first = await startFixture({ ...env(), ROLE: 'worker', HANG: '1' });
    const taskId = await startTask(apiA, 'q_hang');
    await first.waitFor((event) => event.event === 'run' && event.taskId === taskId);
    const second = await startFixture({ ...env(), ROLE: 'worker', HANG: '1' });
    await first.kill();
    await second.waitFor((event) => event.event === 'run' && event.taskId === taskId, 20_000);
    const third = await startFixture({ ...env(), ROLE: 'worker', HANG: '1' });
    await second.kill();
    const done = await pollTask(
      apiA,
      taskId,
      (task) => TERMINAL.has(task.status as string),
      20_000,
    );
    expect(done.status).toBe('failed');
    expect(done.error).toEqual({ code: -32603, message: 'Internal error' });
    expect(runsOf([first, second, third], taskId)).toHaveLength(2);
    worker1 = third;
  }, 60_000);

  it('a worker process runs a request-scoped tool on a sub-tree per job; after a kill, the next worker makes a fresh one', async () => {
    // worker1 (HANG=1) is the only worker: it takes the job, reports its REQUEST and hangs.
    const taskId = await startTask(apiA, 'q_scoped');
    const isRun = (event: FixtureEvent) => event.event === 'run' && event.taskId === taskId;
    const first = await worker1.waitFor(isRun);
    const request = {
      principal: 'alice',
      taskId,
      toolName: 'q_scoped',
      headers: expect.objectContaining({ 'mcp-name': 'q_scoped' }),
    };
    expect(first.request).toEqual(request);
    expect((first.request as { headers: object }).headers).not.toHaveProperty('authorization');
    const worker5 = await startFixture({ ...env(), ROLE: 'worker' });
    await worker1.kill();
    const again = await worker5.waitFor(isRun, 20_000);
    expect(again.request).toEqual(request);
    const done = await pollTask(apiA, taskId, (task) => TERMINAL.has(task.status as string));
    expect(done.status).toBe('completed');
    expect(textOf(done)).toBe(`alice on ${worker5.pid}`);
    // The new worker's sub-tree ended with its run (its own instance); the killed one's never did.
    const ended = await worker5.waitFor((e) => e.event === 'destroyed' && e.taskId === taskId);
    expect(ended.serial).toBe(again.serial);
    expect(worker1.events.some((e) => e.event === 'destroyed' && e.taskId === taskId)).toBe(false);
    worker1 = worker5;
  }, 60_000);

  it('leaves no task working', async () => {
    for (const taskId of created) {
      expect(TERMINAL.has((await getTask(apiB, taskId)).status as string)).toBe(true);
    }
  });
});
