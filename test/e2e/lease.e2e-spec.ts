import { Injectable, Module, type Type } from '@nestjs/common';
import { Redis } from 'ioredis';
import * as z from 'zod/v4';
import {
  type TaskContext,
  type TaskRecord,
  TaskTool,
  TasksModule,
  TasksService,
} from '../../src/index.js';
import { TaskStore } from '../../src/entries/store.js';
import { TasksLease } from '../../src/janitor/tasks.lease.js';
import { RedisTaskStore, redisNotifier } from '../../src/redis/index.js';
import { startTestRedis, type TestRedis } from '../support/redis-server.js';
import { type RunningApp, startApp } from '../support/app.js';
import { eventually, rpc } from '../support/sse.js';
import { docFigure } from '../docs/figures.js';

/**
 * The lease: Nest apps sharing one Redis, each an instance with a short lease (600 ms, renewed
 * every 200 ms). One of them "dies": its lease stops being renewed (TasksLease.stop, which is
 * what a killed process amounts to for the others) while the test keeps the rest of its app up,
 * so the test can end it afterwards. The multi-process crash itself is tested elsewhere.
 */

const LEASE_MS = 600;
/** The instances' drain at shutdown: three leases, so a lease left unrenewed would run out. */
const DRAIN_MS = 3 * LEASE_MS;
const sleep = (ms: number): Promise<void> => new Promise((done) => setTimeout(done, ms));

/** Releases a waiting call; calls wait on them by name. */
const gates = new Map<string, () => void>();
let gateCount = 0;

function newGate(): { gate: string; release: () => void } {
  const gate = `gate-${++gateCount}`;
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  gates.set(gate, release);
  waiting.set(gate, released);
  return { gate, release };
}
const waiting = new Map<string, Promise<void>>();

@Injectable()
class LeaseTools {
  /** Works until its gate is released (then completes) or its signal fires. */
  @TaskTool({ name: 'wait_for_gate', input: z.object({ gate: z.string() }) })
  async waitForGate(input: { gate: string }, task: TaskContext) {
    const released = waiting.get(input.gate);
    if (released === undefined) throw new Error(`no gate ${input.gate}`);
    await new Promise<void>((resolve, reject) => {
      task.signal.addEventListener('abort', () => reject(task.signal.reason), { once: true });
      void released.then(resolve);
    });
    return `released ${input.gate}`;
  }

  /** Hands its task to someone else (the test drives it), then returns. */
  @TaskTool({ name: 'hand_off' })
  handOff(_input: unknown, task: TaskContext): string {
    task.handOff();
    return 'handed off';
  }
}

const principal = (request: unknown): string | undefined => {
  const header = (request as { headers: Record<string, string | undefined> }).headers.authorization;
  return header === undefined ? undefined : /^Bearer\s+(\S+)$/i.exec(header)?.[1];
};

const PREFIX = `e2e-lease-${process.pid}-${Date.now()}:`;

interface Instance {
  running: RunningApp;
  url: string;
  service: TasksService;
  lease: TasksLease;
  close(): Promise<void>;
}

function leaseModule(url: string, onShutdown: 'fail' | 'leave'): Type<unknown> {
  const connection = { connection: url, prefix: PREFIX };
  @Module({
    imports: [
      TasksModule.forRoot({
        principal,
        janitor: false,
        lease: { ttlMs: LEASE_MS },
        runningTasksOnShutdown: onShutdown,
        // Longer than the lease: the lease is renewed through the drain, or another instance
        // would fail the draining instance's calls (see the graceful shutdown tests below).
        shutdown: { drainMs: DRAIN_MS },
        store: new RedisTaskStore(connection),
        notifier: redisNotifier(connection),
      }),
    ],
    providers: [LeaseTools],
  })
  class LeaseTestModule {}
  return LeaseTestModule;
}

async function boot(redisUrl: string, onShutdown: 'fail' | 'leave' = 'fail'): Promise<Instance> {
  const running = await startApp(leaseModule(redisUrl, onShutdown), 'express');
  return {
    running,
    url: running.url,
    service: running.app.get(TasksService),
    lease: running.app.get(TasksLease),
    close: () => running.close(),
  };
}

async function callTool(
  url: string,
  name: string,
  args: Record<string, unknown> = {},
): Promise<string> {
  const { body } = await rpc(url, 'tools/call', { name, arguments: args }, { principal: 'alice' });
  if (body.result?.resultType !== 'task') throw new Error(`tools/call: ${JSON.stringify(body)}`);
  return body.result.taskId as string;
}

it('docs/reliability.md states the lease this file runs', () => {
  expect(docFigure('docs/reliability.md', 'lease.ms')).toBe(LEASE_MS);
});

