/**
 * The PostgreSQL store takes what the in-memory store takes (issue 34): owners of thousands of
 * characters, owners and tenants holding a NUL or half of a surrogate pair, task ids holding a
 * NUL, and tool results, kept arguments, messages and answers holding "\u0000", on a schema named
 * by a reserved word. Every request goes to two apps on real HTTP on loopback, one on the
 * in-memory store and one on a real PostgreSQL (its store and notifier, schema `user`): their
 * JSON-RPC answers are compared side by side (task ids and instants aside), and neither logs an
 * ERROR. Schema names that cannot work are refused when the store is made, never at first use.
 */
import { randomBytes } from 'node:crypto';
import { Injectable, Module, type Type } from '@nestjs/common';
import pg from 'pg';
import * as z from 'zod/v4';
import { type TaskContext, TasksModule, TasksService, TaskTool } from '../../src/index.js';
import type { TasksModuleExtras } from '../../src/entries/options.js';
import { InMemoryTaskStore, type InputRequest, type TaskOwner } from '../../src/entries/store.js';
import { TasksConfigError } from '../../src/errors.js';
import { PostgresTaskStore, postgresNotifier } from '../../src/postgres/index.js';
import { newTask } from '../../src/task.js';
import { newTaskId } from '../../src/task-id.js';
import { type RunningApp, startApp } from '../support/app.js';
import { mcpRequest, post, type RawResponse } from '../support/raw.js';
import { eventually, openListen, type SseReader } from '../support/sse.js';
import { type JsonRpcMessage, legacyHeaders } from '../support/wire.js';
import { startTestPostgres, type TestPostgres } from '../support/postgres-server.js';
import { KeptLog } from '../support/kept-log.js';

/** The schema of the PostgreSQL app: a reserved word, which must be quoted to work. */
const SCHEMA = 'user';

// ----- owners on the wire ---------------------------------------------------------------------

/**
 * An owner as a bearer token any string survives (a NUL or half a surrogate pair cannot travel
 * in a header, nor through encodeURIComponent): each UTF-16 code unit outside [A-Za-z0-9_-] as
 * `~` and 4 hex digits; the tenant, when there is one, after a `.`.
 */
