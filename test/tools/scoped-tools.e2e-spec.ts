/**
 * Task tools on request-scoped providers (issue 38, item 1, in process): each call gets a DI
 * sub-tree of its own, made as the call starts and kept until its method ends, long after the
 * HTTP request that made the task was answered. The method below waits a second after its
 * CreateTaskResult reached the official client, then uses a request-scoped repository that
 * records the REQUEST it got; the repository's onModuleDestroy runs once the method has returned
 * and before the task is seen completed. Durable providers live on their tenant's sub-tree (an
 * app ContextIdStrategy), shared by that tenant's calls only. On the in-memory store, a real
 * Redis and a real PostgreSQL (each with its notifier), over real HTTP.
 */
import type { IncomingMessage } from 'node:http';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { Inject, Injectable, Module, type OnModuleDestroy, Scope, type Type } from '@nestjs/common';
import { ContextIdFactory, type ContextIdStrategy, REQUEST } from '@nestjs/core';
import * as z from 'zod/v4';
import { type TaskContext, type TaskRequest, TaskTool, TasksModule } from '../../src/index.js';
import type { TasksModuleExtras } from '../../src/entries/options.js';
import { type RunningApp, startApp } from '../support/app.js';
import { bearerPrincipal } from '../support/bearer.guard.js';
import { KeptLog } from '../support/kept-log.js';
import { textOf } from '../support/official-client.js';
import { mcpRequest, postRaw } from '../support/raw.js';
import { callTask, type ScopedSession, scopedSession, TenantStrategy } from '../support/scoped.js';
import { type Storage, STORES } from '../support/stores.js';
import { declaredCapabilities, envelope, standardHeaders } from '../support/wire.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

const WAIT_MS = 1_000;
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** When each call's repository was destroyed (its onModuleDestroy), by task id. */
const destroyedAt = new Map<string, number>();
/** When each call's method used its repository, by task id. */
const usedAt = new Map<string, number>();
/** The cleanup hooks in the order they ran. */
const endOrder: string[] = [];

/** A repository per call: what a TypeORM/MikroORM repository per request stands for. */
@Injectable({ scope: Scope.REQUEST })
class ReportRepository implements OnModuleDestroy {
  static made = 0;
  readonly serial = ++ReportRepository.made;
  private closed = false;

  constructor(@Inject(REQUEST) private readonly request: TaskRequest) {}

  /** What REQUEST told it; refuses once its sub-tree has ended (a released connection). */
  whoAsks(): Record<string, unknown> {
    if (this.closed) throw new Error('The repository was used after its call ended');
    usedAt.set(this.request.taskId, Date.now());
    const { principal, tenant, taskId, toolName, headers } = this.request;
    return { principal, tenant, taskId, toolName, headers };
  }

  onModuleDestroy(): void {
    this.closed = true;
    destroyedAt.set(this.request.taskId, Date.now());
    endOrder.push('repository');
  }
}

/** A client per tenant, shared by that tenant's calls (a durable provider). */
@Injectable({ scope: Scope.REQUEST, durable: true })
class TenantClient implements OnModuleDestroy {
  static made = 0;
  static destroyed = 0;
  readonly serial = ++TenantClient.made;

  constructor(@Inject(REQUEST) readonly payload: { tenant: string }) {}

  onModuleDestroy(): void {
    TenantClient.destroyed++;
  }
}

/** A per-call helper whose cleanup always fails: the task must not notice. */
@Injectable({ scope: Scope.REQUEST })
class FlakyCleanup implements OnModuleDestroy {
  onModuleDestroy(): Promise<void> {
    return Promise.reject(new Error('the connection would not close'));
  }
}

/** Request-scoped through its dependencies only: the class itself says nothing of scopes. */
@Injectable()
class ReportTools implements OnModuleDestroy {
  constructor(
    private readonly repository: ReportRepository,
    private readonly tenantClient: TenantClient,
    readonly flaky: FlakyCleanup,
  ) {}

  /** Ends before the repository it depends on. */
  onModuleDestroy(): void {
    endOrder.push('tools');
  }

  @TaskTool({
    name: 'report_inline',
    input: z.object({ waitMs: z.number().int().min(0) }),
    whenClientLacksTasks: 'inline',
  })
  reportInline(input: { waitMs: number }, task: TaskContext) {
    return this.report(input, task);
  }

