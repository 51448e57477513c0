import { randomBytes } from 'node:crypto';
import { Injectable, Module, type Type } from '@nestjs/common';
import {
  DetailedTaskV2Schema,
  TaskStatusNotificationParamsV2Schema,
} from '@modelcontextprotocol/ext-tasks/core/v2';
import { type TaskContext, type TaskRecord, TaskTool, TasksModule } from '../../src/index.js';
import type { TasksModuleExtras } from '../../src/entries/options.js';
import { type InputRequest, TaskNotifier, TaskStore } from '../../src/entries/store.js';
import { BullModule } from '@nestjs/bullmq';
import { TasksQueueModule } from '../../src/bullmq/index.js';
import { RedisTaskNotifier, RedisTaskStore, redisNotifier } from '../../src/redis/index.js';
import { startTestRedis, type TestRedis } from '../support/redis-server.js';
import {
  PostgresTaskNotifier,
  PostgresTaskStore,
  postgresNotifier,
} from '../../src/postgres/index.js';
import { startTestPostgres, type TestPostgres } from '../support/postgres-server.js';
import { type AdapterName, type RunningApp, startApp } from '../support/app.js';
import { mcpRequest, post, type RawResponse } from '../support/raw.js';
import { eventually, openListen, type SseReader } from '../support/sse.js';
import { type JsonRpcMessage, SUBSCRIPTION_ID_KEY } from '../support/wire.js';
import { docFigure } from '../docs/figures.js';

/**
 * The principal isolation matrix: every principal (alice, bob, carol, anonymous) × every operation
 * on a task id (tasks/get, tasks/update, tasks/cancel, subscriptions/listen) × every kind of id
 * (its own task, another principal's, a random one, its own expired one). Only `own` succeeds;
 * the other three answer the very same bytes, change nothing, and a listen stream never hears
 * about them. Run on the in-memory store, on RedisTaskStore with the Redis notifier, and on
 * PostgresTaskStore with the PostgreSQL notifier.
 */

const sleep = (ms: number): Promise<void> => new Promise((done) => setTimeout(done, ms));

// ----- the matrix ---------------------------------------------------------------------------------

interface Principal {
  label: string;
  /** `Authorization: Bearer <bearer>`; none = anonymous. */
  bearer: string | undefined;
}

const PRINCIPALS: readonly Principal[] = [
  { label: 'alice', bearer: 'alice' },
  { label: 'bob', bearer: 'bob' },
  { label: 'carol', bearer: 'carol' },
  { label: 'anonymous', bearer: undefined },
];

/** In the order they run: the cancels last, so every other cell sees live tasks. */
const OPERATIONS = ['tasks/get', 'tasks/update', 'subscriptions/listen', 'tasks/cancel'] as const;
type Operation = (typeof OPERATIONS)[number];
type TaskMethod = Exclude<Operation, 'subscriptions/listen'>;

const ID_KINDS = ['own', 'foreign', 'missing', 'expired'] as const;
type IdKind = (typeof ID_KINDS)[number];

interface Cell {
  name: string;
  operation: Operation;
  who: Principal;
  kind: IdKind;
}

const CELLS: readonly Cell[] = OPERATIONS.flatMap((operation) =>
  PRINCIPALS.flatMap((who) =>
    ID_KINDS.map((kind) => ({
      name: `${operation} × ${who.label} × ${kind}`,
      operation,
      who,
      kind,
    })),
  ),
);
const MATRIX_SIZE = PRINCIPALS.length * OPERATIONS.length * ID_KINDS.length;

/** The JSON-RPC id of every matrix request, so answers can be compared byte for byte. */
const RPC_ID = 'isolation';
/** The JSON-RPC id (subscription id) of every matrix listen stream. */
const LISTEN_ID = 'isolation-listen';

const DEFAULT_TTL_MS = 600_000;
const SHORT_TTL_MS = 50;

/** A task id no one was ever given, in the shape of a real one (43 characters). */
const missingTaskId = (): string => randomBytes(32).toString('base64url');

// ----- the tools ----------------------------------------------------------------------------------

const QUESTION: InputRequest = {
  method: 'elicitation/create',
  params: {
    mode: 'form',
    message: 'Your name?',
    requestedSchema: { type: 'object', properties: { name: { type: 'string' } } },
  },
};