describe('the lease: instances sharing one Redis', () => {
  let redis: TestRedis;
  let raw: Redis;
  const apps: Instance[] = [];

  beforeAll(async () => {
    redis = await startTestRedis();
    raw = new Redis(redis.url);
  });

  afterEach(async () => {
    for (const release of gates.values()) release();
    gates.clear();
    for (const app of apps.splice(0)) await app.close();
  });

  afterAll(async () => {
    raw?.disconnect();
    await redis?.stop();
  });

  const start = async (onShutdown: 'fail' | 'leave' = 'fail'): Promise<Instance> => {
    const instance = await boot(redis.url, onShutdown);
    apps.push(instance);
    return instance;
  };
  const instances = async (): Promise<string[]> =>
    raw.zrange(`${PREFIX}{lease}instances`, '0', '-1');
  const heldBy = (instance: Instance): Promise<string[]> =>
    raw.zrange(`${PREFIX}{lease}held:${instance.service.instanceId}`, '0', '-1');
  const status = (instance: Instance, taskId: string): Promise<TaskRecord> =>
    instance.service.status(taskId);

  it('a live instance’s running calls are never failed; once it stops, another fails them within the lease', async () => {
    const a = await start();
    const b = await start();
    expect(await instances()).toEqual(
      expect.arrayContaining([a.service.instanceId, b.service.instanceId]),
    );

    const running = await callTool(a.url, 'wait_for_gate', { gate: newGate().gate });
    const finishing = newGate();
    const finished = await callTool(a.url, 'wait_for_gate', { gate: finishing.gate });
    finishing.release();
    await eventually(
      async () => ((await status(b, finished)).status === 'completed' ? true : undefined),
      5_000,
      'the finished call',
    );
    const done = await status(b, finished);
    // The running call is held by A (on the record and in A's held set), the finished one no
    // longer; the wire never shows who holds a task.
    const live = await status(b, running);
    expect(live.heldBy).toBe(a.service.instanceId);
    expect(await heldBy(a)).toEqual([running]);
    const wire = await rpc(b.url, 'tasks/get', { taskId: running }, { principal: 'alice' });
    expect(JSON.stringify(wire.body)).not.toContain('heldBy');
    expect(JSON.stringify(wire.body)).not.toContain(a.service.instanceId);

    // Five lease periods while A renews: B's sweeps never touch A's running call.
    await sleep(5 * LEASE_MS);
    expect(await status(b, running)).toEqual(live);

    // A "dies": it renews no more. B fails its call within about 1.33 × the lease.
    a.lease.stop();
    const stoppedAt = Date.now();
    const failed = await eventually(
      async () => {
        const task = await status(b, running);
        return task.status === 'failed' ? task : undefined;
      },
      5_000,
      'B to fail the call A was running',
    );
    const elapsed = Date.now() - stoppedAt;
    expect(failed.error).toEqual({
      code: -32603,
      message: 'The server stopped before the task finished',
    });
    expect(failed.statusMessage).toBe('The server stopped before the task finished');
    expect(elapsed).toBeLessThan(1.5 * LEASE_MS);
    // The call A finished stays as it was; A is forgotten, with its held set.
    expect(await status(b, finished)).toEqual(done);
    await eventually(
      async () => ((await instances()).includes(a.service.instanceId) ? undefined : true),
      2_000,
      'A to be forgotten',
    );
    expect(await raw.exists(`${PREFIX}{lease}held:${a.service.instanceId}`)).toBe(0);
    expect(await instances()).toContain(b.service.instanceId);
  });

  it('a graceful shutdown with runningTasksOnShutdown "leave" releases its calls: no one fails them', async () => {
    const b = await start();
    const c = await boot(redis.url, 'leave');
    const left = await callTool(c.url, 'wait_for_gate', { gate: newGate().gate });
    expect(await heldBy(c)).toEqual([left]);
    const before = await status(b, left);
    await c.close();
    expect(await instances()).not.toContain(c.service.instanceId);
    expect(await heldBy(c)).toEqual([]);
    await sleep(3 * LEASE_MS);
    expect(await status(b, left)).toEqual(before);
    expect(before.status).toBe('working');
  });

  it('a graceful shutdown with "fail" fails its calls itself after the drain; the lease finds nothing left', async () => {
    const b = await start();
    const c = await boot(redis.url, 'fail');
    const ended = await callTool(c.url, 'wait_for_gate', { gate: newGate().gate });
    const began = Date.now();
    await c.close();
    // C's lease was renewed through its drain (three leases long): B's sweeps never failed the
    // call with "The server stopped before the task finished"; C failed it once the drain was over.
    expect(Date.now() - began).toBeGreaterThanOrEqual(DRAIN_MS - 10);
    const task = await status(b, ended);
    expect(task.error).toEqual({
      code: -32603,
      message: 'The server shut down before the task finished',
    });
    expect(await heldBy(c)).toEqual([]);
    // Its lease runs out and another instance forgets it, writing nothing to the task.
    await eventually(
      async () => ((await instances()).includes(c.service.instanceId) ? undefined : true),
      3 * LEASE_MS,
      'C to be forgotten',
    );
    expect(await status(b, ended)).toEqual(task);
  });

  it('a call that hands its task off is no longer held: the task outlives its instance', async () => {
    const a = await start();
    const b = await start();
    const handed = await callTool(a.url, 'hand_off');
    await eventually(async () => ((await heldBy(a)).length === 0 ? true : undefined), 2_000);
    a.lease.stop();
    await eventually(
      async () => ((await instances()).includes(a.service.instanceId) ? undefined : true),
      3 * LEASE_MS,
      'A to be forgotten',
    );
    expect((await status(b, handed)).status).toBe('working');
  });

  it('tasks created through TasksService are held only when asked', async () => {
    const a = await start();
    const owner = { principal: 'alice' };
    const free = await a.service.create(owner);
    const held = await a.service.create(owner, {}, { held: true });
    expect(free.heldBy).toBeUndefined();
    expect(held.heldBy).toBe(a.service.instanceId);
    expect(await heldBy(a)).toEqual([held.taskId]);
    expect(a.running.app.get(TaskStore)).toBeInstanceOf(RedisTaskStore);
  });
});

describe('the lease on a store without leases', () => {
  it('runs nothing, and holds no task', async () => {
    @Module({ imports: [TasksModule.forRoot({ lease: { ttlMs: LEASE_MS } })] })
    class InMemoryModule {}
    const running = await startApp(InMemoryModule, 'express');
    try {
      const service = running.app.get(TasksService);
      const lease = running.app.get(TasksLease);
      expect(service.leased).toBe(false);
      expect(lease.ttlMs).toBeNull();
      const task = await service.create({ principal: 'p' }, {}, { held: true });
      expect(task.heldBy).toBeUndefined();
    } finally {
      await running.close();
    }
  });
});
