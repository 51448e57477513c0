/**
 * The caps on long-lived requests, over real HTTP on both adapters: listen streams
 * (`listen.maxStreams` per process, `listen.maxStreamsPerPrincipal` per owner) and 2025-11-25
 * `tasks/result` waits (`resultWaits.max`, `resultWaits.maxPerPrincipal`). On the in-memory store
 * and on a real Redis, whose latency sits between a request's arrival and its stream: a burst of
 * concurrent requests never holds more than a cap, and every slot comes back however its request
 * ends. And listen with Redis stopped answers as every other method does.
 */
import { Module, type Type } from '@nestjs/common';
import { Redis } from 'ioredis';
import { TasksModule, type TasksModuleOptions, TasksService } from '../../src/index.js';
import { TaskStore, type TaskOwner } from '../../src/entries/store.js';
import { LegacyTasksHandler } from '../../src/mcp/legacy-tasks.handler.js';
import { ListenHandler } from '../../src/mcp/listen.handler.js';
import { RedisTaskStore } from '../../src/redis/index.js';
import { startTestRedis, type TestRedis } from '../support/redis-server.js';
import { ADAPTERS, type AdapterName, type RunningApp, startApp } from '../support/app.js';
import { leak } from '../support/raw.js';
import { eventually, type ListenResponse, openListen, type SseReader } from '../support/sse.js';
import {
  declaredCapabilities,
  envelope,
  type JsonRpcMessage,
  legacyHeaders,
  parseMessage,
  standardHeaders,
} from '../support/wire.js';

/** `Authorization: Bearer <name>` makes `<name>` the principal; none is anonymous. */
const principal = (request: unknown): string | undefined => {
  const header = (request as { headers: Record<string, string | undefined> }).headers.authorization;
  return header === undefined ? undefined : /^Bearer\s+(\S+)$/i.exec(header)?.[1];
};

/** The tasks module alone (tasks are made through TasksService: no tool runs them). */
function limitsModule(options: TasksModuleOptions, store?: TaskStore): Type<unknown> {
  @Module({
    imports: [
      TasksModule.forRoot({
        principal,
        janitor: false,
        ...options,
        ...(store !== undefined && { store }),
      }),
    ],
  })
  class LimitsTestModule {}
  return LimitsTestModule;
}

/** The refusal of a capped request: -32603 in band, naming the option and its value. */
const refusal = (what: string, limit: string, max: number) => ({
  code: -32603,
  message: `${what} (${limit} ${max})`,
  data: { limit, max },
});
const streamRefusal = (limit: string, max: number) =>
  refusal('Subscription limit reached', limit, max);
const waitRefusal = (limit: string, max: number) =>
  refusal('Result wait limit reached', limit, max);

/** A 2025-11-25 `tasks/result` answered as plain JSON (it waits until the task ends). */
async function taskResult(
  url: string,
  who: string,
  taskId: string,
  signal?: AbortSignal,
): Promise<{ status: number; body: JsonRpcMessage }> {
  const response = await fetch(url, {
    method: 'POST',
    headers: legacyHeaders(who, 'application/json'),
    body: JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tasks/result', params: { taskId } }),
    signal,
  });
  const text = await response.text();
  const body = parseMessage(text);
  if (body === undefined) throw new Error(`tasks/result answered HTTP ${response.status}: ${text}`);
  return { status: response.status, body };
}

const DONE = { content: [{ type: 'text' as const, text: 'done' }] };

/** What the apps of one test opened, closed after it. */
function harness(adapter: AdapterName) {
  const streams: SseReader[] = [];
  const apps: RunningApp[] = [];
  return {
    streams,
    async start(options: TasksModuleOptions, store?: TaskStore) {
      const running = await startApp(limitsModule(options, store), adapter);
      apps.push(running);
      return {
        running,
        url: running.url,
        service: running.app.get(TasksService),
        listen: running.app.get(ListenHandler),
        legacy: running.app.get(LegacyTasksHandler),
      };
    },
    /** Opens a listen that must be accepted (its acknowledgement read); closed after the test. */
    async accepted(url: string, who: string | undefined, taskIds: string[], id = 'sub-1') {
      const response = await openListen(url, { principal: who, taskIds, id });
      if (response.stream === undefined) {
        throw new Error(`listen answered HTTP ${response.status}: ${response.text}`);
      }
      streams.push(response.stream);
      const ack = await response.stream.next();
      expect(ack.method).toBe('notifications/subscriptions/acknowledged');
      expect(ack.params!.notifications).toEqual({ taskIds });
      return response.stream;
    },
    /** Shuts an app down while its clients are still there. */
    async shutdown(running: RunningApp) {
      apps.splice(apps.indexOf(running), 1);
      await running.close();
    },
    async close() {
      for (const stream of streams.splice(0)) await stream.close();
      for (const running of apps.splice(0)) await running.close();
    },
  };
}