@Injectable()
class IsolationTools {
  /** Asks `q1`, then `q2` once answered, and so on: live until cancelled, and it moves on update. */
  @TaskTool({ name: 'ask_forever' })
  async askForever(_input: unknown, task: TaskContext) {
    for (let round = 1; ; round++) {
      await task.requireInput({ [`q${round}`]: QUESTION });
    }
  }

  /** Asks once, on a task that expires after SHORT_TTL_MS. */
  @TaskTool({ name: 'ask_briefly', ttlMs: SHORT_TTL_MS })
  async askBriefly(_input: unknown, task: TaskContext) {
    await task.requireInput({ q1: QUESTION });
    return { content: [] };
  }
}

/** The same tools, run as BullMQ jobs by the app's own worker (the `redis-queue` configuration). */
@Injectable()
class IsolationQueueTools {
  @TaskTool({ name: 'ask_forever', queue: 'isolation' })
  async askForever(_input: unknown, task: TaskContext) {
    for (let round = 1; ; round++) {
      await task.requireInput({ [`q${round}`]: QUESTION });
    }
  }

  @TaskTool({ name: 'ask_briefly', ttlMs: SHORT_TTL_MS, queue: 'isolation' })
  async askBriefly(_input: unknown, task: TaskContext) {
    await task.requireInput({ q1: QUESTION });
    return { content: [] };
  }
}

/** `Authorization: Bearer <name>` makes `<name>` the principal; no header is anonymous. */
const principal = (request: unknown): string | undefined => {
  const header = (request as { headers: Record<string, string | undefined> }).headers.authorization;
  return header === undefined ? undefined : /^Bearer\s+(\S+)$/i.exec(header)?.[1];
};

/** Where the queue-run tools send their jobs: the test's Redis, its port and a prefix. */
interface IsolationQueue {
  port: number;
  prefix: string;
}

function isolationModule(
  extras: Pick<TasksModuleExtras, 'store' | 'notifier'>,
  queue?: IsolationQueue,
): Type<unknown> {
  const queued = queue
    ? [
        BullModule.forRoot({
          connection: { host: '127.0.0.1', port: queue.port },
          prefix: `${queue.prefix}bull`,
        }),
        BullModule.registerQueue({ name: 'isolation' }),
        // Every job of ask_forever waits for input for the whole test: a slot each.
        TasksQueueModule.forRoot({ workers: { isolation: { concurrency: 64 } } }),
      ]
    : [];
  @Module({
    imports: [
      ...queued,
      TasksModule.forRoot({
        principal,
        janitor: false,
        defaultTtlMs: DEFAULT_TTL_MS,
        // Calls are left running: closing the app hands them over at once.
        shutdown: { drainMs: 0 },
        ...extras,
      }),
    ],
    providers: [queue ? IsolationQueueTools : IsolationTools],
  })
  class IsolationTestModule {}
  return IsolationTestModule;
}

// ----- helpers ------------------------------------------------------------------------------------

/** Each principal's tasks: one per own cell that changes a task, one target for the others. */
interface OwnTasks {
  /** Read by its owner (own get); the target of every other principal's foreign cells. */
  main: string;
  /** Answered by its owner (own update). */
  update: string;
  /** Cancelled by its owner (own cancel). */
  cancel: string;
  /** Watched by its owner's listen streams, and changed by it. */
  listen: string;
  /** Expired (ttlMs 50). */
  expired: string;
}

/** Everything but `resultType` and `_meta`. */
function bare(value: Record<string, unknown>): Record<string, unknown> {
  const copy = { ...value };
  delete copy.resultType;
  delete copy._meta;
  return copy;
}

/** What part of an answer must be the same for foreign, missing and expired ids. */
function fingerprint(response: RawResponse): string {
  return JSON.stringify({
    status: response.status,
    contentType: response.headers['content-type'],
    contentLength: response.headers['content-length'],
    text: response.text,
  });
}

function firstLine(error: unknown): string {
  return String((error as Error)?.message ?? error).split('\n')[0]!;
}

/** `redis-queue`: the Redis store and notifier, with the tools run as BullMQ jobs. */
type StoreKind = 'memory' | 'redis' | 'redis-queue' | 'postgres';
const CONFIGS: Array<[StoreKind, AdapterName]> = [
  ['memory', 'express'],
  ['memory', 'fastify'],
  ['redis', 'express'],
  ['redis-queue', 'fastify'],
  ['postgres', 'express'],
];

it('docs/reliability.md states the matrix this file runs', () => {
  expect(docFigure('docs/reliability.md', 'isolation.principals')).toBe(PRINCIPALS.length);
});

