import { Injectable, Module, type Type } from '@nestjs/common';
import { Redis } from 'ioredis';
import * as z from 'zod/v4';
import {
  isTerminal,
  type TaskContext,
  type TaskRecord,
  TaskTerminalError,
  TaskTool,
  TasksModule,
  TasksService,
} from '../../src/index.js';
import { type InputRequest, TaskNotifier, TaskStore } from '../../src/entries/store.js';
import { RedisTaskNotifier, RedisTaskStore, redisNotifier } from '../../src/redis/index.js';
import type { CallToolResult } from '../../src/task.js';
import { seededRandom } from '../support/helpers.js';
import { startTestRedis, type TestRedis } from '../support/redis-server.js';
import { type AdapterName, type RunningApp, startApp } from '../support/app.js';
import { eventually, openListen, rpc, type RpcAnswer, type SseReader } from '../support/sse.js';
import type { JsonRpcMessage } from '../support/wire.js';

/**
 * Two (or three) Nest apps sharing one private Redis through RedisTaskStore and the Redis
 * notifier: what one instance writes, the others read, update, cancel and hear about.
 */

const sleep = (ms: number): Promise<void> => new Promise((done) => setTimeout(done, ms));

// ----- tools the test drives ----------------------------------------------------------------------

/** A signal the test gives to a `wait_for_signal` call. */
class Gate {
  released = false;
  /** Set when the call saw its abort signal (a cancel, here or on another instance). */
  aborted = false;
  private wake: (() => void) | undefined;

  release(): void {
    this.released = true;
    this.wake?.();
  }

  wait(signal: AbortSignal): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      if (this.released) return resolve();
      const onAbort = (): void => {
        this.aborted = true;
        reject(signal.reason);
      };
      if (signal.aborted) return onAbort();
      signal.addEventListener('abort', onAbort, { once: true });
      this.wake = () => {
        signal.removeEventListener('abort', onAbort);
        resolve();
      };
    });
  }
}

const gates = new Map<string, Gate>();
let gateCount = 0;

function newGate(): { gate: string; control: Gate } {
  const gate = `gate-${++gateCount}`;
  const control = new Gate();
  gates.set(gate, control);
  return { gate, control };
}

const QUESTION: InputRequest = {
  method: 'elicitation/create',
  params: {
    mode: 'form',
    message: 'Your name?',
    requestedSchema: { type: 'object', properties: { name: { type: 'string' } } },
  },
};

@Injectable()
class RedisTools {
  /** Works until the test releases its gate (then completes) or until it is cancelled. */
  @TaskTool({ name: 'wait_for_signal', input: z.object({ gate: z.string() }), pollIntervalMs: 100 })
  async waitForSignal(input: { gate: string }, task: TaskContext) {
    const gate = gates.get(input.gate);
    if (gate === undefined) throw new Error(`no gate ${input.gate}`);
    await task.progress('waiting for the signal');
    await gate.wait(task.signal);
    return { content: [{ type: 'text', text: `released ${input.gate}` }] };
  }

  /** Asks for a name, then greets. */
  @TaskTool({ name: 'ask_name', pollIntervalMs: 100 })
  async askName(_input: unknown, task: TaskContext) {
    const { name } = await task.requireInput({ name: QUESTION });
    const given = (name?.content as { name?: unknown } | undefined)?.name;
    return { content: [{ type: 'text', text: `Hello ${String(given)}` }] };
  }
}

/** `Authorization: Bearer <name>` makes `<name>` the principal. */
const principal = (request: unknown): string | undefined => {
  const header = (request as { headers: Record<string, string | undefined> }).headers.authorization;
  return header === undefined ? undefined : /^Bearer\s+(\S+)$/i.exec(header)?.[1];
};

/** Each run of this file gets its own keys and channel, also on a shared REDIS_URL. */
const PREFIX = `e2e-redis-${process.pid}-${Date.now()}:`;

interface Instance {
  running: RunningApp;
  url: string;
  service: TasksService;
  store: RedisTaskStore;
  notifier: RedisTaskNotifier;
  close(): Promise<void>;
}