/** A listen that must be refused: HTTP 200, JSON, the error, no stream. */
function expectRefused(response: ListenResponse, error: unknown): void {
  expect(response.stream).toBeUndefined();
  expect(response.status).toBe(200);
  expect(response.headers.get('content-type')).toMatch(/^application\/json/);
  expect(response.json).toMatchObject({ jsonrpc: '2.0', error });
  expect(response.json!.error).toEqual(error);
}

const alice: TaskOwner = { principal: 'alice' };
const bob: TaskOwner = { principal: 'bob' };
const carol: TaskOwner = { principal: 'carol' };
const anonymous: TaskOwner = { principal: null };

describe.each(ADAPTERS)('caps on listen streams and result waits (in memory, %s)', (adapter) => {
  const h = harness(adapter);
  afterEach(() => h.close());

  it('listen.maxStreamsPerPrincipal: alice’s stream beyond it is refused while bob, and then alice again, open', async () => {
    const app = await h.start({ listen: { maxStreams: 10, maxStreamsPerPrincipal: 2 } });
    const mine = (await app.service.create(alice)).taskId;
    const bobs = (await app.service.create(bob)).taskId;
    const first = await h.accepted(app.url, 'alice', [mine], 'a-1');
    await h.accepted(app.url, 'alice', [mine], 'a-2');

    const third = await openListen(app.url, { principal: 'alice', taskIds: [mine], id: 'a-3' });
    expectRefused(third, streamRefusal('listen.maxStreamsPerPrincipal', 2));
    expect(third.json!.id).toBe('a-3');
    // Another principal's streams are its own.
    await h.accepted(app.url, 'bob', [bobs], 'b-1');
    await h.accepted(app.url, 'bob', [bobs], 'b-2');
    expect(app.listen.size).toBe(4);
    expect(app.listen.slotsHeld).toBe(4);

    // A stream closed by its client gives its slot back.
    await first.close();
    await eventually(() => (app.listen.slotsHeld === 3 ? true : undefined), 2_000, 'a free slot');
    await h.accepted(app.url, 'alice', [mine], 'a-4');
    expect(app.listen.size).toBe(4);
  });

  it('all anonymous callers are one principal: they share listen.maxStreamsPerPrincipal', async () => {
    const app = await h.start({ listen: { maxStreamsPerPrincipal: 2 } });
    const first = (await app.service.create(anonymous)).taskId;
    const second = (await app.service.create(anonymous)).taskId;
    await h.accepted(app.url, undefined, [first], 'anon-1');
    await h.accepted(app.url, undefined, [second], 'anon-2');
    const third = await openListen(app.url, { taskIds: [first], id: 'anon-3' });
    expectRefused(third, streamRefusal('listen.maxStreamsPerPrincipal', 2));
    // A named principal is not among them.
    await h.accepted(app.url, 'alice', [(await app.service.create(alice)).taskId]);
  });

  it('listen.maxStreams holds over every principal; a listen with nothing to watch or refused keeps no slot; shutdown frees all', async () => {
    const app = await h.start({ listen: { maxStreams: 3, maxStreamsPerPrincipal: 2 } });
    const ids = new Map<string, string>();
    for (const owner of [alice, bob, carol]) {
      ids.set(owner.principal!, (await app.service.create(owner)).taskId);
    }
    await h.accepted(app.url, 'alice', [ids.get('alice')!], 'a-1');
    await h.accepted(app.url, 'alice', [ids.get('alice')!], 'a-2');
    await h.accepted(app.url, 'bob', [ids.get('bob')!], 'b-1');

    // Carol has none of her own, yet the process has none left.
    const carols = await openListen(app.url, { principal: 'carol', taskIds: [ids.get('carol')!] });
    expectRefused(carols, streamRefusal('listen.maxStreams', 3));
    // Alice is at both caps: her own is named.
    const alices = await openListen(app.url, { principal: 'alice', taskIds: [ids.get('alice')!] });
    expectRefused(alices, streamRefusal('listen.maxStreamsPerPrincipal', 2));
    expect(app.listen.slotsHeld).toBe(3);

    // Bob's stream goes; a listen that watches nothing (only foreign ids) ends at once and
    // gives its slot back; so does a malformed one, refused before it takes any.
    await h.streams.pop()!.close();
    await eventually(() => (app.listen.slotsHeld === 2 ? true : undefined), 2_000, 'a free slot');
    const foreign = await openListen(app.url, {
      principal: 'carol',
      taskIds: [ids.get('alice')!],
      id: 'c-foreign',
    });
    expect((await foreign.stream!.next()).params!.notifications).toEqual({ taskIds: [] });
    await foreign.stream!.waitForEnd();
    expect(app.listen.slotsHeld).toBe(2);
    const malformed = await openListen(app.url, { principal: 'carol', taskIds: 'nope' });
    expect(malformed.json!.error!.code).toBe(-32602);
    expect(app.listen.slotsHeld).toBe(2);
    await h.accepted(app.url, 'carol', [ids.get('carol')!], 'c-1');
    expect(app.listen.slotsHeld).toBe(3);

    // Shutdown ends every stream and gives every slot back.
    await h.shutdown(app.running);
    expect(app.listen.size).toBe(0);
    expect(app.listen.slotsHeld).toBe(0);
  });

  it('resultWaits: per principal and per process; a finished task is answered without a slot; a wait gives its slot back when answered or abandoned', async () => {
    const app = await h.start({ resultWaits: { max: 4, maxPerPrincipal: 2 } });
    const created = async (owner: TaskOwner) => (await app.service.create(owner)).taskId;
    const alices = await created(alice);
    const bobs = await created(bob);
    const carols = await created(carol);
    const held = (count: number) =>
      eventually(
        () => (app.legacy.slotsHeld === count ? true : undefined),
        2_000,
        `${count} waits`,
      );

    const aliceWaits = [taskResult(app.url, 'alice', alices), taskResult(app.url, 'alice', alices)];
    await held(2);
    const third = await taskResult(app.url, 'alice', alices);
    expect(third.status).toBe(200);
    expect(third.body).toEqual({
      jsonrpc: '2.0',
      id: 7,
      error: waitRefusal('resultWaits.maxPerPrincipal', 2),
    });

    // Bob waits on his own slots; then the process is full, for carol too.
    const abandon = new AbortController();
    const bobWaits = [
      taskResult(app.url, 'bob', bobs),
      taskResult(app.url, 'bob', bobs, abandon.signal).catch((error: unknown) => error),
    ];
    await held(4);
    const carolsWait = await taskResult(app.url, 'carol', carols);
    expect(carolsWait.body.error).toEqual(waitRefusal('resultWaits.max', 4));

    // A finished task's result needs no wait: answered at once at the cap.
    const finished = await created(carol);
    await app.service.complete(finished, DONE);
    const answered = await taskResult(app.url, 'carol', finished);
    expect(answered.body.result?.content).toEqual(DONE.content);

    // Alice's task ends: her waits are answered and their slots come back.
    await app.service.complete(alices, DONE);
    for (const wait of aliceWaits) expect((await wait).body.result?.content).toEqual(DONE.content);
    await held(2);
    // Bob abandons one wait (the client goes): its slot comes back too.
    abandon.abort();
    expect(await bobWaits[1]).toMatchObject({ name: 'AbortError' });
    await held(1);
    expect(app.legacy.size).toBe(1);

    // Carol now waits, and is answered.
    const carolWaits = taskResult(app.url, 'carol', carols);
    await held(2);
    await app.service.complete(carols, DONE);
    expect((await carolWaits).body.result?.content).toEqual(DONE.content);
    await app.service.complete(bobs, DONE);
    expect(((await bobWaits[0]) as { body: JsonRpcMessage }).body.result?.content).toEqual(
      DONE.content,
    );
    await held(0);
    expect(app.legacy.size).toBe(0);
  });
});

