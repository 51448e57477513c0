import { Injectable, Module, type Type } from '@nestjs/common';
import type { FetchLike, SubscriptionFilter } from '@modelcontextprotocol/client';
import {
  DetailedTaskV2Schema,
  TaskStatusNotificationParamsV2Schema,
} from '@modelcontextprotocol/ext-tasks/core/v2';
import * as z from 'zod/v4';
import { ListenHandler } from '../../src/mcp/listen.handler.js';
import { ListenFeed } from '../../src/notify/listen-feed.js';
import {
  type TaskRecord,
  TaskTool,
  type TaskContext,
  TasksModule,
  type TasksModuleOptions,
} from '../../src/index.js';
import type { TasksModuleExtras } from '../../src/entries/options.js';
import { type InputRequest, type InputResponse, TaskStore } from '../../src/entries/store.js';
import { ADAPTERS, type RunningApp, startApp } from '../support/app.js';
import {
  connectOfficialClient,
  type OfficialClient,
  testContextFetch,
} from '../support/official-client.js';
import { eventually, type ListenOptions, openListen, rpc, type SseReader } from '../support/sse.js';
import { type JsonRpcMessage, SUBSCRIPTION_ID_KEY } from '../support/wire.js';

const sleep = (ms: number): Promise<void> => new Promise((done) => setTimeout(done, ms));

// ----- a tool the test drives step by step --------------------------------------------------------

type Step =
  | { progress: string }
  | { input: Record<string, InputRequest> }
  | { result: Record<string, unknown> }
  | { fail: { code: number; message: string } };

/** The steps a `scripted` call runs, pushed by the test one at a time. */
class Script {
  private readonly steps: Step[] = [];
  private wake: (() => void) | undefined;
  /** The answers `requireInput` resolved with. */
  readonly answers: Record<string, InputResponse>[] = [];

  push(step: Step): void {
    this.steps.push(step);
    this.wake?.();
  }

  async next(signal: AbortSignal): Promise<Step> {
    while (this.steps.length === 0) {
      await new Promise<void>((resolve, reject) => {
        const onAbort = (): void => reject(signal.reason);
        if (signal.aborted) return onAbort();
        signal.addEventListener('abort', onAbort, { once: true });
        this.wake = () => {
          signal.removeEventListener('abort', onAbort);
          this.wake = undefined;
          resolve();
        };
      });
    }
    return this.steps.shift()!;
  }
}

const scripts = new Map<string, Script>();
let scriptCount = 0;

/** A fresh script name and its Script. */
function newScript(): { name: string; script: Script } {
  const name = `script-${++scriptCount}`;
  const script = new Script();
  scripts.set(name, script);
  return { name, script };
}

@Injectable()
class ListenTools {
  @TaskTool({ name: 'scripted', input: z.object({ script: z.string() }), pollIntervalMs: 100 })
  async scripted(input: { script: string }, task: TaskContext) {
    const script = scripts.get(input.script);
    if (script === undefined) throw new Error(`no script ${input.script}`);
    for (;;) {
      const step = await script.next(task.signal);
      if ('progress' in step) await task.progress(step.progress);
      else if ('input' in step) script.answers.push(await task.requireInput(step.input));
      else if ('result' in step) return step.result;
      else throw Object.assign(new Error(step.fail.message), { code: step.fail.code });
    }
  }

  /** Finishes in 300 ms but tells clients to poll every 5 s. */
  @TaskTool({ name: 'quick', pollIntervalMs: 5_000 })
  async quick(_input: unknown, task: TaskContext) {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(resolve, 300);
      task.signal.addEventListener(
        'abort',
        () => {
          clearTimeout(timer);
          reject(task.signal.reason);
        },
        { once: true },
      );
    });
    return { content: [{ type: 'text', text: 'quick done' }] };
  }
}