/** A module with the tools above on RedisTaskStore and the Redis notifier. */
function redisModule(url: string, timeoutMs?: number): Type<unknown> {
  const connection = {
    connection: url,
    prefix: PREFIX,
    ...(timeoutMs !== undefined && { timeoutMs }),
  };
  @Module({
    imports: [
      TasksModule.forRoot({
        principal,
        janitor: false,
        // Calls are left running: closing the app hands them over at once.
        shutdown: { drainMs: 0 },
        store: new RedisTaskStore(connection),
        notifier: redisNotifier(connection),
      }),
    ],
    providers: [RedisTools],
  })
  class RedisTestModule {}
  return RedisTestModule;
}

async function boot(
  redisUrl: string,
  adapter: AdapterName = 'express',
  timeoutMs?: number,
): Promise<Instance> {
  const running = await startApp(redisModule(redisUrl, timeoutMs), adapter);
  const store = running.app.get<RedisTaskStore>(TaskStore);
  const notifier = running.app.get<RedisTaskNotifier>(TaskNotifier);
  expect(store).toBeInstanceOf(RedisTaskStore);
  expect(notifier).toBeInstanceOf(RedisTaskNotifier);
  await notifier.ready;
  return {
    running,
    url: running.url,
    service: running.app.get(TasksService),
    store,
    notifier,
    close: () => running.close(),
  };
}

/** The Redis clients a notifier made (it owns both). */
function notifierClients(notifier: RedisTaskNotifier): { status: string }[] {
  const { publisher, subscriber } = notifier as unknown as Record<string, { status: string }>;
  return [publisher!, subscriber!];
}

// ----- JSON-RPC helpers ---------------------------------------------------------------------------

async function callTool(
  url: string,
  who: string,
  name: string,
  args: Record<string, unknown> = {},
): Promise<string> {
  const { status, body } = await rpc(
    url,
    'tools/call',
    { name, arguments: args },
    { principal: who },
  );
  expect(status).toBe(200);
  if (body.result?.resultType !== 'task') throw new Error(`tools/call: ${JSON.stringify(body)}`);
  return body.result.taskId as string;
}

async function getTask(url: string, who: string, taskId: string): Promise<Record<string, unknown>> {
  const { body } = await rpc(url, 'tasks/get', { taskId }, { principal: who });
  if (body.result === undefined) throw new Error(`tasks/get: ${JSON.stringify(body)}`);
  return body.result;
}

/** Polls `tasks/get` until the task satisfies `matches`. */
function waitFor(
  url: string,
  who: string,
  taskId: string,
  matches: (task: Record<string, unknown>) => boolean,
  what: string,
): Promise<Record<string, unknown>> {
  return eventually(
    async () => {
      const task = await getTask(url, who, taskId);
      return matches(task) ? task : undefined;
    },
    5_000,
    what,
  );
}

function expectNotFound(answer: RpcAnswer): void {
  expect(answer.status).toBe(200);
  expect(answer.body.result).toBeUndefined();
  expect(answer.body.error).toEqual({ code: -32602, message: 'Task not found' });
}

/** Everything but `_meta`, which names the answering server. */
function bare(value: Record<string, unknown>): Record<string, unknown> {
  const copy = { ...value };
  delete copy._meta;
  return copy;
}

// ----- the suite ----------------------------------------------------------------------------------