describe.each(CONFIGS)('principal isolation (%s store, %s)', (storeKind, adapter) => {
  let redis: TestRedis | undefined;
  let postgres: TestPostgres | undefined;
  let running: RunningApp | undefined;
  let store: TaskStore;
  const owned = new Map<string, OwnTasks>();
  /** Streams of the running cell, closed after it. */
  const streams: SseReader[] = [];
  /** Cell → `null` (passed) or why it failed. */
  const results = new Map<string, string | null>();
  /** Per `operation|principal`: the fingerprint of the first not-own answer. */
  const rowReference = new Map<string, string>();
  /** Every not-own answer text of tasks/get|update|cancel. */
  const notFoundTexts = new Set<string>();
  let requests = 0;

  const url = (): string => running!.url;
  const tasksOf = (who: Principal): OwnTasks => owned.get(who.label)!;

  async function send(
    method: string,
    params: Record<string, unknown>,
    who: Principal,
    id: string = RPC_ID,
  ): Promise<RawResponse> {
    requests++;
    return post(url(), mcpRequest(method, params, { id, principal: who.bearer }));
  }

  async function listen(who: Principal, taskIds: string[]) {
    requests++;
    const response = await openListen(url(), { id: LISTEN_ID, principal: who.bearer, taskIds });
    if (response.stream !== undefined) streams.push(response.stream);
    return response;
  }

  async function callTool(who: Principal, name: string): Promise<Record<string, unknown>> {
    const response = await send('tools/call', { name, arguments: {} }, who, 'setup');
    const result = response.json?.result;
    if (response.status !== 200 || result?.resultType !== 'task') {
      throw new Error(`tools/call ${name}: HTTP ${response.status} ${response.text}`);
    }
    return result;
  }

  /** The record as stored, owner aside (`null` when missing or expired). */
  const stored = (taskId: string): Promise<TaskRecord | null> => store.get(taskId);

  /** The one outstanding input key of a task (other than `not`), once it asks. */
  function outstanding(taskId: string, not?: string): Promise<string> {
    return eventually(
      async () => {
        const record = await stored(taskId);
        if (record?.status !== 'input_required') return undefined;
        const keys = Object.keys(record.inputRequests ?? {});
        return keys.length === 1 && keys[0] !== not ? keys[0] : undefined;
      },
      5_000,
      `task ${taskId} to ask for input${not === undefined ? '' : ` after ${not}`}`,
    );
  }

  const answerTo = (key: string, name: string): Record<string, unknown> => ({
    [key]: { action: 'accept', content: { name } },
  });

  /** The owner answers the outstanding question; resolves with the next one. */
  async function answerAsOwner(who: Principal, taskId: string): Promise<string> {
    const key = await outstanding(taskId);
    const response = await send(
      'tasks/update',
      { taskId, inputResponses: answerTo(key, who.label) },
      who,
      'owner',
    );
    if (response.json?.result?.resultType !== 'complete') {
      throw new Error(`${who.label} could not answer its own task: ${response.text}`);
    }
    return outstanding(taskId, key);
  }

  /** The ids of a not-own kind for `who`. */
  function idsOf(who: Principal, kind: Exclude<IdKind, 'own'>): string[] {
    switch (kind) {
      case 'foreign':
        return PRINCIPALS.filter((other) => other !== who).map((other) => tasksOf(other).main);
      case 'missing':
        return [missingTaskId()];
      case 'expired':
        return [tasksOf(who).expired];
    }
  }

  const ownerOf = (taskId: string): Principal =>
    PRINCIPALS.find((who) => tasksOf(who).main === taskId)!;

  /** An expired task is gone: for Redis, the key itself expired. */
  async function expectExpired(taskId: string): Promise<void> {
    expect(await stored(taskId)).toBeNull();
    if (store instanceof RedisTaskStore) {
      expect(await store.client.pttl(store.keyOf(taskId))).toBe(-2);
    }
  }

  /** Compares `value` with the first of its row (same operation and principal). */
  function expectSameAsRow(operation: Operation, who: Principal, value: string): void {
    const key = `${operation}|${who.label}`;
    const reference = rowReference.get(key);
    if (reference === undefined) rowReference.set(key, value);
    else expect(value).toBe(reference);
  }

  // ----- setup and teardown ---------------------------------------------------------------------

  beforeAll(async () => {
    if (storeKind === 'postgres') {
      postgres = await startTestPostgres();
      const connection = { connection: postgres.url, schema: 'isolation' };
      running = await startApp(
        isolationModule({
          store: new PostgresTaskStore(connection),
          notifier: postgresNotifier(connection),
        }),
        adapter,
      );
      const notifier = running.app.get<PostgresTaskNotifier>(TaskNotifier);
      expect(notifier).toBeInstanceOf(PostgresTaskNotifier);
      await notifier.ready;
    } else if (storeKind !== 'memory') {
      redis = await startTestRedis();
      const connection = {
        connection: redis.url,
        prefix: `e2e-isolation-${process.pid}-${Date.now()}-${adapter}:`,
      };
      running = await startApp(
        isolationModule(
          { store: new RedisTaskStore(connection), notifier: redisNotifier(connection) },
          storeKind === 'redis-queue' ? { port: redis.port, prefix: connection.prefix } : undefined,
        ),
        adapter,
      );
      const notifier = running.app.get<RedisTaskNotifier>(TaskNotifier);
      expect(notifier).toBeInstanceOf(RedisTaskNotifier);
      await notifier.ready;
    } else {
      running = await startApp(isolationModule({}), adapter);
    }
    store = running.app.get<TaskStore>(TaskStore);
    if (storeKind === 'postgres') expect(store).toBeInstanceOf(PostgresTaskStore);
    else if (storeKind !== 'memory') expect(store).toBeInstanceOf(RedisTaskStore);

    const expiredAt: number[] = [];
    for (const who of PRINCIPALS) {
      const created = await callTool(who, 'ask_briefly');
      expect(created.ttlMs).toBe(SHORT_TTL_MS);
      expiredAt.push(Date.now() + SHORT_TTL_MS);
      const taskId = async (): Promise<string> =>
        (await callTool(who, 'ask_forever')).taskId as string;
      owned.set(who.label, {
        expired: created.taskId as string,
        main: await taskId(),
        update: await taskId(),
        cancel: await taskId(),
        listen: await taskId(),
      });
    }
    // Live tasks are waiting for input; the short ones have expired.
    for (const tasks of owned.values()) {
      for (const taskId of [tasks.main, tasks.update, tasks.cancel, tasks.listen]) {
        expect(await outstanding(taskId)).toBe('q1');
      }
    }
    await sleep(Math.max(0, Math.max(...expiredAt) - Date.now()) + 100);
    for (const tasks of owned.values()) {
      await eventually(
        async () => ((await stored(tasks.expired)) === null ? true : undefined),
        3_000,
        `task ${tasks.expired} to expire`,
      );
      await expectExpired(tasks.expired);
    }
  }, 60_000);

  afterEach(async () => {
    for (const stream of streams.splice(0)) await stream.close();
  });

  afterAll(async () => {
    for (const stream of streams.splice(0)) await stream.close();
    await running?.close();
    await redis?.stop();
    await postgres?.stop();
  });

  // ----- get, update, cancel --------------------------------------------------------------------

  async function ownTaskCell(method: TaskMethod, who: Principal): Promise<void> {
    const tasks = tasksOf(who);
    if (method === 'tasks/get') {
      const before = await stored(tasks.main);
      const key = await outstanding(tasks.main);
      const response = await send(method, { taskId: tasks.main }, who);
      expect(response.status).toBe(200);
      expect(response.json).toMatchObject({
        jsonrpc: '2.0',
        id: RPC_ID,
        result: {
          taskId: tasks.main,
          status: 'input_required',
          inputRequests: { [key]: QUESTION },
          ttlMs: DEFAULT_TTL_MS,
          resultType: 'complete',
        },
      });
      expect(DetailedTaskV2Schema.safeParse(bare(response.json!.result!)).success).toBe(true);
      expect(await stored(tasks.main)).toEqual(before);
      return;
    }
    if (method === 'tasks/update') {
      const key = await outstanding(tasks.update);
      const before = (await stored(tasks.update))!;
      const response = await send(
        method,
        { taskId: tasks.update, inputResponses: answerTo(key, who.label) },
        who,
      );
      expect(response.status).toBe(200);
      expect(response.json).toMatchObject({
        jsonrpc: '2.0',
        id: RPC_ID,
        result: { resultType: 'complete' },
      });
      expect(response.json).not.toHaveProperty('error');
      // The task moves: the answer is taken, and the tool asks its next question.
      const next = await outstanding(tasks.update, key);
      const after = (await stored(tasks.update))!;
      expect(after.version).toBeGreaterThan(before.version);
      expect(after.usedInputKeys).toContain(key);
      expect(Object.keys(after.inputRequests ?? {})).toEqual([next]);
      return;
    }
    const before = (await stored(tasks.cancel))!;
    expect(before.status).toBe('input_required');
    const response = await send(method, { taskId: tasks.cancel }, who);
    expect(response.status).toBe(200);
    expect(response.json).toMatchObject({
      jsonrpc: '2.0',
      id: RPC_ID,
      result: { resultType: 'complete' },
    });
    expect(response.json).not.toHaveProperty('error');
    const after = await eventually(
      async () => {
        const record = await stored(tasks.cancel);
        return record?.status === 'cancelled' ? record : undefined;
      },
      3_000,
      'the own task to be cancelled',
    );
    expect(after.version).toBeGreaterThan(before.version);
    const read = await send('tasks/get', { taskId: tasks.cancel }, who, 'owner');
    expect(read.json?.result).toMatchObject({ taskId: tasks.cancel, status: 'cancelled' });
  }

  async function notOwnTaskCell(
    method: TaskMethod,
    who: Principal,
    kind: Exclude<IdKind, 'own'>,
  ): Promise<void> {
    const targets = idsOf(who, kind);
    const before = new Map<string, TaskRecord | null>();
    for (const taskId of targets) before.set(taskId, await stored(taskId));
    if (kind === 'foreign') {
      for (const taskId of targets) {
        expect(before.get(taskId)?.status).toBe('input_required');
      }
    }

    const answers: Array<{ taskId: string; response: RawResponse }> = [];
    for (const taskId of targets) {
      // An update answers what the owner's task asks right now: the most tempting answer there is.
      const key = Object.keys(before.get(taskId)?.inputRequests ?? { q1: QUESTION })[0]!;
      const params =
        method === 'tasks/update'
          ? { taskId, inputResponses: answerTo(key, `${who.label} the intruder`) }
          : { taskId };
      answers.push({ taskId, response: await send(method, params, who) });
    }

    for (const { response } of answers) {
      expect({ status: response.status, body: response.json }).toMatchObject({
        status: 200,
        body: { jsonrpc: '2.0', id: RPC_ID, error: { code: -32602, message: 'Task not found' } },
      });
      expect(response.json).not.toHaveProperty('result');
      notFoundTexts.add(response.text);
    }
    // Byte for byte the same answer, within the cell and across the row's kinds.
    const prints = new Set(answers.map(({ response }) => fingerprint(response)));
    expect([...prints]).toHaveLength(1);
    expectSameAsRow(method, who, [...prints][0]!);

    // Nothing changed: a foreign owner's task keeps its status and version; gone stays gone.
    for (const taskId of targets) {
      const after = await stored(taskId);
      const was = before.get(taskId) ?? null;
      if (was === null) {
        expect(after).toBeNull();
        if (kind === 'expired') await expectExpired(taskId);
        continue;
      }
      expect({ status: after?.status, version: after?.version }).toEqual({
        status: was.status,
        version: was.version,
      });
      expect(after).toEqual(was);
      // Its owner still reads it as before.
      const read = await send('tasks/get', { taskId }, ownerOf(taskId), 'owner');
      expect(read.json?.result).toMatchObject({ taskId, status: was.status });
    }
  }

  // ----- listen ---------------------------------------------------------------------------------

  /** Checks a `notifications/tasks` message of this file's streams; returns its task. */
  function taskNotification(message: JsonRpcMessage): Record<string, unknown> {
    expect(message.method).toBe('notifications/tasks');
    expect(TaskStatusNotificationParamsV2Schema.safeParse(message.params).success).toBe(true);
    expect(message.params!._meta?.[SUBSCRIPTION_ID_KEY]).toBe(LISTEN_ID);
    return message.params!;
  }

  /** Reads the stream until a notification of `taskId` asks `key`; every message is checked. */
  async function untilAsks(stream: SseReader, taskId: string, key: string) {
    for (;;) {
      const task = taskNotification(await stream.next(5_000));
      expect(task.taskId).toBe(taskId);
      const asks = task.inputRequests as Record<string, unknown> | undefined;
      if (task.status === 'input_required' && asks !== undefined && key in asks) return task;
    }
  }

  const ackOf = (taskIds: string[]): JsonRpcMessage => ({
    jsonrpc: '2.0',
    method: 'notifications/subscriptions/acknowledged',
    params: { notifications: { taskIds }, _meta: { [SUBSCRIPTION_ID_KEY]: LISTEN_ID } },
  });

  async function ownListenCell(who: Principal): Promise<void> {
    const { listen: taskId } = tasksOf(who);
    const response = await listen(who, [taskId]);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const stream = response.stream!;
    expect(await stream.next()).toEqual(ackOf([taskId]));

    // Its changes arrive: the answer taken (working), then the next question.
    const next = await answerAsOwner(who, taskId);
    const asking = await untilAsks(stream, taskId, next);
    const read = await send('tasks/get', { taskId }, who, 'owner');
    expect(bare(asking)).toEqual(bare(read.json!.result!));
    expect(DetailedTaskV2Schema.safeParse(bare(asking)).success).toBe(true);
    const statuses = stream.messages.slice(1).map((message) => message.params?.status);
    expect(statuses).toContain('working');
  }

  async function notOwnListenCell(who: Principal, kind: Exclude<IdKind, 'own'>): Promise<void> {
    const ids = idsOf(who, kind);
    const { listen: ownId } = tasksOf(who);

    // Only ids of this kind: acknowledged with none, the same way for every kind.
    const only = await listen(who, ids);
    expect(only.status).toBe(200);
    expect(only.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const onlyStream = only.stream!;
    expect(await onlyStream.next()).toEqual(ackOf([]));
    await onlyStream.waitForEnd(500).catch(() => undefined);
    const onlyTranscript = JSON.stringify({
      status: only.status,
      contentType: only.headers.get('content-type'),
      ended: onlyStream.done,
      frames: onlyStream.frames.map((frame) => frame.raw),
    });

    // Beside an own task: acknowledged with the own task alone.
    const mixed = await listen(who, [ownId, ...ids]);
    expect(mixed.status).toBe(200);
    const mixedStream = mixed.stream!;
    expect(await mixedStream.next()).toEqual(ackOf([ownId]));
    const mixedAck = mixedStream.frames[0]!.raw;
    expectSameAsRow('subscriptions/listen', who, JSON.stringify([onlyTranscript, mixedAck]));

    // The owners change their tasks; then the caller changes its own, which must arrive.
    if (kind === 'foreign') {
      for (const taskId of ids) await answerAsOwner(ownerOf(taskId), taskId);
    }
    const next = await answerAsOwner(who, ownId);
    await untilAsks(mixedStream, ownId, next);
    await sleep(150);

    for (const message of mixedStream.messages.slice(1)) {
      expect(taskNotification(message).taskId).toBe(ownId);
    }
    for (const message of onlyStream.messages.slice(1)) {
      expect(message.method).not.toBe('notifications/tasks');
    }
    for (const frame of [...onlyStream.frames, ...mixedStream.frames]) {
      for (const taskId of ids) expect(frame.raw).not.toContain(taskId);
    }
    if (kind === 'expired') await expectExpired(ids[0]!);
  }

  // ----- the cells ------------------------------------------------------------------------------

  for (const { name, operation, who, kind } of CELLS) {
    it(name, async () => {
      try {
        if (operation === 'subscriptions/listen') {
          if (kind === 'own') await ownListenCell(who);
          else await notOwnListenCell(who, kind);
        } else if (kind === 'own') {
          await ownTaskCell(operation, who);
        } else {
          await notOwnTaskCell(operation, who, kind);
        }
        results.set(name, null);
      } catch (error) {
        results.set(name, firstLine(error));
        throw error;
      }
    });
  }

  it('the whole matrix ran and passed; one not-found answer for every not-own id', () => {
    const failing = [...results].filter(([, why]) => why !== null);
    console.log(
      `[isolation ${storeKind}/${adapter}] matrix ${PRINCIPALS.length} principals × ` +
        `${OPERATIONS.length} operations × ${ID_KINDS.length} id kinds = ${MATRIX_SIZE} cells; ` +
        `${results.size - failing.length} passed, ${failing.length} failed; ${requests} requests` +
        failing.map(([cell, why]) => `\n  FAIL ${cell}: ${why}`).join(''),
    );
    expect(results.size).toBe(MATRIX_SIZE);
    expect(failing.map(([cell, why]) => `${cell}: ${why}`)).toEqual([]);
    // tasks/get, tasks/update and tasks/cancel: one answer (same JSON-RPC id) for all of them.
    expect([...notFoundTexts]).toHaveLength(1);
  });
});
