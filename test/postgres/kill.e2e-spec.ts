import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { post, mcpRequest } from '../support/raw.js';
import {
  buildFixture,
  call,
  type FixtureProcess,
  getTask,
  killAll,
  startFixture,
  TERMINAL,
} from '../multiprocess/processes.js';
import { canStopServer, startTestPostgres, type TestPostgres } from '../support/postgres-server.js';

/**
 * Instances on one PostgreSQL as separate Node processes (the fixture app of test/multiprocess,
 * with POSTGRES_URL and no Redis), nothing mocked: an instance killed with SIGKILL has its
 * in-process calls failed by another instance within a few lease periods; and every task whose
 * CreateTaskResult an instance answered over HTTP is still there after PostgreSQL itself crashed
 * (`pg_ctl stop -m immediate`) and came back, with the instance recovering by itself.
 */

/** The instances' lease: short, so that a dead instance's calls fail within the test. */
const LEASE_MS = 1_000;
const STOPPED = { code: -32603, message: 'The server stopped before the task finished' };
const UNAVAILABLE = { code: -32603, message: 'Task store unavailable' };

let postgres: TestPostgres;
let raw: pg.Pool;

const env = (schema: string, leaseMs: number) => ({
  ROLE: 'api',
  POSTGRES_URL: postgres.url,
  PG_SCHEMA: schema,
  LEASE_MS: String(leaseMs),
  // The runner's own Redis, if it has one, is not this fixture's: no BullMQ here.
  REDIS_URL: '',
});

/** Starts `tool` on `api` as `principal`; the task id of its CreateTaskResult. */
async function startTask(
  api: FixtureProcess,
  tool: string,
  args: Record<string, unknown>,
  principal: string,
): Promise<string> {
  const answer = await call(api, 'tools/call', { name: tool, arguments: args }, principal);
  const result = answer.result as { resultType?: string; taskId?: string } | undefined;
  if (result?.resultType !== 'task' || !result.taskId) {
    throw new Error(`tools/call ${tool}: ${JSON.stringify(answer)}`);
  }
  return result.taskId;
}

beforeAll(async () => {
  // Every commit synced, as in production: what a create answered must survive a crash.
  postgres = await startTestPostgres({ fsync: true });
  raw = new pg.Pool({ connectionString: postgres.url });
  // Its idle connections break when the test crashes the server: the pool drops them.
  raw.on('error', () => undefined);
  buildFixture('kill');
}, 60_000);

afterAll(async () => {
  await killAll();
  await raw?.end();
  await postgres?.stop();
});