// ----- on a real Redis ---------------------------------------------------------------------------

/** Each run of this file gets its own keys, also on a shared REDIS_URL. */
const PREFIX = `e2e-limits-${process.pid}-${Date.now()}:`;

describe.each(ADAPTERS)('caps on listen streams and result waits (Redis, %s)', (adapter) => {
  let redis: TestRedis;
  const h = harness(adapter);
  /** A store on the test's Redis; its calls give up after `timeoutMs` (500 ms unless told). */
  const store = (timeoutMs = 500) =>
    new RedisTaskStore({ connection: redis.url, prefix: PREFIX, timeoutMs });

  beforeAll(async () => {
    redis = await startTestRedis();
  });
  afterEach(() => h.close());
  afterAll(async () => {
    await redis?.stop();
  });

  /** One task for each of `count` principals p0, p1…; their ids in that order. */
  const tasksOf = async (service: TasksService, count: number): Promise<string[]> => {
    const ids: string[] = [];
    for (let i = 0; i < count; i++) ids.push((await service.create({ principal: `p${i}` })).taskId);
    return ids;
  };

  it('listen.maxStreams holds under a burst: 300 concurrent listens, 100 open, 200 refused; all come back, then 100 open again', async () => {
    const app = await h.start({ listen: { maxStreams: 100 } }, store());
    const ids = await tasksOf(app.service, 30);
    const burst = () =>
      Promise.all(
        Array.from({ length: 300 }, (_, i) =>
          openListen(app.url, { principal: `p${i % 30}`, taskIds: [ids[i % 30]!], id: i }),
        ),
      );

    const answers = await burst();
    const open = answers.filter((answer) => answer.stream !== undefined);
    const refused = answers.filter((answer) => answer.stream === undefined);
    h.streams.push(...open.map((answer) => answer.stream!));
    expect(open).toHaveLength(100);
    for (const answer of refused) expectRefused(answer, streamRefusal('listen.maxStreams', 100));
    for (const answer of open) {
      expect((await answer.stream!.next()).method).toBe('notifications/subscriptions/acknowledged');
    }
    expect(app.listen.size).toBe(100);
    expect(app.listen.slotsHeld).toBe(100);

    for (const stream of h.streams.splice(0)) await stream.close();
    await eventually(() => (app.listen.slotsHeld === 0 ? true : undefined), 5_000, 'every slot');
    expect(app.listen.size).toBe(0);
    expect(app.listen.watchedTasks).toBe(0);

    const again = await Promise.all(
      Array.from({ length: 100 }, (_, i) =>
        openListen(app.url, { principal: `p${i % 30}`, taskIds: [ids[i % 30]!], id: i }),
      ),
    );
    h.streams.push(...again.flatMap((answer) => (answer.stream ? [answer.stream] : [])));
    expect(again.filter((answer) => answer.stream !== undefined)).toHaveLength(100);
  });

  it('listen.maxStreamsPerPrincipal holds under a burst: 100 concurrent listens of one principal, 32 open', async () => {
    const app = await h.start({}, store());
    const [mine] = await tasksOf(app.service, 1);
    const answers = await Promise.all(
      Array.from({ length: 100 }, (_, i) =>
        openListen(app.url, { principal: 'p0', taskIds: [mine!], id: i }),
      ),
    );
    const open = answers.filter((answer) => answer.stream !== undefined);
    h.streams.push(...open.map((answer) => answer.stream!));
    expect(open).toHaveLength(32);
    for (const answer of answers.filter((one) => one.stream === undefined)) {
      expectRefused(answer, streamRefusal('listen.maxStreamsPerPrincipal', 32));
    }
    // Another principal still opens.
    const [theirs] = (await tasksOf(app.service, 2)).slice(1);
    await h.accepted(app.url, 'p1', [theirs!]);
  });

  it('resultWaits.max holds under a burst: 300 concurrent waits, 100 wait, 200 refused; all answered at the end', async () => {
    const app = await h.start({ resultWaits: { max: 100 } }, store());
    const ids = await tasksOf(app.service, 30);
    const waits = Array.from({ length: 300 }, (_, i) =>
      taskResult(app.url, `p${i % 30}`, ids[i % 30]!),
    );
    const refused: JsonRpcMessage[] = [];
    for (const wait of waits) {
      void wait.then(({ body }) => {
        if (body.error !== undefined) refused.push(body);
      });
    }
    await eventually(() => (refused.length === 200 ? true : undefined), 10_000, '200 refusals');
    expect(app.legacy.slotsHeld).toBe(100);
    expect(app.legacy.size).toBe(100);
    for (const body of refused) expect(body.error).toEqual(waitRefusal('resultWaits.max', 100));

    for (const taskId of ids) await app.service.complete(taskId, DONE);
    const answers = await Promise.all(waits);
    expect(answers.filter(({ body }) => body.result !== undefined)).toHaveLength(100);
    await eventually(() => (app.legacy.slotsHeld === 0 ? true : undefined), 5_000, 'every slot');
    expect(app.legacy.size).toBe(0);
  });

  const ownRedis = process.env.REDIS_URL ? it.skip : it;

  ownRedis(
    'a listen whose client goes while the owner check waits on Redis gives its slot back',
    async () => {
      // Calls wait up to 5 s, longer than the pause below: the check ends with an answer.
      const app = await h.start({}, store(5_000));
      const [mine] = await tasksOf(app.service, 1);
      const admin = new Redis(redis.url);
      try {
        // Redis answers no one for 1 s: the owner check waits that long.
        await admin.call('CLIENT', 'PAUSE', '1000', 'ALL');
        const gone = new AbortController();
        const request = fetch(app.url, {
          method: 'POST',
          headers: standardHeaders('subscriptions/listen'),
          body: JSON.stringify({
            jsonrpc: '2.0',
            id: 'sub-gone',
            method: 'subscriptions/listen',
            params: {
              notifications: { taskIds: [mine] },
              _meta: envelope(declaredCapabilities(true), 'limits-e2e'),
            },
          }),
          signal: gone.signal,
        }).catch((error: unknown) => error);
        // The request passed the cap (its slot is taken) and waits on Redis.
        await eventually(() => (app.listen.slotsHeld === 1 ? true : undefined), 900, 'the slot');
        gone.abort();
        expect(await request).toMatchObject({ name: 'AbortError' });
        await eventually(
          () => (app.listen.slotsHeld === 0 ? true : undefined),
          5_000,
          'the slot back',
        );
        expect(app.listen.size).toBe(0);
        expect(app.listen.watchedTasks).toBe(0);
      } finally {
        admin.disconnect();
      }
      // And the principal opens streams as before.
      await h.accepted(app.url, 'p0', [mine!]);
    },
  );

  ownRedis(
    'with Redis stopped, listen with taskIds answers HTTP 200 -32603 "Task store unavailable" and keeps no slot; with Redis back it streams',
    async () => {
      const app = await h.start({}, store());
      const [mine] = await tasksOf(app.service, 1);
      await redis.kill();
      try {
        const answer = await openListen(app.url, { principal: 'p0', taskIds: [mine], id: 'down' });
        expect(answer.stream).toBeUndefined();
        expect(answer.status).toBe(200);
        expect(answer.headers.get('content-type')).toMatch(/^application\/json/);
        expect(answer.json).toEqual({
          jsonrpc: '2.0',
          id: 'down',
          error: { code: -32603, message: 'Task store unavailable' },
        });
        expect(leak(answer.text!)).toBeUndefined();
        expect(app.listen.slotsHeld).toBe(0);
        // A listen that needs no store still streams.
        const storeless = await openListen(app.url, {
          principal: 'p0',
          notifications: { toolsListChanged: true },
        });
        h.streams.push(storeless.stream!);
        expect((await storeless.stream!.next()).params!.notifications).toEqual({
          toolsListChanged: true,
        });
        expect(app.listen.slotsHeld).toBe(1);
      } finally {
        await redis.start();
      }
      const back = await eventually(
        async () => {
          const answer = await openListen(app.url, {
            principal: 'p0',
            taskIds: [mine],
            id: 'back',
          });
          if (answer.stream === undefined) return undefined;
          h.streams.push(answer.stream);
          return answer.stream;
        },
        10_000,
        'listen to stream again',
      );
      expect((await back.next()).params!.notifications).toEqual({ taskIds: [mine] });
      await app.service.complete(mine!, DONE);
      let last: JsonRpcMessage;
      do last = await back.next(5_000);
      while (last.params?.status !== 'completed');
      expect(last.params!.taskId).toBe(mine);
      expect(app.listen.slotsHeld).toBe(2);
    },
  );
});
