/**
 * Hostile TTLs over real HTTP: every value a client can put where a TTL goes (2^53−1, 9e15, an
 * integer past 2^53, `1e309`, which JSON.parse makes Infinity, negative, zero, fractional, a
 * string, null, an object…), sent on the 2025-11-25 wire (`params.task.ttl`) and the 2026-07-28
 * one (which has no client TTL: `task.ttlMs` and `ttlMs` are ignored there), with `maxTtlMs` at
 * its default (7 days) and `null`, on the in-memory store and on a real Redis. A valid TTL of any
 * size gives a task with the capped TTL (the answer shows it); an invalid one is -32602 on HTTP
 * 200. Every task made, and one stored with a 9e15 ms TTL before TTLs were capped, is then read
 * back through tasks/get (both eras), tasks/list (2025) and the console's list, detail and cancel:
 * no answer is a 5xx, every date is a valid ISO 8601 instant, every TTL an integer or null, and
 * on Redis the key's expiry is the task's own (or none).
 */
import { CreateTaskResultSchema, McpError } from '@modelcontextprotocol/sdk/types.js';
import { Injectable, type Type } from '@nestjs/common';
import { type TaskContext, TaskTool, TasksService } from '../../src/index.js';
import { TaskStore } from '../../src/entries/store.js';
import { newTask, type TaskRecord } from '../../src/task.js';
import type { TasksModuleOptions } from '../../src/interfaces/tasks-module-options.interface.js';
import { RedisTaskStore } from '../../src/redis/index.js';
import { ADMIN, call, consoleApp } from '../console/console-app.js';
import { startTestRedis, type TestRedis } from '../support/redis-server.js';
import { type AdapterName, type RunningApp, startApp } from '../support/app.js';
import { leak, mcpRequest, post, type RawResponse } from '../support/raw.js';
import { v1Client, v1Transport } from '../support/v1-client.js';
import { legacyHeaders, type JsonRpcMessage } from '../support/wire.js';

/** The default `maxTtlMs`: 7 days. */
const WEEK_MS = 604_800_000;
/** The ceiling of every TTL, even with `maxTtlMs: null`: 100 years (TTL_CEILING_MS). */
const CEILING_MS = 3_155_760_000_000;
/** The tool's own TTL (what a 2026 call and a 2025 call without `ttl` get). */
const TOOL_TTL_MS = 3_600_000;

// ----- the values ---------------------------------------------------------------------------------

/** A TTL as JSON text, sent as is (so `1e309` reaches the server's JSON.parse). */
interface Hostile {
  label: string;
  json: string;
  /** Whether a 2025 client may ask for it (then it is capped), or it is -32602. */
  valid: boolean;
}

const HOSTILE: readonly Hostile[] = [
  { label: '2^53-1', json: '9007199254740991', valid: true },
  { label: '9e15', json: '9e15', valid: true },
  { label: '2^53+2 (past the safe integers)', json: '9007199254740994', valid: true },
  { label: '1e300', json: '1e300', valid: true },
  { label: '1e309 (Infinity once parsed)', json: '1e309', valid: true },
  { label: '8 days', json: String(8 * 86_400_000), valid: true },
  { label: '-1e309 (-Infinity once parsed)', json: '-1e309', valid: false },
  { label: 'negative', json: '-5000', valid: false },
  { label: 'zero', json: '0', valid: false },
  { label: 'minus zero', json: '-0', valid: false },
  { label: 'fractional', json: '1500.5', valid: false },
  { label: 'tiny fraction', json: '1e-7', valid: false },
  { label: 'numeric string', json: '"5000"', valid: false },
  { label: 'long string', json: JSON.stringify('9'.repeat(5000)), valid: false },
  { label: 'null', json: 'null', valid: false },
  { label: 'object', json: '{"ms":5000}', valid: false },
  { label: 'array', json: '[5000]', valid: false },
  { label: 'boolean', json: 'true', valid: false },
];

/** What the created task's TTL is for a valid request, under `maxTtlMs`. */
function capped(json: string, maxTtlMs: number | null): number {
  return Math.min(JSON.parse(json) as number, maxTtlMs ?? CEILING_MS, CEILING_MS);
}

// ----- the app ------------------------------------------------------------------------------------