/** `Authorization: Bearer <name>` makes `<name>` the principal. */
const principal = (request: unknown): string | undefined => {
  const header = (request as { headers: Record<string, string | undefined> }).headers.authorization;
  return header === undefined ? undefined : /^Bearer\s+(\S+)$/i.exec(header)?.[1];
};

/** A test module: the tasks module with the given options plus the tools above. */
function listenModule(
  options: TasksModuleOptions = {},
  extras: Pick<TasksModuleExtras, 'notifier'> = {},
): Type<unknown> {
  @Module({
    imports: [
      // Scripted calls are left running: closing the app hands them over at once.
      TasksModule.forRoot({
        principal,
        janitor: false,
        shutdown: { drainMs: 0 },
        ...options,
        ...extras,
      }),
    ],
    providers: [ListenTools],
  })
  class ListenTestModule {}
  return ListenTestModule;
}

// ----- helpers ------------------------------------------------------------------------------------

/** A well-formed elicitation for `requireInput`. */
const QUESTION: InputRequest = {
  method: 'elicitation/create',
  params: {
    mode: 'form',
    message: 'Your name?',
    requestedSchema: { type: 'object', properties: { name: { type: 'string' } } },
  },
};

type TaskView = Record<string, unknown> & { taskId: string; status: string };

/** Everything but `resultType` and `_meta`. */
function bare(value: Record<string, unknown>): Record<string, unknown> {
  const copy = { ...value };
  delete copy.resultType;
  delete copy._meta;
  return copy;
}

/** Checks one `notifications/tasks` frame of stream `subscriptionId`; returns its task. */
function checkTaskNotification(message: JsonRpcMessage, subscriptionId: string | number) {
  expect(message.jsonrpc).toBe('2.0');
  expect(message.method).toBe('notifications/tasks');
  expect(message).not.toHaveProperty('id');
  const parsed = TaskStatusNotificationParamsV2Schema.safeParse(message.params);
  if (!parsed.success) {
    throw new Error(`Not a TaskStatusNotificationParams: ${JSON.stringify(message.params)}`);
  }
  expect(DetailedTaskV2Schema.safeParse(bare(message.params!)).success).toBe(true);
  expect(message.params!._meta?.[SUBSCRIPTION_ID_KEY]).toBe(subscriptionId);
  return message.params as TaskView;
}

