/**
 * Queue-run task tools on request-scoped providers (issue 38, item 1, on the queue): the API
 * instance stores the task and adds the job as for any queue-run tool; the BullMQ worker (here
 * in the same process, as the other specs of this folder run it) resolves the provider on a DI
 * sub-tree of the job's own, made as the job starts and ended once the method settles. Its
 * REQUEST is the task's owner, task id and tool name, with the headers the job carried (no
 * credentials, at most JOB_HEADERS_MAX_BYTES). A run of the job again gets a fresh sub-tree.
 * Real Redis, real BullMQ, real HTTP, the official client.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Inject, Injectable, Module, type OnModuleDestroy, Scope } from '@nestjs/common';
import {
  type ContextId,
  ContextIdFactory,
  type ContextIdStrategy,
  type HostComponentInfo,
  REQUEST,
} from '@nestjs/core';
import { BullModule, getQueueToken } from '@nestjs/bullmq';
import type { Queue } from 'bullmq';
import * as z from 'zod/v4';
import { TasksQueueModule } from '../../src/bullmq/index.js';
import { openTasksSession } from '../../src/client/session.js';
import { type TaskContext, type TaskRequest, TaskTool, TasksModule } from '../../src/index.js';
import { RedisTaskStore, redisNotifier } from '../../src/redis/index.js';
import { JOB_HEADERS_MAX_BYTES, taskRequestOf } from '../../src/tools/scoped-calls.js';
import { type RunningApp, startApp } from '../support/app.js';
import { bearerPrincipal } from '../support/bearer.guard.js';
import { KeptLog } from '../support/kept-log.js';
import { testContextFetch, textOf } from '../support/official-client.js';
import { startTestRedis, type TestRedis } from '../support/redis-server.js';

const QUEUE = 'scoped';
const PREFIX = `scoped-${process.pid}`;
const WAIT_MS = 1_000;
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Per task id, one entry per run: when its repository was used and destroyed, which one it was. */
const usedAt = new Map<string, number[]>();
const destroyedAt = new Map<string, number[]>();
const servedBy = new Map<string, number[]>();
/** The cleanup hooks in the order they ran. */
const endOrder: string[] = [];
const push = (map: Map<string, number[]>, key: string, value = Date.now()) =>
  map.set(key, [...(map.get(key) ?? []), value]);

/** A repository per job: holds a connection, gives it back when the job's method ends. */
@Injectable({ scope: Scope.REQUEST })
class JobRepository implements OnModuleDestroy {
  static made = 0;
  readonly serial = ++JobRepository.made;
  private closed = false;

  constructor(@Inject(REQUEST) private readonly request: TaskRequest) {}

  /** What REQUEST told it; refuses once its sub-tree has ended (a released connection). */
  read(): TaskRequest {
    if (this.closed) throw new Error('The repository was used after its job ended');
    push(usedAt, this.request.taskId);
    push(servedBy, this.request.taskId, this.serial);
    return this.request;
  }

  onModuleDestroy(): void {
    this.closed = true;
    push(destroyedAt, this.request.taskId);
    endOrder.push('repository');
  }
}

/** One per tenant (durable): its REQUEST is the strategy's payload. */
@Injectable({ scope: Scope.REQUEST, durable: true })
class TenantClient {
  static made = 0;
  readonly serial = ++TenantClient.made;

  constructor(@Inject(REQUEST) readonly payload: { tenant: string }) {}
}

/** Request-scoped through its dependencies only. */
@Injectable()
class JobTools implements OnModuleDestroy {
  constructor(
    private readonly repository: JobRepository,
    private readonly tenantClient: TenantClient,
  ) {}

  onModuleDestroy(): void {
    endOrder.push('tools');
  }

  @TaskTool({ name: 'queued_report', queue: QUEUE, input: z.object({ waitMs: z.number() }) })
  async report(input: { waitMs: number }, task: TaskContext) {
    await sleep(input.waitMs);
    const { principal, tenant, taskId, toolName, headers } = this.repository.read();
    const report = {
      principal,
      tenant,
      taskId,
      toolName,
      headers,
      repository: this.repository.serial,
      tenantClient: this.tenantClient.serial,
      tenantOfClient: this.tenantClient.payload.tenant,
      contextTaskId: task.taskId,
      destroyedBeforeReturn: destroyedAt.has(task.taskId),
    };
    return { content: [{ type: 'text' as const, text: JSON.stringify(report) }] };
  }

  /** Fails its first run (not a JSON-RPC error: the queue runs it again), completes the next. */
  @TaskTool({ name: 'queued_retry', queue: { name: QUEUE, jobOptions: { attempts: 2 } } })
  retry(_input: unknown, task: TaskContext) {
    this.repository.read();
    if (usedAt.get(task.taskId)!.length === 1) throw new Error('the first run fails on purpose');
    return { content: [] };
  }
}

/** One durable sub-tree per tenant. */
class TenantStrategy implements ContextIdStrategy<TaskRequest> {
  private readonly tenants = new Map<string, ContextId>();