  @TaskTool({ name: 'report', input: z.object({ waitMs: z.number().int().min(0) }) })
  async report(input: { waitMs: number }, task: TaskContext) {
    await sleep(input.waitMs);
    const seen = this.repository.whoAsks();
    const report = {
      ...seen,
      contextTaskId: task.taskId,
      repository: this.repository.serial,
      tenantClient: this.tenantClient.serial,
      tenantOfClient: this.tenantClient.payload.tenant,
      destroyedBeforeReturn: destroyedAt.has(task.taskId),
    };
    return { content: [{ type: 'text' as const, text: JSON.stringify(report) }] };
  }
}

function reportModule(storage: TasksModuleExtras): Type<unknown> {
  @Module({
    imports: [
      TasksModule.forRoot({
        principal: bearerPrincipal,
        tenant: (request) => (request as { headers: Record<string, string> }).headers['x-tenant'],
        shutdown: { drainMs: 0 },
        ...storage,
      }),
    ],
    providers: [ReportTools, ReportRepository, TenantClient, FlakyCleanup],
  })
  class ReportModule {}
  return ReportModule;
}

interface Report {
  principal: string | null;
  tenant: string | null;
  taskId: string;
  toolName: string;
  headers: Record<string, string>;
  contextTaskId: string;
  repository: number;
  tenantClient: number;
  tenantOfClient: string;
  destroyedBeforeReturn: boolean;
}