describe('two instances sharing one Redis', () => {
  let redis: TestRedis;
  let a: Instance;
  let b: Instance;
  /** Apps a test boots beyond A and B; closed after it. */
  const extra: Instance[] = [];
  const streams: SseReader[] = [];

  beforeAll(async () => {
    redis = await startTestRedis();
    a = await boot(redis.url);
    b = await boot(redis.url);
  });

  afterEach(async () => {
    for (const stream of streams.splice(0)) await stream.close();
    for (const instance of extra.splice(0)) await instance.close();
    for (const gate of gates.values()) gate.release();
  });

  afterAll(async () => {
    const stores = [a?.store, b?.store];
    const notifiers = [a?.notifier, b?.notifier];
    await a?.close();
    await b?.close();
    await redis?.stop();
    // Every connection the stores and notifiers made is closed with their app.
    for (const store of stores) expect(store?.client.status).toBe('end');
    for (const notifier of notifiers) {
      if (notifier)
        for (const client of notifierClients(notifier)) expect(client.status).toBe('end');
    }
  });

  const listen = async (url: string, who: string, taskIds: string[]): Promise<SseReader> => {
    const response = await openListen(url, { principal: who, taskIds });
    if (response.stream === undefined) {
      throw new Error(`listen answered HTTP ${response.status}: ${response.text}`);
    }
    streams.push(response.stream);
    return response.stream;
  };

  it('a task created on A is read, answered and cancelled on B by its owner, and by no one else', async () => {
    // input_required on A, answered on B
    const asking = await callTool(a.url, 'alice', 'ask_name');
    const waiting = await waitFor(
      b.url,
      'alice',
      asking,
      (task) => task.status === 'input_required',
      'input_required on B',
    );
    expect(waiting).toMatchObject({ taskId: asking, inputRequests: { name: QUESTION } });

    // A foreign principal (and an anonymous caller) gets "Task not found" on B for everything.
    for (const who of ['bob', undefined]) {
      const options = who === undefined ? {} : { principal: who };
      expectNotFound(await rpc(b.url, 'tasks/get', { taskId: asking }, options));
      expectNotFound(
        await rpc(
          b.url,
          'tasks/update',
          {
            taskId: asking,
            inputResponses: { name: { action: 'accept', content: { name: 'Eve' } } },
          },
          options,
        ),
      );
      expectNotFound(await rpc(b.url, 'tasks/cancel', { taskId: asking }, options));
    }
    expect((await getTask(a.url, 'alice', asking)).status).toBe('input_required');

    const update = await rpc(
      b.url,
      'tasks/update',
      { taskId: asking, inputResponses: { name: { action: 'accept', content: { name: 'Ada' } } } },
      { principal: 'alice' },
    );
    expect(update.status).toBe(200);
    expect(update.body.result?.resultType).toBe('complete');
    const done = await waitFor(
      b.url,
      'alice',
      asking,
      (task) => task.status === 'completed',
      'completed on B',
    );
    expect(done.result).toEqual({
      content: [{ type: 'text', text: 'Hello Ada' }],
      resultType: 'complete',
    });
    expect(bare(await getTask(a.url, 'alice', asking))).toEqual(bare(done));

    // working on A, cancelled on B: the call running on A sees its signal fire.
    const { gate, control } = newGate();
    const working = await callTool(a.url, 'alice', 'wait_for_signal', { gate });
    await waitFor(
      b.url,
      'alice',
      working,
      (task) => task.statusMessage === 'waiting for the signal',
      'progress on B',
    );
    expectNotFound(await rpc(b.url, 'tasks/cancel', { taskId: working }, { principal: 'bob' }));
    expect((await getTask(b.url, 'alice', working)).status).toBe('working');
    const cancel = await rpc(b.url, 'tasks/cancel', { taskId: working }, { principal: 'alice' });
    expect(cancel.body.result?.resultType).toBe('complete');
    expect((await getTask(a.url, 'alice', working)).status).toBe('cancelled');
    await eventually(() => (control.aborted ? true : undefined), 2_000, 'the abort on A');
    // The cancel stands: the call that ended on A did not overwrite it.
    await sleep(50);
    expect(await getTask(b.url, 'alice', working)).toMatchObject({
      status: 'cancelled',
      statusMessage: 'Cancelled',
    });
  });

  it('a listen stream on B hears the completion that happened on A, and never a foreign task', async () => {
    const mine = newGate();
    const foreign = newGate();
    const mineId = await callTool(a.url, 'alice', 'wait_for_signal', { gate: mine.gate });
    const foreignId = await callTool(a.url, 'bob', 'wait_for_signal', { gate: foreign.gate });

    const stream = await listen(b.url, 'alice', [mineId, foreignId]);
    const ack = await stream.next();
    expect(ack.method).toBe('notifications/subscriptions/acknowledged');
    expect(ack.params!.notifications).toEqual({ taskIds: [mineId] });

    // Bob's task finishes first, on A; then Alice's, on A.
    foreign.control.release();
    await waitFor(a.url, 'bob', foreignId, (task) => task.status === 'completed', 'bob done');
    mine.control.release();

    let completed: JsonRpcMessage | undefined;
    while (completed === undefined) {
      const message = await stream.next(5_000);
      expect(message.method).toBe('notifications/tasks');
      expect(message.params!.taskId).toBe(mineId);
      if (message.params!.status === 'completed') completed = message;
    }
    expect(completed.params).toMatchObject({
      taskId: mineId,
      status: 'completed',
      result: { content: [{ type: 'text', text: `released ${mine.gate}` }] },
    });
    // The same task as B (and A) answer it now.
    const { resultType, ...onB } = bare(await getTask(b.url, 'alice', mineId));
    expect(resultType).toBe('complete');
    expect(bare(completed.params!)).toEqual(onB);

    await sleep(100);
    for (const frame of stream.frames) expect(frame.raw).not.toContain(foreignId);
  });

  it('1,000 racing transitions over A and B leave exactly one terminal state per task', async () => {
    const random = seededRandom(20260728);
    const owner = { principal: 'racer' };
    const tasks = await Promise.all(
      Array.from({ length: 10 }, (_, i) => (i % 2 === 0 ? a : b).service.create(owner)),
    );
    type Kind = 'complete' | 'fail' | 'cancel' | 'progress';
    const kinds: Kind[] = ['complete', 'fail', 'cancel', 'progress', 'progress', 'progress'];
    const calls: { taskId: string; run: () => Promise<TaskRecord> }[] = [];
    for (const { taskId } of tasks) {
      for (let i = 0; i < 100; i++) {
        const kind = kinds[Math.floor(random() * kinds.length)]!;
        const via = i % 2 === 0 ? 'A' : 'B';
        const service = via === 'A' ? a.service : b.service;
        const run = (): Promise<TaskRecord> => {
          switch (kind) {
            case 'complete':
              return service.complete(taskId, { content: [{ type: 'text', text: `by ${via}` }] });
            case 'fail':
              return service.fail(taskId, [-32042, `failed by ${via}`]);
            case 'cancel':
              return service.cancel(taskId, owner);
            default:
              return service.progress(taskId, `step ${i} via ${via}`);
          }
        };
        calls.push({ taskId, run });
      }
    }
    // Shuffled, then all started at once.
    for (let i = calls.length - 1; i > 0; i--) {
      const j = Math.floor(random() * (i + 1));
      [calls[i], calls[j]] = [calls[j]!, calls[i]!];
    }
    expect(calls).toHaveLength(1_000);
    const outcomes = await Promise.allSettled(calls.map((call) => call.run()));

    for (const { taskId } of tasks) {
      const fromA = await a.service.status(taskId);
      const fromB = await b.service.status(taskId);
      expect(fromB).toEqual(fromA);
      expect(isTerminal(fromA.status)).toBe(true);

      const mine = outcomes.filter((_, i) => calls[i]!.taskId === taskId);
      // The only refusals are "already finished": no conflicts given up on, no store faults.
      for (const outcome of mine) {
        if (outcome.status === 'rejected') expect(outcome.reason).toBeInstanceOf(TaskTerminalError);
      }
      const records = mine.flatMap((outcome) =>
        outcome.status === 'fulfilled' ? [outcome.value] : [],
      );
      // Every answer that saw the task finished saw the same end: the stored one.
      const ends = records.filter((record) => isTerminal(record.status));
      expect(ends.length).toBeGreaterThan(0);
      for (const end of ends) expect(end).toEqual(fromA);
      // Every other acknowledged write has its own version below the end's: nothing was lost or
      // written twice, and nothing was written after the end.
      const versions = records
        .filter((record) => !isTerminal(record.status))
        .map((record) => record.version);
      expect(new Set(versions).size).toBe(versions.length);
      for (const version of versions) expect(version).toBeLessThan(fromA.version);
    }
  });

  it('A restarted (closed, booted again on the same Redis and prefix) finds every task it had acknowledged', async () => {
    const owner = 'restarter';
    const finished = newGate();
    const done = await callTool(a.url, owner, 'wait_for_signal', { gate: finished.gate });
    finished.control.release();
    await waitFor(a.url, owner, done, (task) => task.status === 'completed', 'completed');
    const asking = await callTool(a.url, owner, 'ask_name');
    await waitFor(a.url, owner, asking, (task) => task.status === 'input_required', 'asking');
    const created = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        a.service.create({ principal: owner }, { statusMessage: `created ${i}` }),
      ),
    );
    await a.service.progress(created[0]!.taskId, 'moved on');
    const ids = [done, asking, ...created.map((task) => task.taskId)];

    const old = a;
    await old.close();
    expect(old.store.client.status).toBe('end');
    for (const client of notifierClients(old.notifier)) expect(client.status).toBe('end');
    const before = await Promise.all(ids.map((taskId) => getTask(b.url, owner, taskId)));
    // The call still running at shutdown was failed by it (runningTasksOnShutdown 'fail').
    expect(before[1]).toMatchObject({ status: 'failed', error: { code: -32603 } });

    a = await boot(redis.url);
    for (const [i, taskId] of ids.entries()) {
      const task = await getTask(a.url, owner, taskId);
      expect(bare(task)).toEqual(bare(before[i]!));
      expectNotFound(await rpc(a.url, 'tasks/get', { taskId }, { principal: 'someone-else' }));
    }
    expect((await getTask(a.url, owner, done)).result).toMatchObject({
      content: [{ type: 'text', text: `released ${finished.gate}` }],
    });
    expect((await getTask(a.url, owner, created[0]!.taskId)).statusMessage).toBe('moved on');
    // The new A carries on with them, and B sees it.
    const later: CallToolResult = { content: [{ type: 'text', text: 'finished later' }] };
    expect((await a.service.complete(created[1]!.taskId, later)).status).toBe('completed');
    expect((await getTask(b.url, owner, created[1]!.taskId)).status).toBe('completed');
  });

  // ----- Redis away ------------------------------------------------------------------------------
  // These tests stop the private server; with REDIS_URL (a server that is not ours) they do nothing.

  /** The Redis clients of every instance up now. */
  const allClients = (): { status: string }[] =>
    [a, b, ...extra].flatMap((instance) => [
      instance.store.client,
      ...notifierClients(instance.notifier),
    ]);

  /**
   * Stops Redis for the duration of `during`, then starts it again (also when `during` throws) and
   * waits until every client has reconnected.
   */
  const outage = async (during: () => Promise<void>): Promise<void> => {
    await redis.kill();
    try {
      await during();
    } finally {
      await redis.start();
      await eventually(
        () => (allClients().every((client) => client.status === 'ready') ? true : undefined),
        10_000,
        'every Redis client to reconnect',
      );
    }
  };

  /** An instance whose Redis calls give up after 500 ms. */
  const bootFast = async (): Promise<Instance> => {
    const fast = await boot(redis.url, 'express', 500);
    extra.push(fast);
    return fast;
  };

  /** Polls until `read` succeeds again after an outage (ioredis reconnects by itself). */
  const whenBack = <T>(what: string, read: () => Promise<T | undefined>): Promise<T> =>
    eventually(read, 10_000, what);

  const ownRedis = process.env.REDIS_URL ? it.skip : it;

  ownRedis(
    'a result that comes while Redis is down is written once Redis is back, by the live call',
    async () => {
      const fast = await bootFast();
      const { gate, control } = newGate();
      const taskId = await callTool(fast.url, 'carol', 'wait_for_signal', { gate });
      await waitFor(fast.url, 'carol', taskId, (task) => task.status === 'working', 'working');
      await outage(async () => {
        control.release();
        // The first write of the result fails (500 ms), and the call keeps it to write again.
        await new Promise((resolve) => setTimeout(resolve, 1_200));
      });
      const done = await waitFor(
        fast.url,
        'carol',
        taskId,
        (task) => task.status !== 'working',
        'the result written after the outage',
      );
      expect(done).toMatchObject({ status: 'completed' });
      expect(done.result).toEqual({
        content: [{ type: 'text', text: `released ${gate}` }],
        resultType: 'complete',
      });
    },
    30_000,
  );

  ownRedis(
    'with Redis down, tasks/* fail cleanly in bounded time and the app stays up; when Redis is back they succeed',
    async () => {
      const fast = await bootFast();
      const taskId = await callTool(fast.url, 'carol', 'ask_name');
      await waitFor(
        fast.url,
        'carol',
        taskId,
        (task) => task.status === 'input_required',
        'asking',
      );
      const answer = { name: { action: 'accept', content: { name: 'Cy' } } };

      await outage(async () => {
        for (const [method, params] of [
          ['tasks/get', { taskId }],
          ['tasks/update', { taskId, inputResponses: answer }],
          ['tasks/cancel', { taskId }],
        ] as const) {
          const started = Date.now();
          const { status, body } = await rpc(fast.url, method, params, { principal: 'carol' });
          expect(Date.now() - started).toBeLessThan(2_000);
          expect(status).toBe(200);
          expect(body.error).toEqual({ code: -32603, message: 'Task store unavailable' });
        }
        // What does not need the store answers as usual.
        const discover = await rpc(fast.url, 'server/discover', {});
        expect(discover.status).toBe(200);
        expect(discover.body.result?.capabilities).toBeDefined();
        const tools = await rpc(fast.url, 'tools/list', {});
        expect(tools.status).toBe(200);
        const names = (tools.body.result!.tools as { name: string }[]).map((tool) => tool.name);
        expect(names.sort()).toEqual(['ask_name', 'wait_for_signal']);
      });

      // Back: what was acknowledged before the outage is there as it was.
      const back = await whenBack('tasks/get to succeed again', async () => {
        const { body } = await rpc(fast.url, 'tasks/get', { taskId }, { principal: 'carol' });
        return body.result;
      });
      expect(back).toMatchObject({ taskId, status: 'input_required' });
      // Nothing asked during the outage happened behind the caller's back.
      expect(back.inputRequests).toEqual({ name: QUESTION });

      // New tasks work, and changes travel between instances again.
      const { gate, control } = newGate();
      const after = await whenBack('tools/call to succeed again', async () => {
        const { body } = await rpc(
          fast.url,
          'tools/call',
          { name: 'wait_for_signal', arguments: { gate } },
          { principal: 'carol' },
        );
        return body.result?.taskId as string | undefined;
      });
      const stream = await listen(b.url, 'carol', [after]);
      expect((await stream.next()).params!.notifications).toEqual({ taskIds: [after] });
      control.release();
      let last: JsonRpcMessage;
      do last = await stream.next(5_000);
      while (last.params!.status !== 'completed');
      expect(last.params!.taskId).toBe(after);
      // The task waiting for input gives way to a cancel from B.
      const cancel = await rpc(b.url, 'tasks/cancel', { taskId }, { principal: 'carol' });
      expect(cancel.body.result?.resultType).toBe('complete');
      expect((await getTask(fast.url, 'carol', taskId)).status).toBe('cancelled');
    },
  );

  ownRedis(
    'with Redis down, tools/call of a task tool answers -32603 "Task store unavailable"',
    async () => {
      const fast = await bootFast();
      await outage(async () => {
        const started = Date.now();
        const call = await rpc(
          fast.url,
          'tools/call',
          { name: 'ask_name', arguments: {} },
          { principal: 'carol' },
        );
        expect(Date.now() - started).toBeLessThan(2_000);
        expect(call.status).toBe(200);
        // No task could be created: a JSON-RPC error, as for tasks/*, not a tool result.
        expect(call.body.result).toBeUndefined();
        expect(call.body.error).toEqual({ code: -32603, message: 'Task store unavailable' });
      });
    },
  );

  ownRedis('a tool call running through a Redis outage carries on when Redis is back', async () => {
    const fast = await bootFast();
    const { gate, control } = newGate();
    const taskId = await callTool(fast.url, 'carol', 'wait_for_signal', { gate });
    await waitFor(
      fast.url,
      'carol',
      taskId,
      (task) => task.statusMessage === 'waiting for the signal',
      'working',
    );
    // Longer than the call's poll interval (100 ms) and the store's timeout (500 ms).
    await outage(() => sleep(1_500));
    await whenBack('tasks/get to succeed again', async () => {
      const { body } = await rpc(fast.url, 'tasks/get', { taskId }, { principal: 'carol' });
      return body.result;
    });
    // The outage was no cancellation: the call still runs, and finishes its task when released.
    expect(control.aborted).toBe(false);
    control.release();
    const done = await waitFor(
      b.url,
      'carol',
      taskId,
      (task) => task.status !== 'working',
      'the task to finish',
    );
    expect(done).toMatchObject({
      status: 'completed',
      result: { content: [{ type: 'text', text: `released ${gate}` }] },
    });
  });

  ownRedis(
    'an instance closed while Redis is away closes promptly and its clients stay closed',
    async () => {
      const fast = await boot(redis.url, 'express', 500);
      const clients = [fast.store.client, ...notifierClients(fast.notifier)];
      let took = 0;
      await outage(async () => {
        // Long enough for every client to be waiting between two reconnect attempts.
        await sleep(700);
        expect(clients.map((client) => client.status)).toEqual([
          'reconnecting',
          'reconnecting',
          'reconnecting',
        ]);
        const started = Date.now();
        await fast.close();
        took = Date.now() - started;
      });
      // Redis is back (and A and B are connected again): the closed instance's clients are not.
      await sleep(1_000);
      for (const client of clients) expect(['end', 'reconnecting']).toContain(client.status);
      expect(took).toBeLessThan(2_000);
    },
    45_000,
  );

  ownRedis('a create that times out while Redis is away leaves nothing behind', async () => {
    const fast = await bootFast();
    await outage(async () => {
      await expect(fast.service.create({ principal: 'erin' })).rejects.toThrow(
        'Task store unavailable',
      );
    });
    // Redis is back and every client has reconnected (and sent what it had queued).
    await sleep(200);
    const raw = new Redis(redis.url);
    try {
      const rows = await raw.zrange(`${PREFIX}rows`, 0, '-1');
      const missing: string[] = [];
      for (const taskId of rows) {
        if ((await raw.exists(fast.store.keyOf(taskId))) === 0) missing.push(taskId);
      }
      // Every row counted against maxRows is a task that exists.
      expect(missing).toEqual([]);
    } finally {
      raw.disconnect();
    }
  });

  it('a Fastify instance shares the same tasks', async () => {
    const c = await boot(redis.url, 'fastify');
    extra.push(c);
    const { gate, control } = newGate();
    const taskId = await callTool(a.url, 'dora', 'wait_for_signal', { gate });
    await waitFor(
      c.url,
      'dora',
      taskId,
      (task) => task.statusMessage === 'waiting for the signal',
      'progress on C',
    );
    expectNotFound(await rpc(c.url, 'tasks/get', { taskId }, { principal: 'bob' }));
    const stream = await listen(c.url, 'dora', [taskId]);
    expect((await stream.next()).params!.notifications).toEqual({ taskIds: [taskId] });
    control.release();
    let last: JsonRpcMessage;
    do last = await stream.next(5_000);
    while (last.params!.status !== 'completed');
    expect(last.params!.taskId).toBe(taskId);
    const asking = await callTool(c.url, 'dora', 'ask_name');
    await waitFor(a.url, 'dora', asking, (task) => task.status === 'input_required', 'asking on A');
    await rpc(
      a.url,
      'tasks/update',
      { taskId: asking, inputResponses: { name: { action: 'accept', content: { name: 'Fa' } } } },
      { principal: 'dora' },
    );
    await waitFor(c.url, 'dora', asking, (task) => task.status === 'completed', 'completed on C');
  });
});