describe('an instance killed with in-process calls, on PostgreSQL', () => {
  it('another instance fails every call the killed one ran, within a few lease periods; its own call stays', async () => {
    const [a, b] = await Promise.all([
      startFixture(env('kill', LEASE_MS)),
      startFixture(env('kill', LEASE_MS)),
    ]);
    const owners = ['alice', 'bob'];
    const doomed = await Promise.all(
      Array.from({ length: 6 }, (_, i) => startTask(a, 'p_until_cancel', {}, owners[i % 2]!)),
    );
    const kept = await startTask(b, 'p_until_cancel', {}, 'alice');
    for (const taskId of doomed) {
      await a.waitFor((event) => event.event === 'run' && event.taskId === taskId);
    }
    await b.waitFor((event) => event.event === 'run' && event.taskId === kept);
    // Each of A's calls is held by A's lease in the table: the lease is what B goes by.
    const held = await raw.query<{ task_id: string; held_by: string | null }>(
      'SELECT task_id, held_by FROM kill.tasks WHERE task_id = ANY($1)',
      [[...doomed, kept]],
    );
    const holders = new Map(held.rows.map((row) => [row.task_id, row.held_by]));
    expect(new Set(doomed.map((taskId) => holders.get(taskId))).size).toBe(1);
    expect(holders.get(doomed[0]!)).not.toBeNull();
    expect(holders.get(kept)).not.toBe(holders.get(doomed[0]!));
    // Two lease periods while A renews: B fails none of A's calls.
    await new Promise((resolve) => setTimeout(resolve, 2 * LEASE_MS));
    for (const [i, taskId] of doomed.entries()) {
      expect((await getTask(b, taskId, owners[i % 2])).status).toBe('working');
    }

    await a.kill();
    // A correctness bound, not a speed measurement: the lease runs out at most one lease after
    // the kill, B's next renewal (every third of a lease) sees it; four leases leave room for a
    // slow machine without letting a call that is never failed pass.
    const deadline = Date.now() + 4 * LEASE_MS;
    const states = new Map<string, Record<string, unknown>>();
    while (Date.now() < deadline) {
      for (const [i, taskId] of doomed.entries()) {
        states.set(taskId, await getTask(b, taskId, owners[i % 2]));
      }
      if ([...states.values()].every((task) => TERMINAL.has(task.status as string))) break;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    for (const [i, taskId] of doomed.entries()) {
      // Each owner reads the failure on B.
      const task = states.get(taskId)!;
      expect({ taskId, status: task.status, error: task.error }).toEqual({
        taskId,
        status: 'failed',
        error: STOPPED,
      });
      // Still owner-scoped: the other owner is told the task does not exist.
      const foreign = await call(b, 'tasks/get', { taskId }, owners[(i + 1) % 2]);
      expect(foreign.error).toEqual({ code: -32602, message: 'Task not found' });
    }
    // B's own call is untouched by the sweep (a lease later still), and still B's to cancel.
    await new Promise((resolve) => setTimeout(resolve, LEASE_MS));
    expect((await getTask(b, kept, 'alice')).status).toBe('working');
    expect(b.events.some((event) => event.event === 'crashed')).toBe(false);
    const cancel = await call(b, 'tasks/cancel', { taskId: kept }, 'alice');
    expect(cancel.error).toBeUndefined();
    expect((await getTask(b, kept, 'alice')).status).toBe('cancelled');
    await b.stop();
  }, 30_000);
});

// It stops and starts the server: only on a private one.
(canStopServer ? describe : describe.skip)('answered creates through a PostgreSQL crash', () => {
  it('every task whose CreateTaskResult was answered over HTTP is there after `pg_ctl stop -m immediate` and a restart, and the instance recovers by itself', async () => {
    // A lease of 30 s (the default): longer than the crash, so no call fails for a lapsed lease.
    const api = await startFixture(env('crash', 30_000));
    // Ten owners, so that none comes near the quota of 100 tasks: past it, a new task of the
    // owner's would take the place of the oldest finished one, by design.
    const owners = Array.from({ length: 10 }, (_, i) => `owner${i}`);
    /** Each create answered with a CreateTaskResult: the task, its owner, its tool. */
    const answered: { taskId: string; owner: string; echo: boolean; n: number }[] = [];
    /** Answers other than a task or the store-unavailable error (HTTP status and body). */
    const wrong: string[] = [];
    let unavailable = 0;
    let sent = 0;

    /** One tools/call: an echo (completes at once) or a call that runs until cancelled. */
    const create = async (): Promise<void> => {
      const n = sent++;
      const owner = owners[n % owners.length]!;
      const echo = n % 2 === 0;
      const response = await post(
        `http://127.0.0.1:${api.port}/mcp`,
        mcpRequest(
          'tools/call',
          echo
            ? { name: 'p_echo', arguments: { text: `n${n}` } }
            : { name: 'p_until_cancel', arguments: {} },
          { principal: owner },
        ),
      );
      const result = response.json?.result as { resultType?: string; taskId?: string } | undefined;
      if (response.status === 200 && result?.resultType === 'task' && result.taskId) {
        answered.push({ taskId: result.taskId, owner, echo, n });
      } else if (
        response.status === 200 &&
        JSON.stringify(response.json?.error) === JSON.stringify(UNAVAILABLE)
      ) {
        unavailable++;
      } else {
        wrong.push(`HTTP ${response.status}: ${response.text}`);
      }
    };

    // 200 creates answered before the crash, 20 at a time; the echoes complete.
    for (let round = 0; round < 10; round++) {
      await Promise.all(Array.from({ length: 20 }, create));
    }
    expect(wrong).toEqual([]);
    expect(answered).toHaveLength(200);
    const beforeCrash = [...answered];
    for (const { taskId, owner, echo } of beforeCrash) {
      if (!echo) continue;
      while ((await getTask(api, taskId, owner)).status !== 'completed') {
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    }

    // Creates keep coming while PostgreSQL stops and starts: those answered right before the
    // stop must survive it too, and none may answer anything but a task or the error.
    let loading = true;
    const load = Promise.all(
      Array.from({ length: 4 }, async () => {
        try {
          while (loading) await create();
        } finally {
          loading = false;
        }
      }),
    );
    await new Promise((resolve) => setTimeout(resolve, 200));
    await postgres.kill();
    await new Promise((resolve) => setTimeout(resolve, 500));
    await postgres.start();
    // Until the instance answers creates sent after the restart, by itself: its pool replaces
    // the connections the crash broke.
    const restarted = sent;
    const recoveredBy = Date.now() + 15_000;
    const afterRestart = () => answered.filter((task) => task.n >= restarted).length;
    while (afterRestart() < 20 && loading && Date.now() < recoveredBy) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    loading = false;
    await load;
    expect(wrong).toEqual([]);
    // The crash was seen (some creates met PostgreSQL down), and creates are answered again.
    expect(unavailable).toBeGreaterThan(0);
    expect(afterRestart()).toBeGreaterThanOrEqual(20);

    // Every answered create, read back by its owner through the same instance: those of before
    // the crash as they were (the echoes completed with their result, the others working).
    const missing: string[] = [];
    const states = new Map<string, Record<string, unknown>>();
    for (const { taskId, owner } of answered) {
      const answer = await call(api, 'tasks/get', { taskId }, owner);
      if (answer.result === undefined) missing.push(`${taskId}: ${JSON.stringify(answer.error)}`);
      else states.set(taskId, answer.result as Record<string, unknown>);
    }
    expect(missing).toEqual([]);
    for (const { taskId, echo, n } of beforeCrash) {
      const task = states.get(taskId)!;
      if (echo) {
        expect({ taskId, status: task.status, result: task.result }).toEqual({
          taskId,
          status: 'completed',
          result: {
            resultType: 'complete',
            content: [{ type: 'text', text: `n${n} from ${api.pid}` }],
          },
        });
      } else {
        expect({ taskId, status: task.status }).toEqual({ taskId, status: 'working' });
      }
    }
    // The table holds every one of them.
    const rows = await raw.query<{ count: string }>(
      'SELECT count(*) FROM crash.tasks WHERE task_id = ANY($1)',
      [answered.map((task) => task.taskId)],
    );
    expect(Number(rows.rows[0]!.count)).toBe(answered.length);
    expect(api.events.some((event) => event.event === 'crashed')).toBe(false);
    await api.stop();
  }, 40_000);
});
