import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  buildFixture,
  call,
  type FixtureProcess,
  getTask,
  killAll,
  pollTask,
  startFixture,
  TERMINAL,
} from '../multiprocess/processes.js';
import { startTestPostgres, type TestPostgres } from '../support/postgres-server.js';

/**
 * Queue-run task tools on pg-boss across processes, with PostgreSQL only: a real PostgreSQL, the
 * fixture app (RUNNER=pg-boss) compiled and started as separate Node processes (instances that
 * take calls over HTTP, workers without HTTP), a worker SIGKILLed mid-job.
 */

let postgres: TestPostgres;
let apiA: FixtureProcess;
let apiB: FixtureProcess;
/** The first worker: it hangs in q_hang (HANG=1), so killing it leaves a job mid-run. */
let worker1: FixtureProcess;
const created: string[] = [];

const env = () => ({
  POSTGRES_URL: postgres.url,
  PG_SCHEMA: 'mpb',
  PGBOSS_SCHEMA: 'mpb_boss',
  RUNNER: 'pg-boss',
  LEASE_MS: '1500',
});

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
  postgres = await startTestPostgres();
  buildFixture('pg-boss');
  // One instance first: it makes the task store's schema and pg-boss's, which the others find.
  apiA = await startFixture({ ...env(), ROLE: 'api' });
  [apiB, worker1] = await Promise.all([
    startFixture({ ...env(), ROLE: 'api' }),
    startFixture({ ...env(), ROLE: 'worker', HANG: '1' }),
  ]);
}, 120_000);

afterAll(async () => {
  await killAll();
  await postgres?.stop();
});

describe('queue-run task tools over pg-boss, across processes', () => {
  it('completes a task on a worker process other than the instance that took the call', async () => {
    const taskId = await startTask(apiA, 'q_echo', { text: 'hi' });
    const done = await pollTask(apiB, taskId, (task) => TERMINAL.has(task.status as string));
    expect(done.status).toBe('completed');
    expect(textOf(done)).toBe(`hi from ${worker1.pid}`);
    expect(runsOf([worker1], taskId)).toHaveLength(1);
  });

  it('stops the job on the worker within 1 s of a cancel on another instance', async () => {
    const taskId = await startTask(apiA, 'q_until_cancel');
    await worker1.waitFor((event) => event.event === 'run' && event.taskId === taskId);
    // From before the request: the signal may fire before its answer comes back.
    const cancelledAt = Date.now();
    const cancel = await call(apiB, 'tasks/cancel', { taskId });
    expect(cancel.error).toBeUndefined();
    const aborted = await worker1.waitFor(
      (event) => event.event === 'aborted' && event.taskId === taskId,
      5_000,
    );
    process.stdout.write(
      `pg-boss, processes: the signal fired ${aborted.at! - cancelledAt} ms after the cancel\n`,
    );
    expect(aborted.at! - cancelledAt).toBeLessThan(1_000);
    expect((await getTask(apiA, taskId)).status).toBe('cancelled');
  });

  it('runs a job again on another worker when its worker is SIGKILLed mid-job, and completes it', async () => {
    const taskId = await startTask(apiA, 'q_hang');
    await worker1.waitFor((event) => event.event === 'run' && event.taskId === taskId);
    const worker2 = await startFixture({ ...env(), ROLE: 'worker' });
    await worker1.kill();
    const killedAt = Date.now();
    await worker2.waitFor((event) => event.event === 'run' && event.taskId === taskId, 20_000);
    process.stdout.write(
      `pg-boss, processes: the job ran again ${Date.now() - killedAt} ms after the SIGKILL\n`,
    );
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

  it('fails the task with -32603 and a generic message once its retries are spent', async () => {
    const taskId = await startTask(apiA, 'q_fail');
    const done = await pollTask(apiA, taskId, (task) => TERMINAL.has(task.status as string));
    expect(done.status).toBe('failed');
    expect(done.error).toEqual({ code: -32603, message: 'Internal error' });
    // The queue's retryLimit is 1: two runs.
    expect(runsOf([worker1], taskId)).toHaveLength(2);
  });

  it('gives a running job back to the queue when its worker stops gracefully; another worker runs it', async () => {
    const taskId = await startTask(apiA, 'q_until_cancel');
    await worker1.waitFor((event) => event.event === 'run' && event.taskId === taskId);
    const worker3 = await startFixture({ ...env(), ROLE: 'worker', HANG: '1' });
    await worker1.stop();
    expect(worker1.events.some((e) => e.event === 'aborted' && e.taskId === taskId)).toBe(true);
    await worker3.waitFor((event) => event.event === 'run' && event.taskId === taskId, 20_000);
    const given = await getTask(apiA, taskId);
    expect(given.status).toBe('working');
    // Given back, not expired: no retry spent, so no run counted as a restart.
    expect(String(given.statusMessage)).not.toMatch(/^Restarted/);
    await call(apiA, 'tasks/cancel', { taskId });
    await worker3.waitFor((event) => event.event === 'aborted' && event.taskId === taskId, 5_000);
    expect((await getTask(apiA, taskId)).status).toBe('cancelled');
    worker1 = worker3;
  }, 60_000);

  it('gives a job run again after its worker was SIGKILLed the answers taken before, without asking again', async () => {
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

  it('runs a request-scoped tool on a sub-tree of the job, with the REQUEST the job carried', async () => {
    const taskId = await startTask(apiA, 'q_scoped');
    const run = await worker1.waitFor((event) => event.event === 'run' && event.taskId === taskId);
    expect(run.request).toEqual({
      principal: 'alice',
      taskId,
      toolName: 'q_scoped',
      headers: expect.objectContaining({ 'mcp-name': 'q_scoped' }),
    });
    expect((run.request as { headers: object }).headers).not.toHaveProperty('authorization');
    const done = await pollTask(apiA, taskId, (task) => TERMINAL.has(task.status as string));
    expect(textOf(done)).toBe(`alice on ${worker1.pid}`);
    // The sub-tree ended with the run: its own instance's onModuleDestroy.
    const ended = await worker1.waitFor((e) => e.event === 'destroyed' && e.taskId === taskId);
    expect(ended.serial).toBe(run.serial);
  });

  it('leaves no task working', async () => {
    for (const taskId of created) {
      expect(TERMINAL.has((await getTask(apiB, taskId)).status as string)).toBe(true);
    }
  });
});