describe.each(ADAPTERS)('listen streams (%s)', (adapter) => {
  let running: RunningApp | undefined;
  const streams: SseReader[] = [];
  const clients: OfficialClient[] = [];

  const start = async (
    options: TasksModuleOptions = {},
    extras: Pick<TasksModuleExtras, 'notifier'> = {},
  ): Promise<RunningApp> => {
    running = await startApp(listenModule(options, extras), adapter);
    return running;
  };
  const url = (): string => running!.url;

  /** Opens a listen stream that must be accepted; the stream is closed after the test. */
  const listen = async (options: ListenOptions): Promise<SseReader> => {
    const response = await openListen(url(), options);
    if (response.stream === undefined) {
      throw new Error(`listen answered HTTP ${response.status}: ${response.text}`);
    }
    streams.push(response.stream);
    return response.stream;
  };

  /** Calls the scripted tool as `who`; returns the task id and the script. */
  const startScripted = async (who: string): Promise<{ taskId: string; script: Script }> => {
    const { name, script } = newScript();
    const { body } = await rpc(
      url(),
      'tools/call',
      { name: 'scripted', arguments: { script: name } },
      { principal: who },
    );
    expect(body.result?.resultType).toBe('task');
    return { taskId: body.result!.taskId as string, script };
  };

  const getTask = async (who: string, taskId: string): Promise<Record<string, unknown>> => {
    const { body } = await rpc(url(), 'tasks/get', { taskId }, { principal: who });
    if (body.result === undefined) throw new Error(`tasks/get: ${JSON.stringify(body)}`);
    return body.result;
  };

  /** Reads notifications until one satisfies `matches`; every one read is checked. */
  const nextTask = async (
    stream: SseReader,
    subscriptionId: string | number,
    matches: (task: TaskView) => boolean,
  ): Promise<TaskView> => {
    for (;;) {
      const task = checkTaskNotification(await stream.next(), subscriptionId);
      if (matches(task)) return task;
    }
  };

  /** The notification equals what `tasks/get` answers now (minus resultType and _meta). */
  const expectSameAsGet = async (who: string, task: TaskView): Promise<void> => {
    expect(bare(task)).toEqual(bare(await getTask(who, task.taskId)));
  };

  afterEach(async () => {
    for (const stream of streams.splice(0)) await stream.close();
    for (const client of clients.splice(0)) await client.close();
    await running?.close();
    running = undefined;
  });

  // ----- 1. acknowledgement ---------------------------------------------------------------------

  it('acknowledges first, with taskIds narrowed to the caller’s own; SSE headers', async () => {
    await start();
    const mine = await startScripted('alice');
    const mineToo = await startScripted('alice');
    const foreign = await startScripted('bob');

    const response = await openListen(url(), {
      principal: 'alice',
      taskIds: [mine.taskId, 'no-such-task', foreign.taskId, mineToo.taskId],
    });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(response.headers.get('x-accel-buffering')).toBe('no');
    const stream = response.stream!;
    streams.push(stream);

    const ack = await stream.next();
    expect(ack).toEqual({
      jsonrpc: '2.0',
      method: 'notifications/subscriptions/acknowledged',
      params: {
        notifications: { taskIds: [mine.taskId, mineToo.taskId] },
        _meta: { [SUBSCRIPTION_ID_KEY]: 'sub-1' },
      },
    });
    expect(stream.frames[0]!.event).toBe('message');
  });

  // ----- 2. foreign tasks -----------------------------------------------------------------------

  it('a foreign task id never appears in the ack nor in any notification', async () => {
    await start();
    const alice = await startScripted('alice');
    const bob = await startScripted('bob');

    const stream = await listen({ principal: 'bob', taskIds: [alice.taskId, bob.taskId] });
    const ack = await stream.next();
    expect(ack.params!.notifications).toEqual({ taskIds: [bob.taskId] });

    // Alice's task goes through every kind of change while bob listens.
    alice.script.push({ progress: 'alice 1' });
    await eventually(async () =>
      (await getTask('alice', alice.taskId)).statusMessage === 'alice 1' ? true : undefined,
    );
    alice.script.push({
      input: { q: QUESTION },
    });
    await eventually(async () =>
      (await getTask('alice', alice.taskId)).status === 'input_required' ? true : undefined,
    );
    await rpc(
      url(),
      'tasks/update',
      { taskId: alice.taskId, inputResponses: { q: { action: 'accept', content: { n: 'A' } } } },
      { principal: 'alice' },
    );
    alice.script.push({ result: { content: [{ type: 'text', text: 'alice done' }] } });
    await eventually(async () =>
      (await getTask('alice', alice.taskId)).status === 'completed' ? true : undefined,
    );

    // Then bob's own task changes: it is what bob receives, and only that.
    bob.script.push({ progress: 'bob 1' });
    bob.script.push({ result: { content: [{ type: 'text', text: 'bob done' }] } });
    await nextTask(stream, 'sub-1', (task) => task.status === 'completed');
    await sleep(100);

    const notifications = stream.messages.slice(1);
    expect(notifications.length).toBeGreaterThan(0);
    for (const message of notifications) {
      expect(checkTaskNotification(message, 'sub-1').taskId).toBe(bob.taskId);
    }
    for (const frame of stream.frames) expect(frame.raw).not.toContain(alice.taskId);
  });

  // ----- 3. every status, full DetailedTask -----------------------------------------------------

  it('every notification carries the subscription id and the full DetailedTask = tasks/get', async () => {
    await start();
    const main = await startScripted('alice');
    const failing = await startScripted('alice');
    const cancelled = await startScripted('alice');
    const stream = await listen({
      principal: 'alice',
      taskIds: [main.taskId, failing.taskId, cancelled.taskId],
    });
    expect((await stream.next()).method).toBe('notifications/subscriptions/acknowledged');

    // working, with a progress message
    main.script.push({ progress: 'step 1 of 2' });
    const working = await nextTask(stream, 'sub-1', (task) => task.statusMessage === 'step 1 of 2');
    expect(working).toMatchObject({ taskId: main.taskId, status: 'working' });
    expect(working.pollIntervalMs).toBe(100);
    await expectSameAsGet('alice', working);

    // input_required, with the input requests
    main.script.push({ input: { name: QUESTION } });
    const asking = await nextTask(stream, 'sub-1', (task) => task.status === 'input_required');
    expect(asking).toMatchObject({ taskId: main.taskId, inputRequests: { name: QUESTION } });
    await expectSameAsGet('alice', asking);

    // answered: back to working
    const update = await rpc(
      url(),
      'tasks/update',
      {
        taskId: main.taskId,
        inputResponses: { name: { action: 'accept', content: { name: 'Ada' } } },
      },
      { principal: 'alice' },
    );
    expect(update.body.result?.resultType).toBe('complete');
    const resumed = await nextTask(stream, 'sub-1', (task) => task.status === 'working');
    expect(resumed).not.toHaveProperty('inputRequests');
    main.script.push({ progress: 'step 2 of 2' });
    await expectSameAsGet(
      'alice',
      await nextTask(stream, 'sub-1', (task) => task.statusMessage === 'step 2 of 2'),
    );
    expect(main.script.answers).toEqual([{ name: { action: 'accept', content: { name: 'Ada' } } }]);

    // completed, with the result (resultType "complete" included)
    main.script.push({
      result: { content: [{ type: 'text', text: 'Hello Ada' }], structuredContent: { n: 1 } },
    });
    const completed = await nextTask(stream, 'sub-1', (task) => task.status === 'completed');
    expect(completed.result).toEqual({
      content: [{ type: 'text', text: 'Hello Ada' }],
      structuredContent: { n: 1 },
      resultType: 'complete',
    });
    await expectSameAsGet('alice', completed);

    // failed, with the JSON-RPC error
    failing.script.push({ fail: { code: -32042, message: 'Nope' } });
    const failed = await nextTask(stream, 'sub-1', (task) => task.taskId === failing.taskId);
    expect(failed).toMatchObject({ status: 'failed', error: { code: -32042, message: 'Nope' } });
    await expectSameAsGet('alice', failed);

    // cancelled
    const cancel = await rpc(
      url(),
      'tasks/cancel',
      { taskId: cancelled.taskId },
      { principal: 'alice' },
    );
    expect(cancel.body.result?.resultType).toBe('complete');
    const gone = await nextTask(stream, 'sub-1', (task) => task.taskId === cancelled.taskId);
    expect(gone.status).toBe('cancelled');
    await expectSameAsGet('alice', gone);

    // Every message after the ack was a valid notifications/tasks for this subscription.
    await sleep(50);
    for (const message of stream.messages.slice(1)) checkTaskNotification(message, 'sub-1');
    expect(stream.done).toBe(false);
  });

  // ----- 4. the extension must be declared --------------------------------------------------------

  it('taskIds without declaring the extension: -32021, HTTP 400, no stream', async () => {
    await start();
    const { taskId } = await startScripted('alice');
    const response = await openListen(url(), {
      principal: 'alice',
      taskIds: [taskId],
      declareTasks: false,
    });
    expect(response.stream).toBeUndefined();
    expect(response.status).toBe(400);
    expect(response.headers.get('content-type')).toMatch(/^application\/json/);
    expect(response.json).toMatchObject({
      jsonrpc: '2.0',
      id: 'sub-1',
      error: {
        code: -32021,
        data: { requiredCapabilities: { extensions: { 'io.modelcontextprotocol/tasks': {} } } },
      },
    });
  });

  // ----- 5. limits and malformed filters --------------------------------------------------------

  it('listen.maxStreams: the stream beyond the limit gets -32603 and no stream; a slot frees on close', async () => {
    const app = await start({ listen: { maxStreams: 2 } });
    const { taskId } = await startScripted('alice');
    const first = await listen({ principal: 'alice', taskIds: [taskId], id: 'sub-1' });
    const second = await listen({ principal: 'alice', taskIds: [taskId], id: 'sub-2' });
    await first.next();
    await second.next();

    const third = await openListen(url(), { principal: 'alice', taskIds: [taskId], id: 'sub-3' });
    expect(third.stream).toBeUndefined();
    expect(third.headers.get('content-type')).toMatch(/^application\/json/);
    expect(third.json).toEqual({
      jsonrpc: '2.0',
      id: 'sub-3',
      error: {
        code: -32603,
        message: 'Subscription limit reached (listen.maxStreams 2)',
        data: { limit: 'listen.maxStreams', max: 2 },
      },
    });

    await first.close();
    const handler = app.app.get(ListenHandler);
    await eventually(() => (handler.size === 1 ? true : undefined), 2_000, 'a closed stream');
    const fourth = await listen({ principal: 'alice', taskIds: [taskId], id: 'sub-4' });
    const ack = await fourth.next();
    expect(ack.method).toBe('notifications/subscriptions/acknowledged');
    expect(ack.params!._meta).toEqual({ [SUBSCRIPTION_ID_KEY]: 'sub-4' });
  });

  it('listen.maxTaskIds: more ids than allowed is -32602', async () => {
    await start({ listen: { maxTaskIds: 3 } });
    const ids = [];
    for (let i = 0; i < 4; i++) ids.push((await startScripted('alice')).taskId);

    const tooMany = await openListen(url(), { principal: 'alice', taskIds: ids });
    expect(tooMany.stream).toBeUndefined();
    expect(tooMany.json).toMatchObject({ id: 'sub-1', error: { code: -32602 } });

    const three = await listen({ principal: 'alice', taskIds: ids.slice(0, 3) });
    expect((await three.next()).params!.notifications).toEqual({ taskIds: ids.slice(0, 3) });
  });

  it.each([
    ['taskIds is a string', { notifications: { taskIds: 'task-1' } }],
    ['taskIds holds numbers', { notifications: { taskIds: [1, 2] } }],
    ['taskIds holds null', { notifications: { taskIds: ['a', null] } }],
    ['notifications is an array', { notifications: [] }],
    ['notifications is null', { notifications: null }],
    ['notifications is missing', { omitNotifications: true }],
  ] as [string, ListenOptions][])(
    'a malformed filter (%s) is -32602, no stream',
    async (_, options) => {
      await start();
      const response = await openListen(url(), { principal: 'alice', ...options });
      expect(response.stream).toBeUndefined();
      expect(response.headers.get('content-type')).toMatch(/^application\/json/);
      expect(response.json).toMatchObject({ jsonrpc: '2.0', id: 'sub-1', error: { code: -32602 } });
    },
  );

  // ----- 6. client close leaves nothing behind ----------------------------------------------------

  it('a stream closed by the client leaves no listener behind', async () => {
    const app = await start();
    const one = await startScripted('alice');
    const two = await startScripted('alice');
    const handler = app.app.get(ListenHandler);
    const feed = app.app.get(ListenFeed);

    const a = await listen({ principal: 'alice', taskIds: [one.taskId, two.taskId] });
    const b = await listen({ principal: 'alice', taskIds: [one.taskId], id: 'sub-2' });
    await a.next();
    await b.next();
    expect(handler.size).toBe(2);
    expect(handler.watchedTasks).toBe(2);
    expect(feed.watchedTasks).toBe(2);

    await a.close();
    await eventually(() => (handler.size === 1 ? true : undefined), 2_000, 'stream a dropped');
    expect(handler.watchedTasks).toBe(1);
    expect(feed.watchedTasks).toBe(1);

    await b.close();
    await eventually(
      () => (handler.size === 0 && handler.watchedTasks === 0 ? true : undefined),
      2_000,
      'stream b dropped',
    );
    expect(feed.watchedTasks).toBe(0);

    // Changes after the close go nowhere and break nothing.
    one.script.push({ result: { content: [] } });
    await eventually(async () =>
      (await getTask('alice', one.taskId)).status === 'completed' ? true : undefined,
    );
    expect(feed.watchedTasks).toBe(0);
  });

  // ----- 7. shutdown ----------------------------------------------------------------------------

  it('shutdown ends every open stream with the listen result, promptly', async () => {
    // The scripted call never ends: the streams end once a short drain is over.
    const app = await start({ shutdown: { drainMs: 300 } });
    const { taskId } = await startScripted('alice');
    const first = await listen({ principal: 'alice', taskIds: [taskId], id: 'sub-1' });
    const second = await listen({ principal: 'alice', taskIds: [taskId], id: 'sub-2' });
    await first.next();
    await second.next();

    const began = Date.now();
    await app.close();
    running = undefined;
    const took = Date.now() - began;
    expect(took).toBeLessThan(2_000);

    for (const [stream, id] of [
      [first, 'sub-1'],
      [second, 'sub-2'],
    ] as const) {
      await stream.waitForEnd(2_000);
      expect(stream.error).toBeUndefined();
      const last = stream.messages.at(-1)!;
      expect(last).toMatchObject({
        jsonrpc: '2.0',
        id,
        result: { resultType: 'complete', _meta: { [SUBSCRIPTION_ID_KEY]: id } },
      });
      expect(last).not.toHaveProperty('error');
      expect(last).not.toHaveProperty('method');
    }
  });

  // ----- 8. keepalive ---------------------------------------------------------------------------

  it('listen.keepAliveMs: comment frames keep the stream alive', async () => {
    await start({ listen: { keepAliveMs: 50 } });
    const { taskId } = await startScripted('alice');
    const stream = await listen({ principal: 'alice', taskIds: [taskId] });
    await stream.next();
    const frame = await stream.waitForFrame((f) => f.comments.includes('keepalive'), 1_000);
    expect(frame.raw).toBe(': keepalive');
    expect(frame.message).toBeUndefined();
  });

  // ----- 9. notifications turned off ------------------------------------------------------------

  it('notifier: null → the stream is acknowledged but hears no changes', async () => {
    await start({}, { notifier: null });
    const { taskId, script } = await startScripted('alice');
    const stream = await listen({ principal: 'alice', taskIds: [taskId] });
    const ack = await stream.next();
    expect(ack.params!.notifications).toEqual({ taskIds: [taskId] });

    script.push({ progress: 'half way' });
    script.push({ result: { content: [{ type: 'text', text: 'done' }] } });
    await eventually(async () =>
      (await getTask('alice', taskId)).status === 'completed' ? true : undefined,
    );
    await sleep(200);
    expect(stream.messages).toHaveLength(1);
    expect(stream.done).toBe(false);
  });

  // ----- 10. ownership checked again at delivery ------------------------------------------------

  it('a record of another owner on the feed is not delivered (owner check at delivery)', async () => {
    const app = await start();
    const { taskId, script } = await startScripted('alice');
    const stream = await listen({ principal: 'alice', taskIds: [taskId] });
    await stream.next();

    const store = app.app.get(TaskStore);
    const real = (await store.get(taskId, { principal: 'alice', tenant: null }))!;
    expect(real).not.toBeNull();
    const forged: TaskRecord = {
      ...real,
      owner: { principal: 'mallory', tenant: null },
      status: 'completed',
      statusMessage: 'forged',
      result: { content: [{ type: 'text', text: 'forged' }], resultType: 'complete' },
      version: real.version + 100,
    } as TaskRecord;
    app.app.get(ListenFeed).publish(forged);
    app.app.get(ListenFeed).publish({
      ...forged,
      owner: { principal: 'alice', tenant: 'other-tenant' },
    });
    await sleep(150);
    expect(stream.messages).toHaveLength(1);

    // The stream is alive, and the forged version did not shadow the real next change.
    script.push({ progress: 'real change' });
    const task = await nextTask(stream, 'sub-1', () => true);
    expect(task).toMatchObject({ taskId, status: 'working', statusMessage: 'real change' });
    for (const frame of stream.frames) expect(frame.raw).not.toContain('forged');
  });

  // ----- the official client --------------------------------------------------------------------

  describe('the official client', () => {
    /** Counts requests by `Mcp-Method` on both of the client's HTTP paths. */
    const countingFetch = (counts: Map<string, number>): FetchLike => {
      return (input, init) => {
        let method = new Headers(init?.headers).get('mcp-method');
        if (method === null) {
          // The SDK sends notifications (e.g. notifications/cancelled) without Mcp-Method.
          const body = typeof init?.body === 'string' ? init.body : '';
          method = /"method":"([^"]+)"/.exec(body)?.[1] ?? `${init?.method ?? 'GET'} (no method)`;
        }
        counts.set(method, (counts.get(method) ?? 0) + 1);
        return testContextFetch(input, init);
      };
    };

    it('client.listen({taskIds}) resolves on the acknowledgement and closes cleanly', async () => {
      const app = await start();
      const { taskId } = await startScripted('alice');
      const connected = await connectOfficialClient(url(), { principal: 'alice' });
      clients.push(connected);

      const subscription = await connected.client.listen({
        taskIds: [taskId],
      } as SubscriptionFilter);
      const handler = app.app.get(ListenHandler);
      expect(handler.size).toBe(1);
      expect(handler.watchedTasks).toBe(1);
      // The SDK's SubscriptionFilter schema knows only the core filters: it strips `taskIds` from
      // the honoured filter it reports (the raw-HTTP tests check what the server acknowledges).
      const honored = subscription.honoredFilter as { taskIds?: string[] };
      if (honored.taskIds !== undefined) expect(honored.taskIds).toEqual([taskId]);

      await subscription.close();
      expect(await subscription.closed).toBe('local');
      await eventually(
        () => (handler.size === 0 && handler.watchedTasks === 0 ? true : undefined),
        2_000,
        'the subscription to be dropped on the server',
      );
    });

    it('a task polled every 5 s settles from the pushed notification, without further polls', async () => {
      await start();
      const counts = new Map<string, number>();
      const connected = await connectOfficialClient(url(), {
        principal: 'alice',
        fetch: countingFetch(counts),
      });
      clients.push(connected);
      const { client, session } = connected;

      const began = Date.now();
      const execution = await session.callTool('quick', {});
      expect(execution.kind).toBe('task');
      if (execution.kind !== 'task') return;
      // The host opens the listen stream; the session hears its notifications/tasks through the
      // SDK client's fallback notification handler.
      const subscription = await client.listen({
        taskIds: [execution.handle.taskId],
      } as SubscriptionFilter);
      const { outcome } = await execution.settle();
      const took = Date.now() - began;
      await subscription.close();

      expect(outcome.status).toBe('completed');
      if (outcome.status === 'completed') {
        expect(outcome.result).toMatchObject({ content: [{ type: 'text', text: 'quick done' }] });
      }
      expect(took).toBeLessThan(2_500);
      expect(counts.get('tools/call')).toBe(1);
      expect(counts.get('subscriptions/listen')).toBe(1);
      expect(counts.get('tasks/get') ?? 0).toBeLessThanOrEqual(1);
      console.log(
        `[${adapter}] pollIntervalMs 5000 task settled in ${took} ms; requests: ${JSON.stringify(Object.fromEntries(counts))}`,
      );
    });
  });
});