  attach(contextId: ContextId, request: TaskRequest) {
    const tenant = request.tenant ?? 'none';
    let shared = this.tenants.get(tenant);
    if (shared === undefined) this.tenants.set(tenant, (shared = ContextIdFactory.create()));
    const tree = shared;
    return {
      resolve: (info: HostComponentInfo) => (info.isTreeDurable ? tree : contextId),
      payload: { tenant },
    };
  }
}

interface Report extends TaskRequest {
  repository: number;
  tenantClient: number;
  tenantOfClient: string;
  contextTaskId: string;
  destroyedBeforeReturn: boolean;
}

let redis: TestRedis;
let app: RunningApp;
let queue: Queue;
const log = new KeptLog();

beforeAll(async () => {
  redis = await startTestRedis();
  ContextIdFactory.apply(new TenantStrategy());
  const storage = { connection: redis.url, prefix: `${PREFIX}-tasks:` };
  @Module({
    imports: [
      BullModule.forRoot({ connection: { host: '127.0.0.1', port: redis.port }, prefix: PREFIX }),
      // Completed jobs kept: the test reads what they carried.
      BullModule.registerQueue({ name: QUEUE, defaultJobOptions: { removeOnComplete: false } }),
      TasksModule.forRoot({
        principal: bearerPrincipal,
        tenant: (request) => (request as { headers: Record<string, string> }).headers['x-tenant'],
        store: new RedisTaskStore(storage),
        notifier: redisNotifier(storage),
        shutdown: { drainMs: 0 },
      }),
      TasksQueueModule.forRoot({ workers: { [QUEUE]: { concurrency: 4 } } }),
    ],
    providers: [JobTools, JobRepository, TenantClient],
  })
  class ScopedJobsModule {}
  app = await startApp(ScopedJobsModule, 'express', '/mcp', (nest) => nest.useLogger(log));
  queue = app.app.get<Queue>(getQueueToken(QUEUE));
}, 60_000);

afterAll(async () => {
  await app?.close();
  await redis?.stop();
  ContextIdFactory.apply(undefined as unknown as ContextIdStrategy);
});

function connect(principal: string, tenant: string, extra: Record<string, string> = {}) {
  return openTasksSession(app.url, {
    fetch: testContextFetch,
    clientInfo: { name: 'scoped-jobs-spec', version: '0.1.0' },
    headers: {
      Authorization: `Bearer ${principal}`,
      Cookie: 'session=secret',
      'X-Tenant': tenant,
      'X-Correlation-Id': `corr-${principal}`,
      ...extra,
    },
  });
}

/** Calls a tool as a task: when its CreateTaskResult arrived, when its end was seen, its text. */
async function callTask(
  session: Awaited<ReturnType<typeof connect>>['session'],
  tool: string,
  args: Record<string, number>,
) {
  const execution = await session.callTool(tool, args);
  const answeredAt = Date.now();
  if (execution.kind !== 'task') throw new Error(`${tool} answered ${JSON.stringify(execution)}`);
  const taskId = execution.handle.taskId;
  const { outcome } = await execution.settle();
  const endedAt = Date.now();
  if (outcome.status !== 'completed') throw new Error(`${tool} ended ${outcome.status}`);
  return { answeredAt, endedAt, taskId, text: textOf(outcome.result) };
}

async function report(
  session: Awaited<ReturnType<typeof connect>>['session'],
  waitMs: number,
): Promise<{ answeredAt: number; endedAt: number; taskId: string; report: Report }> {
  const { text, ...times } = await callTask(session, 'queued_report', { waitMs });
  return { ...times, report: JSON.parse(text) as Report };
}

/** The job that ran the task (completed jobs are kept). */
async function jobOf(taskId: string) {
  const jobs = await queue.getJobs(['completed']);
  const job = jobs.find((each) => each.data.taskId === taskId);
  if (job === undefined) throw new Error(`no completed job for task ${taskId}`);
  return job;
}