/** Works until the task is cancelled, so the console's cancel meets a live task. */
const untilCancelled = (task: TaskContext): Promise<never> =>
  new Promise<never>((_, reject) =>
    task.signal.addEventListener('abort', () => reject(task.signal.reason), { once: true }),
  );

@Injectable()
class TtlTools {
  @TaskTool({ name: 'hold', ttlMs: TOOL_TTL_MS })
  async hold(_input: unknown, task: TaskContext) {
    await untilCancelled(task);
  }

  /** Asks for no TTL at all: unlimited with `maxTtlMs: null`, else the cap. */
  @TaskTool({ name: 'hold_unlimited', ttlMs: null })
  async holdUnlimited(_input: unknown, task: TaskContext) {
    await untilCancelled(task);
  }
}

interface Setup {
  store: 'memory' | 'redis';
  adapter: AdapterName;
  maxTtlMs: 'default' | null;
}

const SETUPS: readonly Setup[] = [
  { store: 'memory', adapter: 'express', maxTtlMs: 'default' },
  { store: 'memory', adapter: 'fastify', maxTtlMs: 'default' },
  { store: 'memory', adapter: 'express', maxTtlMs: null },
  { store: 'redis', adapter: 'express', maxTtlMs: 'default' },
  { store: 'redis', adapter: 'fastify', maxTtlMs: null },
];

// ----- the checks ---------------------------------------------------------------------------------

const ISO_INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

/** Why a value is not a valid ISO 8601 instant (as toISOString writes one), or undefined. */
function notIso(value: unknown): string | undefined {
  if (typeof value !== 'string' || !ISO_INSTANT.test(value)) return `not an ISO instant`;
  return new Date(value).toISOString() === value ? undefined : 'not a real instant';
}

/** Collects what is wrong with the answers, so a failure lists every problem at once. */
class Problems {
  readonly found: string[] = [];

  add(where: string, problem: string, value?: unknown): void {
    this.found.push(`${where}: ${problem}${value === undefined ? '' : ` (${String(value)})`}`);
  }

  /** An HTTP answer: not a 5xx, JSON, leaking nothing. */
  answer(where: string, response: { status: number; text: string }, status = 200): void {
    if (response.status !== status) this.add(where, `HTTP ${response.status}`, response.text);
    const leaked = leak(response.text);
    if (leaked !== undefined) this.add(where, `leaks ${leaked}`);
  }

  date(where: string, value: unknown, nullable = false): void {
    if (nullable && value === null) return;
    const problem = notIso(value);
    if (problem !== undefined) this.add(where, problem, value);
  }

  ttl(where: string, value: unknown): void {
    if (value !== null && !Number.isSafeInteger(value))
      this.add(where, 'TTL not an integer', value);
  }

  /** A Task of either era: `ttl` (2025) or `ttlMs` (2026), ISO dates. */
  wireTask(
    where: string,
    task: Record<string, unknown> | undefined,
    ttlKey: 'ttl' | 'ttlMs',
  ): void {
    if (task === undefined) return this.add(where, 'no task');
    this.date(`${where} createdAt`, task.createdAt);
    this.date(`${where} lastUpdatedAt`, task.lastUpdatedAt);
    this.ttl(`${where} ${ttlKey}`, task[ttlKey]);
    const poll = task[ttlKey === 'ttl' ? 'pollInterval' : 'pollIntervalMs'];
    if (poll !== undefined && !Number.isSafeInteger(poll)) this.add(where, 'poll interval', poll);
  }

  /** A console task (list entry or detail). */
  consoleTask(where: string, task: Record<string, unknown>): void {
    this.date(`${where} createdAt`, task.createdAt);
    this.date(`${where} lastUpdatedAt`, task.lastUpdatedAt);
    this.ttl(`${where} ttlMs`, task.ttlMs);
    if (!('expiresAt' in task)) return;
    this.date(`${where} expiresAt`, task.expiresAt, true);
    const { createdAt, ttlMs, expiresAt } = task as {
      createdAt: string;
      ttlMs: number | null;
      expiresAt: string | null;
    };
    const due = ttlMs === null ? null : Date.parse(createdAt) + ttlMs;
    const shown = expiresAt === null ? null : Date.parse(expiresAt);
    // Past the range of a Date (a TTL stored before the ceiling) the console shows no expiry.
    const expected = due !== null && Number.isNaN(new Date(due).getTime()) ? null : due;
    if (shown !== expected) this.add(where, `expiresAt ${expiresAt} for TTL ${ttlMs}`);
    for (const change of (task.history as Record<string, unknown>[] | undefined) ?? []) {
      this.date(`${where} history at`, change.at);
    }
  }
}

