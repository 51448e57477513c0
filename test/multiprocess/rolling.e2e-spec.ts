import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Queue } from 'bullmq';
import { startTestRedis, type TestRedis } from '../support/redis-server.js';
import { mcpRequest, post } from '../support/raw.js';
import {
  buildFixture,
  call,
  type FixtureProcess,
  getTask,
  killAll,
  startFixture,
  TERMINAL,
} from './processes.js';

/**
 * A rolling deploy on Redis, nothing mocked: two instances that take calls and run the queue's
 * jobs (`ROLE=both`, BullMQ concurrency 8 each, `shutdown.drainMs` 2 s), twenty queue-run calls
 * of 0.6 to 5 s, then SIGTERM to instance A while its worker runs some of them, and A′ started
 * in its place. A refuses new calls at once (HTTP 503) but still answers reads; the jobs it runs
 * that end within the drain complete there, the others go back to the queue without spending an
 * attempt and complete on B or A′. Not one task is lost. The figures are printed for
 * docs/scaling.md.
 */

let redis: TestRedis;
let a: FixtureProcess;
let b: FixtureProcess;

const PREFIX = 'mpr:';
const DRAIN_MS = 2_000;
const CALLS = 20;
/** How long each call works: a fifth of them each. */
const DURATIONS = [600, 1_200, 3_000, 5_000];
const env = () => ({ REDIS_URL: redis.url, PREFIX, ROLE: 'both', DRAIN_MS: String(DRAIN_MS) });

async function startWork(api: FixtureProcess, ms: number): Promise<string> {
  const answer = await call(api, 'tools/call', { name: 'q_work', arguments: { ms } });
  const taskId = (answer.result as { taskId?: string } | undefined)?.taskId;
  if (taskId === undefined) throw new Error(`tools/call q_work: ${JSON.stringify(answer)}`);
  return taskId;
}

const eventsOf = (processes: FixtureProcess[], event: string, taskId: string) =>
  processes.flatMap((p) => p.events.filter((e) => e.event === event && e.taskId === taskId));

beforeAll(async () => {
  redis = await startTestRedis({ persistence: false });
  buildFixture('rolling');
  [a, b] = await Promise.all([startFixture(env()), startFixture(env())]);
}, 120_000);

afterAll(async () => {
  await killAll();
  await redis?.stop();
});

describe('a rolling deploy of two instances with a queue-run tool', () => {
  it('SIGTERM to A mid-run, A′ started: every task completes, none lost; A hands back what outlives the drain', async () => {
    const ids = await Promise.all(
      Array.from({ length: CALLS }, (_, i) => startWork(i % 2 ? b : a, DURATIONS[i % 4]!)),
    );
    // A's worker runs some of them.
    await a.waitFor((event) => event.event === 'run' && event.tool === 'q_work');
    await new Promise((resolve) => setTimeout(resolve, 300));
    const runningOnA = a.events.filter((e) => e.event === 'run').length;
    expect(runningOnA).toBeGreaterThan(0);

    const sigtermAt = Date.now();
    const stopped = a.stop().then(() => Date.now() - sigtermAt);
    const replacement = startFixture(env());

    // A takes no new call from the start of its drain: 503, Retry-After, -32000. A call that
    // reached it before is a task like the others and must complete too.
    let refusedAfterMs: number | undefined;
    while (refusedAfterMs === undefined && Date.now() - sigtermAt < 2_000) {
      const answer = await post(
        `http://127.0.0.1:${a.port}/mcp`,
        mcpRequest(
          'tools/call',
          { name: 'q_work', arguments: { ms: 100 } },
          { principal: 'alice' },
        ),
      );
      if (answer.status === 503) {
        refusedAfterMs = Date.now() - sigtermAt;
        expect(answer.headers['retry-after']).toBe('1');
        expect(answer.json?.error).toMatchObject({ code: -32000 });
      } else {
        const taskId = (answer.json?.result as { taskId?: string } | undefined)?.taskId;
        expect(typeof taskId).toBe('string');
        ids.push(taskId!);
      }
    }
    expect(refusedAfterMs).toBeDefined();
    // ...and still answers reads during the drain.
    const read = await call(a, 'tasks/get', { taskId: ids[2]! });
    expect(read.error).toBeUndefined();

    const aPrime = await replacement;
    const aExitMs = await stopped;
    // A's drain: what ended within it completed there; the rest was stopped and handed back.
    const handedBack = a.events.filter((e) => e.event === 'stopped').map((e) => e.taskId!);
    const finishedInDrain = a.events.filter(
      (e) => e.event === 'done' && (e.at ?? 0) >= sigtermAt,
    ).length;
    expect(aExitMs).toBeGreaterThanOrEqual(DRAIN_MS - 50);
    expect(aExitMs).toBeLessThan(DRAIN_MS + 3_000);

    // A handed-back job is delayed or running again, with no attempt spent.
    const queue = new Queue('work', {
      connection: { host: '127.0.0.1', port: redis.port },
      prefix: `${PREFIX}bull`,
    });
    try {
      const jobs = await queue.getJobs(['delayed', 'wait', 'active']);
      for (const job of jobs.filter((candidate) => handedBack.includes(candidate.data.taskId))) {
        expect(job.attemptsMade).toBe(0);
      }
    } finally {
      await queue.close();
    }

    // Every task completes.
    const deadline = Date.now() + 20_000;
    const final = new Map<string, Record<string, unknown>>();
    while (final.size < ids.length && Date.now() < deadline) {
      for (const taskId of ids) {
        if (final.has(taskId)) continue;
        const task = await getTask(b, taskId);
        if (TERMINAL.has(task.status as string)) final.set(taskId, task);
      }
      if (final.size < ids.length) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const allDoneMs = Date.now() - sigtermAt;
    const completed = [...final.values()].filter((task) => task.status === 'completed');
    expect(final.size).toBe(ids.length);
    expect(completed).toHaveLength(ids.length);

    const all = [a, b, aPrime];
    for (const taskId of ids) {
      const text = (final.get(taskId)!.result as { content: { text: string }[] }).content[0]!.text;
      const runs = eventsOf(all, 'run', taskId).length;
      if (handedBack.includes(taskId)) {
        // Run again from its start on B or A′, and completed there.
        expect(text).not.toContain(String(a.pid));
        expect(runs).toBe(2);
      } else {
        expect(runs).toBe(1);
      }
    }
    expect(handedBack.length).toBeGreaterThan(0);

    const figures = {
      calls: ids.length,
      lost: ids.length - completed.length,
      runningOnAAtSigterm: runningOnA,
      finishedInDrain,
      handedBack: handedBack.length,
      refusedAfterMs,
      aExitMs,
      allCompletedAfterSigtermMs: allDoneMs,
      onB: completed.filter((t) => JSON.stringify(t.result).includes(` ${b.pid}"`)).length,
      onAPrime: completed.filter((t) => JSON.stringify(t.result).includes(` ${aPrime.pid}"`))
        .length,
    };
    console.log(`rolling deploy: ${JSON.stringify(figures)}`);
  }, 60_000);
});