describe('queue-run task tools on request-scoped providers (BullMQ)', () => {
  it(`a job waits ${WAIT_MS} ms after its CreateTaskResult, then its repository answers with the job's REQUEST; cleaned up after, never before`, async () => {
    const { session, close } = await connect('alice', 'acme');
    endOrder.length = 0;
    try {
      const { answeredAt, endedAt, taskId, report: seen } = await report(session, WAIT_MS);
      const used = usedAt.get(taskId)![0]!;
      expect(used - answeredAt).toBeGreaterThanOrEqual(WAIT_MS - 100);
      expect(seen).toMatchObject({
        principal: 'alice',
        tenant: 'acme',
        taskId,
        contextTaskId: taskId,
        toolName: 'queued_report',
        tenantOfClient: 'acme',
        destroyedBeforeReturn: false,
      });
      // The headers the job carried, without the credentials; the job shows it ran on the queue.
      expect(seen.headers['x-correlation-id']).toBe('corr-alice');
      expect(seen.headers).not.toHaveProperty('authorization');
      expect(seen.headers).not.toHaveProperty('cookie');
      const job = await jobOf(taskId);
      expect(job.data.headers?.['x-correlation-id']).toBe('corr-alice');
      expect(JSON.stringify(job.data)).not.toMatch(/Bearer|session=secret/);
      // Cleaned up once, after the method used it and before the task was seen completed.
      const destroyed = destroyedAt.get(taskId)!;
      expect(destroyed).toHaveLength(1);
      expect(destroyed[0]!).toBeGreaterThanOrEqual(used);
      expect(destroyed[0]!).toBeLessThanOrEqual(endedAt);
      expect(endOrder).toEqual(['tools', 'repository']);
    } finally {
      await close();
    }
  }, 15_000);

  it('two jobs running at once get two repositories; the durable client is per tenant', async () => {
    const alice = await connect('alice', 'acme');
    const bob = await connect('bob', 'acme');
    const carol = await connect('carol', 'globex');
    try {
      const [a, b, c] = await Promise.all([
        report(alice.session, 300),
        report(bob.session, 300),
        report(carol.session, 300),
      ]);
      // The three ran at once on the worker (concurrency 4), each on its own sub-tree.
      expect(Math.max(a.answeredAt, b.answeredAt, c.answeredAt)).toBeLessThan(
        Math.min(...[a, b, c].map(({ taskId }) => usedAt.get(taskId)![0]!)),
      );
      expect(new Set([a.report.repository, b.report.repository, c.report.repository]).size).toBe(3);
      expect([a.report.principal, b.report.principal, c.report.principal]).toEqual([
        'alice',
        'bob',
        'carol',
      ]);
      expect(a.report.tenantClient).toBe(b.report.tenantClient);
      expect(c.report.tenantClient).not.toBe(a.report.tenantClient);
      expect(c.report.tenantOfClient).toBe('globex');
      for (const { taskId } of [a, b, c]) expect(destroyedAt.get(taskId)).toHaveLength(1);
    } finally {
      await Promise.all([alice.close(), bob.close(), carol.close()]);
    }
  }, 15_000);

  it('a job run again gets a fresh sub-tree: the first run’s repository ended before the second began', async () => {
    const { session, close } = await connect('dave', 'acme');
    try {
      const { taskId } = await callTask(session, 'queued_retry', {});
      const [firstUsed, secondUsed] = usedAt.get(taskId)!;
      const [firstEnded, secondEnded] = destroyedAt.get(taskId)!;
      expect(usedAt.get(taskId)).toHaveLength(2);
      expect(firstEnded!).toBeGreaterThanOrEqual(firstUsed!);
      expect(firstEnded!).toBeLessThanOrEqual(secondUsed!);
      expect(secondEnded).toBeDefined();
      const [first, second] = servedBy.get(taskId)!;
      expect(second).not.toBe(first);
    } finally {
      await close();
    }
  }, 15_000);

  it(`a job carries at most ${JOB_HEADERS_MAX_BYTES} bytes of headers: the largest are left out, named in one WARN`, async () => {
    const big = 'b'.repeat(JOB_HEADERS_MAX_BYTES);
    const warnings = log.warnings.length;
    const { session, close } = await connect('erin', 'acme', { 'X-Big': big, 'X-Big-Too': big });
    try {
      const first = await report(session, 0);
      const second = await report(session, 0);
      for (const { report: seen } of [first, second]) {
        expect(seen.headers['x-correlation-id']).toBe('corr-erin');
        expect(seen.headers['x-tenant']).toBe('acme');
        expect(seen.headers).not.toHaveProperty('x-big');
        expect(seen.headers).not.toHaveProperty('x-big-too');
      }
      const job = await jobOf(first.taskId);
      expect(Buffer.byteLength(JSON.stringify(job.data.headers))).toBeLessThan(
        JOB_HEADERS_MAX_BYTES,
      );
      // One line for both calls, naming the headers, never their values.
      const lines = log.warnings.slice(warnings).filter((line) => line.includes('x-big'));
      expect(lines).toHaveLength(1);
      expect(lines[0]).toContain('x-big, x-big-too');
      expect(lines[0]).not.toContain(big.slice(0, 64));
      expect(log.errors).toEqual([]);
    } finally {
      await close();
    }
  }, 15_000);

  it("a job's headers are read back as untrusted: credentials and values of another type are left out", () => {
    // What a job added by another producer (or edited in Redis) could carry.
    const carried = {
      Authorization: 'Bearer mallory',
      cookie: 'session=stolen',
      'x-correlation-id': 'corr-1',
      'x-list': ['a', 'b'],
      'x-number': 5,
      'x-mixed': ['a', 5],
      'x-object': { toString: 'no' },
    } as unknown as Record<string, string>;
    const request = taskRequestOf(
      { principal: 'alice', tenant: null },
      't1',
      'queued_report',
      carried,
    );
    expect(request.headers).toEqual({ 'x-correlation-id': 'corr-1', 'x-list': ['a', 'b'] });
    expect(Object.isFrozen(request.headers)).toBe(true);
    for (const odd of ['headers', 42, null, ['x']]) {
      expect(taskRequestOf({ principal: 'alice' }, 't1', 'q', odd as never).headers).toEqual({});
    }
  });
});