// ----- the wire -----------------------------------------------------------------------------------

/** A 2025-11-25 request body, with `params` written as JSON text. */
const legacyBody = (id: number, method: string, params: string): string =>
  `{"jsonrpc":"2.0","id":${id},"method":"${method}","params":${params}}`;

const TTL_MARK = '"__ttl__"';

describe.each(SETUPS)('hostile TTLs ($store store, $adapter, maxTtlMs $maxTtlMs)', (setup) => {
  let redis: TestRedis | undefined;
  let running: RunningApp;
  let url: string;
  let base: string;
  let store: TaskStore;
  const maxTtlMs = setup.maxTtlMs === 'default' ? WEEK_MS : null;
  /** Each setup's own principal, so its tasks are its own also on a shared REDIS_URL. */
  const principal = `ttl-${setup.store}-${setup.adapter}-${setup.maxTtlMs}-${process.pid}`;

  beforeAll(async () => {
    const options: TasksModuleOptions = setup.maxTtlMs === 'default' ? {} : { maxTtlMs: null };
    let extras = {};
    if (setup.store === 'redis') {
      redis = await startTestRedis();
      const prefix = `e2e-ttl-${process.pid}-${Date.now()}-${setup.adapter}:`;
      extras = { store: new RedisTaskStore({ connection: redis.url, prefix }) };
    }
    const module: Type<unknown> = consoleApp({ ...options, janitor: false }, extras, [TtlTools]);
    running = await startApp(module, setup.adapter);
    url = running.url;
    base = new URL('/', url).href;
    store = running.app.get<TaskStore>(TaskStore);
  });
  afterAll(async () => {
    await running?.close();
    await redis?.stop();
  });

  const legacy = (body: string): Promise<RawResponse> =>
    post(url, { headers: legacyHeaders(principal), body });
  const modern = (method: string, params: Record<string, unknown>, ttlJson?: string) => {
    const request = mcpRequest(method, params, { principal });
    const body = ttlJson === undefined ? request.body : request.body.replaceAll(TTL_MARK, ttlJson);
    return post(url, { headers: request.headers, body });
  };

  /** What a task's Redis key expires at (ms), -1 for none; undefined off Redis. */
  async function keyExpiry(taskId: string): Promise<number | undefined> {
    if (!(store instanceof RedisTaskStore)) return undefined;
    return (await store.client.pexpiretime(store.keyOf(taskId))) as number;
  }

  it('answers each value on both eras: a capped task for a valid TTL, -32602 for the rest', async () => {
    const problems = new Problems();
    const made: { label: string; taskId: string; ttl: number | null }[] = [];
    let id = 1;
    for (const value of HOSTILE) {
      // 2025-11-25: `params.task.ttl`.
      const where = `2025 ttl ${value.label}`;
      const answer = await legacy(
        legacyBody(
          id++,
          'tools/call',
          `{"name":"hold","arguments":{},"task":{"ttl":${value.json}}}`,
        ),
      );
      problems.answer(where, answer);
      const message = answer.json;
      if (value.valid) {
        const task = message?.result?.task as Record<string, unknown> | undefined;
        problems.wireTask(where, task, 'ttl');
        const expected = capped(value.json, maxTtlMs);
        if (task?.ttl !== expected)
          problems.add(where, `ttl ${String(task?.ttl)}, not ${expected}`);
        if (task !== undefined) {
          made.push({ label: where, taskId: task.taskId as string, ttl: task.ttl as number });
        }
      } else {
        expect({ where, error: message?.error }).toEqual({
          where,
          error: {
            code: -32602,
            message: expect.stringMatching(
              /^Invalid params: task must be an object whose ttl is a positive integer \(ms\), got ttl /,
            ),
          },
        });
        // The value is named by its kind, never echoed back.
        expect(answer.text.length).toBeLessThan(400);
      }

      // 2026-07-28: no TTL a client asks for; the tool's own applies, whatever the request holds.
      const modernWhere = `2026 ttlMs ${value.label}`;
      const created = await modern(
        'tools/call',
        { name: 'hold', arguments: {}, ttlMs: '__ttl__', task: { ttlMs: '__ttl__' } },
        value.json,
      );
      problems.answer(modernWhere, created);
      const result = created.json?.result;
      problems.wireTask(modernWhere, result, 'ttlMs');
      if (result?.ttlMs !== TOOL_TTL_MS) problems.add(modernWhere, 'ttlMs', result?.ttlMs);
      if (typeof result?.taskId === 'string') {
        made.push({ label: modernWhere, taskId: result.taskId, ttl: result.ttlMs as number });
      }
    }

    // A 2025 `task` that is not an object at all.
    for (const task of ['null', '"soon"', '[]', '5']) {
      const answer = await legacy(
        legacyBody(id++, 'tools/call', `{"name":"hold","arguments":{},"task":${task}}`),
      );
      problems.answer(`2025 task ${task}`, answer);
      expect(answer.json?.error?.code).toBe(-32602);
    }

    // No TTL asked: the tool's, on 2025 too; a tool asking for none gets the cap (or none).
    const plain = await legacy(
      legacyBody(id, 'tools/call', '{"name":"hold","arguments":{},"task":{}}'),
    );
    problems.answer('2025 no ttl', plain);
    expect(plain.json?.result?.task).toMatchObject({ ttl: TOOL_TTL_MS });
    const unlimited = await modern('tools/call', { name: 'hold_unlimited', arguments: {} });
    problems.answer('2026 hold_unlimited', unlimited);
    expect(unlimited.json?.result?.ttlMs).toBe(maxTtlMs);
    for (const answer of [plain.json?.result?.task, unlimited.json?.result]) {
      const task = answer as Record<string, unknown>;
      made.push({
        label: 'untimed',
        taskId: task.taskId as string,
        ttl: (task.ttl ?? task.ttlMs) as number | null,
      });
    }
    expect(made).toHaveLength(HOSTILE.filter((value) => value.valid).length + HOSTILE.length + 2);

    // Redis's own expiry of each task is `createdAt + ttl`, an exact integer (none: no TTL).
    let checked = 0;
    for (const { label, taskId, ttl } of made) {
      const expiry = await keyExpiry(taskId);
      if (expiry === undefined) continue;
      checked++;
      const record = (await store.get(taskId))!;
      const expected = ttl === null ? -1 : record.createdAt + ttl;
      if (expiry !== expected) problems.add(label, `Redis expiry ${expiry}, not ${expected}`);
    }
    expect(checked).toBe(setup.store === 'redis' ? made.length : 0);

    await readBack(
      problems,
      made.map((task) => task.taskId),
    );
    expect(problems.found).toEqual([]);
  });

  it('reads and cancels a task stored with a 9e15 ms TTL before TTLs were capped', async () => {
    // Written straight to the store, as an earlier version would have kept it.
    const old = (ttlMs: number): TaskRecord =>
      newTask(
        `ttl-old-${ttlMs}-${setup.adapter}-${Date.now()}`,
        { principal },
        { ttlMs, statusMessage: 'Stored long ago' },
        Date.now(),
      );
    const records = [old(9e15), old(Number.MAX_SAFE_INTEGER)];
    for (const record of records) await store.create(record, { maxRows: null });
    const problems = new Problems();
    await readBack(
      problems,
      records.map((record) => record.taskId),
    );
    expect(problems.found).toEqual([]);
    // Its TTL is what it was stored with: an integer on both wires.
    const got = await modern('tasks/get', { taskId: records[0]!.taskId });
    expect(got.json?.result).toMatchObject({ ttlMs: 9e15, status: 'cancelled' });
  });

  it('the v1 SDK client: a huge ttl gets the capped task; an invalid one fails the call (-32602)', async () => {
    const client = v1Client();
    await client.connect(v1Transport(url, principal));
    try {
      const call = (ttl: number) =>
        client.request(
          { method: 'tools/call', params: { name: 'hold', arguments: {}, task: { ttl } } },
          CreateTaskResultSchema,
        );
      const created = await call(Number.MAX_SAFE_INTEGER);
      expect(created.task.ttl).toBe(capped(String(Number.MAX_SAFE_INTEGER), maxTtlMs));
      expect((await client.experimental.tasks.getTask(created.task.taskId)).ttl).toBe(
        created.task.ttl,
      );
      for (const ttl of [-1, 0, 1.5]) {
        const refused = await call(ttl).catch((error: unknown) => error);
        // An McpError is the server's answer; a non-2xx would be a transport error instead.
        expect(refused).toBeInstanceOf(McpError);
        expect((refused as McpError).code).toBe(-32602);
      }
      await client.experimental.tasks.cancelTask(created.task.taskId);
    } finally {
      await client.close();
    }
  });

  /**
   * Reads each task through every route that shows one, then cancels it from the console, and
   * checks each answer (in `problems`).
   */
  async function readBack(problems: Problems, taskIds: readonly string[]): Promise<void> {
    let id = 1000;
    for (const taskId of taskIds) {
      const get2025 = await legacy(legacyBody(id++, 'tasks/get', JSON.stringify({ taskId })));
      problems.answer(`2025 tasks/get ${taskId}`, get2025);
      problems.wireTask(`2025 tasks/get ${taskId}`, get2025.json?.result, 'ttl');
      const get2026 = await modern('tasks/get', { taskId });
      problems.answer(`2026 tasks/get ${taskId}`, get2026);
      problems.wireTask(`2026 tasks/get ${taskId}`, get2026.json?.result, 'ttlMs');

      const detail = await call(base, 'GET', `/mcp-tasks/api/tasks/${taskId}`, ADMIN);
      problems.answer(`console detail ${taskId}`, detail);
      if (detail.status === 200) problems.consoleTask(`console detail ${taskId}`, detail.json());
    }

    // The 2025 listing, page by page, and the console's.
    const listed2025 = new Set<string>();
    let cursor: string | undefined;
    do {
      const page = await legacy(
        legacyBody(id++, 'tasks/list', JSON.stringify(cursor === undefined ? {} : { cursor })),
      );
      problems.answer('2025 tasks/list', page);
      const result = (page.json as JsonRpcMessage | undefined)?.result;
      for (const task of (result?.tasks as Record<string, unknown>[] | undefined) ?? []) {
        problems.wireTask(`2025 tasks/list ${String(task.taskId)}`, task, 'ttl');
        listed2025.add(task.taskId as string);
      }
      cursor = result?.nextCursor as string | undefined;
    } while (cursor !== undefined);
    const listed = await call(
      base,
      'GET',
      `/mcp-tasks/api/tasks?owner=${encodeURIComponent(principal)}&limit=100`,
      ADMIN,
    );
    problems.answer('console list', listed);
    const entries = (listed.json().tasks as Record<string, unknown>[] | undefined) ?? [];
    for (const task of entries) problems.consoleTask(`console list ${String(task.taskId)}`, task);
    const inConsole = new Set(entries.map((task) => task.taskId));
    for (const taskId of taskIds) {
      if (!listed2025.has(taskId)) problems.add(taskId, 'not in the 2025 tasks/list');
      if (!inConsole.has(taskId)) problems.add(taskId, 'not in the console list');
    }

    for (const taskId of taskIds) {
      const cancelled = await call(
        base,
        'POST',
        `/mcp-tasks/api/tasks/${taskId}/cancel`,
        { ...ADMIN, 'content-type': 'application/json' },
        '{}',
      );
      problems.answer(`console cancel ${taskId}`, cancelled);
      if (cancelled.status !== 200) continue;
      const body = cancelled.json();
      if (body.status !== 'cancelled') problems.add(taskId, 'not cancelled', body.status);
      problems.consoleTask(`console cancel ${taskId}`, body);
    }

    // The cancelled tasks on the wire, and the janitor's pass over all of them.
    for (const taskId of taskIds) {
      const after = await legacy(legacyBody(id++, 'tasks/get', JSON.stringify({ taskId })));
      problems.answer(`2025 tasks/get after cancel ${taskId}`, after);
      problems.wireTask(`2025 tasks/get after cancel ${taskId}`, after.json?.result, 'ttl');
    }
    await store.cleanup(Date.now(), { terminalTtlMs: 3_600_000 });
    expect(await running.app.get(TasksService).status(taskIds[0]!)).toMatchObject({
      status: 'cancelled',
    });
  }
});