const tokenPart = (value: string): string =>
  value.replace(
    /[^A-Za-z0-9_-]/g,
    (unit) => `~${unit.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
const fromTokenPart = (value: string): string =>
  value.replace(/~([0-9a-f]{4})/g, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)));
const tokenOf = (owner: TaskOwner): string =>
  tokenPart(owner.principal!) + (owner.tenant == null ? '' : `.${tokenPart(owner.tenant)}`);

const bearer = (request: unknown): string[] | undefined => {
  const header = (request as { headers: Record<string, string | undefined> }).headers.authorization;
  const token = header === undefined ? undefined : /^Bearer\s+(\S+)$/i.exec(header)?.[1];
  return token?.split('.').map(fromTokenPart);
};

/** `Mcp-Name` for any task id: as it is when it can travel in a header, else the Base64 sentinel. */
const nameOf = (taskId: string): string =>
  /^[\x21-\x7e]*$/.test(taskId)
    ? taskId
    : `=?base64?${Buffer.from(taskId, 'utf8').toString('base64')}?=`;

// ----- the tools ------------------------------------------------------------------------------

const question = (message: string): InputRequest => ({
  method: 'elicitation/create',
  params: {
    mode: 'form',
    message,
    requestedSchema: { type: 'object', properties: { name: { type: 'string' } } },
  },
});

@Injectable()
class OddTools {
  /** Works until cancelled. */
  @TaskTool({ name: 'hold' })
  async hold(_input: unknown, task: TaskContext) {
    await new Promise((resolve) => task.signal.addEventListener('abort', resolve, { once: true }));
    return { content: [] };
  }

  /** Puts `text` everywhere a task keeps a string: arguments, messages, a question, its result. */
  @TaskTool({
    name: 'echo',
    input: z.object({ text: z.string() }),
    keepArguments: (input: { text: string }) => ({ text: input.text, [`key ${input.text}`]: 1 }),
    statusMessage: 'new \u0000 task',
  })
  async echo(input: { text: string }, task: TaskContext) {
    await task.progress(`progress ${input.text}`);
    const answers = await task.requireInput({ q1: question(`ask ${input.text}`) });
    return {
      content: [
        { type: 'text', text: input.text },
        { type: 'text', text: JSON.stringify(answers) },
      ],
    };
  }
}

function oddModule(storage: TasksModuleExtras): Type<unknown> {
  @Module({
    imports: [
      TasksModule.forRoot({
        principal: (request) => bearer(request)?.[0],
        tenant: (request) => bearer(request)?.[1],
        janitor: false,
        shutdown: { drainMs: 0 },
        ...storage,
      }),
    ],
    providers: [OddTools],
  })
  class OddModule {}
  return OddModule;
}

// ----- the two apps ---------------------------------------------------------------------------

interface Side {
  name: 'memory' | 'postgres';
  app: RunningApp;
  log: KeptLog;
  streams: SseReader[];
}

let postgres: TestPostgres;
let memory: Side;
let onPostgres: Side;

beforeAll(async () => {
  postgres = await startTestPostgres();
  const start = async (name: Side['name'], storage: TasksModuleExtras): Promise<Side> => {
    const log = new KeptLog();
    const app = await startApp(oddModule(storage), 'express', '/mcp', (nest) =>
      nest.useLogger(log),
    );
    return { name, app, log, streams: [] };
  };
  const connection = { connection: postgres.url, schema: SCHEMA };
  [memory, onPostgres] = await Promise.all([
    start('memory', { store: new InMemoryTaskStore() }),
    start('postgres', {
      store: new PostgresTaskStore(connection),
      notifier: postgresNotifier(connection),
    }),
  ]);
}, 60_000);

afterAll(async () => {
  for (const side of [memory, onPostgres]) {
    await Promise.all(side?.streams.map((stream) => stream.close()) ?? []);
    await side?.app.close();
  }
  await postgres?.stop();
});

afterEach(() => {
  // No request of this file is worth an ERROR line, on either side.
  const errors = { memory: memory.log.errors.splice(0), postgres: onPostgres.log.errors.splice(0) };
  expect(errors).toEqual({ memory: [], postgres: [] });
});

const BOTH = (): Side[] => [memory, onPostgres];

/** A request as `owner`, with a fixed JSON-RPC id (answers are compared byte for byte). */
function send(
  side: Side,
  owner: TaskOwner,
  method: string,
  params: Record<string, unknown>,
): Promise<RawResponse> {
  const name =
    typeof params.taskId === 'string' ? nameOf(params.taskId) : (params.name as string | undefined);
  return post(side.app.url, mcpRequest(method, params, { principal: tokenOf(owner), name, id: 7 }));
}

/** `tasks/list` (a 2025-11-25 method) as `owner`. */
function list(side: Side, owner: TaskOwner): Promise<RawResponse> {
  return post(side.app.url, {
    headers: legacyHeaders(tokenOf(owner), 'application/json'),
    body: JSON.stringify({ jsonrpc: '2.0', id: 8, method: 'tasks/list', params: {} }),
  });
}

async function callTool(
  side: Side,
  owner: TaskOwner,
  name: string,
  args: Record<string, unknown> = {},
): Promise<string> {
  const answer = await send(side, owner, 'tools/call', { name, arguments: args });
  const taskId = answer.json?.result?.taskId;
  if (answer.status !== 200 || typeof taskId !== 'string') {
    throw new Error(`${side.name}: tools/call ${name}: HTTP ${answer.status} ${answer.text}`);
  }
  return taskId;
}

async function listen(side: Side, owner: TaskOwner, taskIds: string[]) {
  const response = await openListen(side.app.url, {
    principal: tokenOf(owner),
    taskIds,
    id: 'odd-listen',
  });
  if (response.stream !== undefined) side.streams.push(response.stream);
  return response;
}

/**
 * What must be the same on both sides: the answer with each task id replaced by its label and
 * each instant by `<time>`.
 */
function comparable(value: unknown, labels: ReadonlyMap<string, string>): unknown {
  return JSON.parse(
    JSON.stringify(value, (key, field: unknown) => {
      if (key === 'createdAt' || key === 'lastUpdatedAt') return '<time>';
      if (typeof field === 'string' && labels.has(field)) return labels.get(field);
      return field;
    }),
  );
}

const answerOf = (response: RawResponse) => ({ status: response.status, json: response.json });

/** Runs `work` on both sides; returns the memory side's outcome, once the other matches it. */
async function sideBySide<T>(
  work: (side: Side) => Promise<{ outcome: T; labels: ReadonlyMap<string, string> }>,
): Promise<T> {
  const [fromMemory, fromPostgres] = await Promise.all(BOTH().map(work));
  expect(comparable(fromPostgres!.outcome, fromPostgres!.labels)).toEqual(
    comparable(fromMemory!.outcome, fromMemory!.labels),
  );
  return fromMemory!.outcome;
}

const statusOf = async (side: Side, owner: TaskOwner, taskId: string): Promise<string> =>
  (await send(side, owner, 'tasks/get', { taskId })).json?.result?.status as string;

const NOT_FOUND = { code: -32602, message: 'Task not found' };

// ----- the tests ------------------------------------------------------------------------------

describe.each([3_000, 8_000])('an owner of %d characters', (length) => {
  it('creates, gets, lists, listens and cancels as on the in-memory store', async () => {
    // Random characters: a repeated text would be compressed under the index's limit.
    const owner = { principal: randomBytes(length).toString('base64url').slice(0, length) };
    expect(owner.principal).toHaveLength(length);
    const outcome = await sideBySide(async (side) => {
      const taskId = await callTool(side, owner, 'hold');
      const labels = new Map([[taskId, '<task>']]);
      const got = await send(side, owner, 'tasks/get', { taskId });
      const listed = await list(side, owner);
      const listening = await listen(side, owner, [taskId]);
      const ack = await listening.stream!.next(5_000);
      const cancelled = await send(side, owner, 'tasks/cancel', { taskId });
      const heard = await listening.stream!.waitForFrame(
        (frame) => (frame.message?.params as { status?: string })?.status === 'cancelled',
        5_000,
      );
      await eventually(
        async () => ((await statusOf(side, owner, taskId)) === 'cancelled' ? true : undefined),
        5_000,
      );
      const after = await send(side, owner, 'tasks/get', { taskId });
      // Another principal (the same one, one character shorter) sees none of it.
      const other = { principal: owner.principal.slice(1) };
      const foreign = await send(side, other, 'tasks/get', { taskId });
      const foreignList = await list(side, other);
      return {
        labels,
        outcome: {
          got: answerOf(got),
          listed: answerOf(listed),
          ack: ack.params,
          cancelled: answerOf(cancelled),
          heard: (heard.message as JsonRpcMessage).params,
          after: answerOf(after),
          foreign: answerOf(foreign),
          foreignList: answerOf(foreignList),
        },
      };
    });
    expect(outcome.got.json?.result).toMatchObject({ status: 'working' });
    expect(outcome.listed.json?.result?.tasks).toHaveLength(1);
    expect(outcome.after.json?.result).toMatchObject({ status: 'cancelled' });
    expect(outcome.foreign.json?.error).toEqual(NOT_FOUND);
    expect(outcome.foreignList.json?.result?.tasks).toEqual([]);
  });
});

describe('task ids holding a NUL', () => {
  const alice = { principal: 'alice' };

  it.each(['abc\u0000def', 'REAL\u0000', '\u0000'])(
    '%j is an unknown id on tasks/get, tasks/update, tasks/cancel and listen, as on the in-memory store',
    async (odd) => {
      const outcome = await sideBySide(async (side) => {
        const taskId = await callTool(side, alice, 'hold');
        const id = odd.replace('REAL', taskId);
        const answers: Record<string, unknown> = {};
        for (const [method, params] of [
          ['tasks/get', { taskId: id }],
          ['tasks/update', { taskId: id, inputResponses: {} }],
          ['tasks/cancel', { taskId: id }],
        ] as const) {
          answers[method] = answerOf(await send(side, alice, method, params));
        }
        // Alone, and beside a real id.
        const alone = await listen(side, alice, [id]);
        answers.listenAlone = alone.stream ? (await alone.stream.next(5_000)).params : alone.json;
        const beside = await listen(side, alice, [id, taskId]);
        answers.listenBeside = beside.stream
          ? (await beside.stream.next(5_000)).params
          : beside.json;
        // The real task is untouched.
        answers.real = await statusOf(side, alice, taskId);
        return { outcome: answers, labels: new Map([[taskId, '<task>']]) };
      });
      for (const method of ['tasks/get', 'tasks/update', 'tasks/cancel']) {
        expect({ method, answer: outcome[method] }).toMatchObject({
          method,
          answer: { status: 200, json: { error: NOT_FOUND } },
        });
      }
      expect(outcome.real).toBe('working');
    },
  );
});

describe('owners holding a NUL or half of a surrogate pair', () => {
  const OWNERS: TaskOwner[] = [
    { principal: 'a\u0000b' },
    { principal: 'a' },
    { principal: 'a\u0000c' },
    { principal: 'a', tenant: 't\u0000' },
    { principal: 'a', tenant: 't' },
    { principal: 'x\ud800' },
    { principal: 'x\udbff' },
    { principal: 'x\ufffd' },
    { principal: '\u0001x' },
  ];

  it('each has its own tasks, exactly as on the in-memory store', async () => {
    const outcome = await sideBySide(async (side) => {
      const ids = [];
      for (const owner of OWNERS) ids.push(await callTool(side, owner, 'hold'));
      const labels = new Map(ids.map((id, i) => [id, `<task of owner ${i}>`]));
      const seen = [];
      for (const [i, owner] of OWNERS.entries()) {
        const listed = await list(side, owner);
        const own = await send(side, owner, 'tasks/get', { taskId: ids[i]! });
        const next = ids[(i + 1) % ids.length]!;
        const foreign = await send(side, owner, 'tasks/get', { taskId: next });
        const listening = await listen(side, owner, [ids[i]!, next]);
        const ack = (await listening.stream!.next(5_000)).params;
        const cancelled = await send(side, owner, 'tasks/cancel', { taskId: ids[i]! });
        seen.push({
          listed: answerOf(listed),
          own: answerOf(own),
          foreign: answerOf(foreign),
          ack,
          cancelled: answerOf(cancelled),
        });
      }
      return { outcome: seen, labels };
    });
    for (const [i, seen] of outcome.entries()) {
      expect(seen.listed.json?.result?.tasks).toHaveLength(1);
      expect(seen.own.json?.result?.status).toBe('working');
      expect({ i, foreign: seen.foreign.json?.error }).toEqual({ i, foreign: NOT_FOUND });
    }
  });
});

describe('strings holding "\\u0000" and half of a surrogate pair', () => {
  const owner = { principal: 'bob' };
  const TEXT = 'nul \u0000, lone \ud800, pair \ud83d\ude00, \\u0000 as text';

  it('round-trip through arguments, messages, a question, an answer and the result', async () => {
    const outcome = await sideBySide(async (side) => {
      const taskId = await callTool(side, owner, 'echo', { text: TEXT });
      await eventually(
        async () => ((await statusOf(side, owner, taskId)) === 'input_required' ? true : undefined),
        5_000,
      );
      const asking = await send(side, owner, 'tasks/get', { taskId });
      const answered = await send(side, owner, 'tasks/update', {
        taskId,
        inputResponses: { q1: { action: 'accept', content: { name: TEXT } } },
      });
      await eventually(
        async () => ((await statusOf(side, owner, taskId)) === 'completed' ? true : undefined),
        5_000,
      );
      const done = await send(side, owner, 'tasks/get', { taskId });
      const listed = await list(side, owner);
      const record = await side.app.app.get(TasksService).get(taskId, owner);
      return {
        labels: new Map([[taskId, '<task>']]),
        outcome: {
          asking: answerOf(asking),
          answered: answerOf(answered),
          done: answerOf(done),
          listed: answerOf(listed),
          arguments: record.arguments,
        },
      };
    });
    expect(JSON.stringify(outcome.asking.json)).toContain(JSON.stringify(`ask ${TEXT}`));
    expect(outcome.done.json?.result?.status).toBe('completed');
    expect(JSON.stringify(outcome.done.json)).toContain(JSON.stringify(TEXT).slice(1, -1));
    expect(outcome.arguments).toEqual({ text: TEXT, [`key ${TEXT}`]: 1 });
  });
});

describe('the schema option', () => {
  let pool: pg.Pool;
  beforeAll(() => {
    pool = new pg.Pool({ connectionString: postgres.url, max: 2 });
  });
  afterAll(() => pool.end());

  it.each(['select', 'Odd-Name_2', 'public'])(
    '%j works: create, get, list, listAll, cleanup, delete',
    async (schema) => {
      const store = new PostgresTaskStore({ connection: pool, schema });
      const owner = { principal: 'carol' };
      const task = newTask(newTaskId(), owner, { ttlMs: 1_000 }, Date.now());
      await store.create(task, { maxRows: 10, maxTasksPerOwner: 5 });
      expect(await store.get(task.taskId, owner)).toEqual(task);
      expect((await store.list(owner, { limit: 10 })).tasks).toEqual([task]);
      expect((await store.listAll({ limit: 10 })).tasks).toEqual([task]);
      expect(await store.cleanup(Date.now() + 60_000, { terminalTtlMs: 0 })).toBe(1);
      await store.create({ ...task, taskId: newTaskId() }, { maxRows: 10 });
      expect((await store.listAll({ limit: 10 })).tasks).toHaveLength(1);
    },
  );

  it.each([
    ['pg_tasks', /pg_/],
    ['a"b', /letters, digits/],
    ['a b', /letters, digits/],
    ['', /letters, digits/],
    ['x'.repeat(64), /63/],
  ])('%j is refused when the store is made, naming the option and the rule', (schema, rule) => {
    let error: unknown;
    try {
      new PostgresTaskStore({ connection: pool, schema });
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(TasksConfigError);
    expect((error as Error).message).toMatch(/schema/);
    expect((error as Error).message).toMatch(rule);
  });
});