describe.each(Object.keys(STORES))('task tools on request-scoped providers (%s store)', (name) => {
  let storage: Storage;
  let app: RunningApp;
  const log = new KeptLog();
  const requests: WeakRef<IncomingMessage>[] = [];

  beforeAll(async () => {
    ContextIdFactory.apply(new TenantStrategy());
    storage = await STORES[name]!(`scoped${name}`);
    app = await startApp(reportModule(storage.parts()), 'express', '/mcp', (nest) => {
      nest.useLogger(log);
      nest.use((req: IncomingMessage, _res: unknown, next: () => void) => {
        requests.push(new WeakRef(req));
        next();
      });
    });
  }, 60_000);
  afterAll(async () => {
    await app?.close();
    await storage?.stop();
    ContextIdFactory.apply(undefined as unknown as ContextIdStrategy);
  });

  const connect = (principal: string, tenant: string) =>
    scopedSession(app.url, 'scoped-tools-e2e', principal, tenant);

  /** Calls `report`: when the CreateTaskResult arrived, when the end was seen, the report. */
  async function report(
    session: ScopedSession,
    waitMs: number,
  ): Promise<{ answeredAt: number; endedAt: number; taskId: string; report: Report }> {
    const { text, ...times } = await callTask(session, 'report', { waitMs });
    return { ...times, report: JSON.parse(text) as Report };
  }

  it(`waits ${WAIT_MS} ms after its CreateTaskResult, then its repository answers with the call's REQUEST; cleaned up after, never before`, async () => {
    const { session, close } = await connect('alice', 'acme');
    endOrder.length = 0;
    try {
      const { answeredAt, endedAt, taskId, report: seen } = await report(session, WAIT_MS);
      // The repository was used a second after the HTTP answer: its sub-tree outlived the request.
      expect(usedAt.get(taskId)! - answeredAt).toBeGreaterThanOrEqual(WAIT_MS - 100);
      expect(seen).toMatchObject({
        principal: 'alice',
        tenant: 'acme',
        taskId,
        contextTaskId: taskId,
        toolName: 'report',
        tenantOfClient: 'acme',
        destroyedBeforeReturn: false,
      });
      // The originating request's headers, without its credentials.
      expect(seen.headers['x-correlation-id']).toBe('corr-alice');
      expect(seen.headers['x-tenant']).toBe('acme');
      expect(seen.headers).not.toHaveProperty('authorization');
      expect(seen.headers).not.toHaveProperty('cookie');
      // Cleaned up after the method returned, and before the task was seen completed.
      const destroyed = destroyedAt.get(taskId);
      expect(destroyed).toBeDefined();
      expect(destroyed!).toBeGreaterThanOrEqual(usedAt.get(taskId)!);
      expect(destroyed!).toBeLessThanOrEqual(endedAt);
      // Dependents end before what they depend on.
      expect(endOrder).toEqual(['tools', 'repository']);
    } finally {
      await close();
    }
  }, 15_000);

  it('two concurrent calls get two repositories; the durable client is per tenant', async () => {
    const alice = await connect('alice', 'acme');
    const bob = await connect('bob', 'acme');
    const carol = await connect('carol', 'globex');
    try {
      const [a, b, c] = await Promise.all([
        report(alice.session, 200),
        report(bob.session, 200),
        report(carol.session, 200),
      ]);
      expect(new Set([a.report.repository, b.report.repository, c.report.repository]).size).toBe(3);
      expect(a.report.principal).toBe('alice');
      expect(b.report.principal).toBe('bob');
      expect(c.report.principal).toBe('carol');
      // One client for acme's two calls (and the first test's), another for globex.
      expect(a.report.tenantClient).toBe(b.report.tenantClient);
      expect(c.report.tenantClient).not.toBe(a.report.tenantClient);
      expect(c.report.tenantOfClient).toBe('globex');
      // The tenants' durable clients are theirs: no call's end destroys them.
      expect(TenantClient.destroyed).toBe(0);
    } finally {
      await Promise.all([alice.close(), bob.close(), carol.close()]);
    }
  }, 15_000);

  it('an inline call (a client without the tasks extension) gets its sub-tree and REQUEST too', async () => {
    const response = await fetch(app.url, {
      method: 'POST',
      headers: {
        ...standardHeaders('tools/call', 'report_inline'),
        authorization: 'Bearer erin',
        'x-tenant': 'globex',
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/call',
        params: {
          name: 'report_inline',
          arguments: { waitMs: 50 },
          _meta: envelope(declaredCapabilities(false), 'scoped-tools'),
        },
      }),
    });
    expect(response.status).toBe(200);
    const text = await response.text();
    const data = text.startsWith('{') ? text : /^data: (.*)$/m.exec(text)![1]!;
    const seen = JSON.parse(textOf((JSON.parse(data) as { result: unknown }).result)) as Report;
    expect(seen).toMatchObject({
      principal: 'erin',
      tenant: 'globex',
      toolName: 'report_inline',
      tenantOfClient: 'globex',
      destroyedBeforeReturn: false,
    });
    expect(seen.headers['x-tenant']).toBe('globex');
    expect(seen.headers).not.toHaveProperty('authorization');
    expect(destroyedAt.has(seen.taskId)).toBe(true);
  });

  it('a cleanup hook that throws leaves the task completed and logs one ERROR line, however many calls', async () => {
    // Every call so far had FlakyCleanup fail: one line for all of them.
    const lines = log.errors.filter((line) => line.includes('FlakyCleanup.onModuleDestroy'));
    expect(lines).toHaveLength(1);
    expect(log.errors).toHaveLength(1);
  });

  it('the running call keeps no HTTP request: gone after a full GC while the method still waits', async () => {
    requests.length = 0;
    // Over node:http without keep-alive: nothing of the client keeps the connection open.
    const answer = await postRaw(
      app.url,
      mcpRequest(
        'tools/call',
        { name: 'report', arguments: { waitMs: WAIT_MS } },
        { principal: 'dave', headers: { 'x-tenant': 'acme' } },
      ),
    );
    expect(answer.status).toBe(200);
    const taskId = (JSON.parse(answer.text) as { result: { taskId: string } }).result.taskId;
    expect(requests).toHaveLength(1);
    let alive = 1;
    for (let round = 0; round < 10 && alive > 0; round++) {
      await sleep(20);
      gc();
      gc();
      alive = requests.filter((ref) => ref.deref() !== undefined).length;
    }
    const stillRunning = !usedAt.has(taskId);
    expect(alive).toBe(0);
    // Collected while the call still ran (its repository not used yet).
    expect(stillRunning).toBe(true);
    const until = Date.now() + WAIT_MS * 5;
    while (!destroyedAt.has(taskId) && Date.now() < until) await sleep(20);
    expect(destroyedAt.has(taskId)).toBe(true);
  }, 15_000);
});
