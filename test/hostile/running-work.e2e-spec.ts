/**
 * Running work counts (issue 34): `maxTasksPerOwner` bounds what one owner has running, not only
 * what the store keeps. A hostile client that asks for short TTLs (2025-11-25 `task.ttl`) makes
 * its tasks expire while their calls still run; each such call is stopped through its signal as
 * its task expires, and counts against its owner until its method has really returned. On the
 * in-memory store, a real Redis and a real PostgreSQL (each with its notifier, as deployed), over
 * real HTTP, with the server's log read: no ERROR line per call.
 */
import { Injectable, Module, type Type } from '@nestjs/common';
import { type TaskContext, TaskTool, TasksModule } from '../../src/index.js';
import type { TasksModuleExtras } from '../../src/entries/options.js';
import { type RunningApp, startApp } from '../support/app.js';
import { legacyHeaders } from '../support/wire.js';
import { bearerPrincipal } from '../support/bearer.guard.js';
import { KeptLog } from '../support/kept-log.js';
import { type Storage, STORES } from '../support/stores.js';

const QUOTA = 100;
const CALLS = 1_000;
const TTL_MS = 1_500;
/** How long mallory's burst lasts at least: several TTLs, so expired tasks make room. */
const BURST_MS = 6_000;
/**
 * `stubborn` goes on after its signal fired until the test opens this gate: a fixed delay made the
 * check of what still runs a race with the machine's load.
 */
const stubbornGate = { aborted: 0, open: (): void => undefined, opened: Promise.resolve() };
function closeStubbornGate(): void {
  stubbornGate.aborted = 0;
  stubbornGate.opened = new Promise<void>((resolve) => (stubbornGate.open = resolve));
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** How many calls of each tool run now, and the most that ran at once. */
class Concurrency {
  now = 0;
  max = 0;
  enter(): void {
    this.now++;
    if (this.now > this.max) this.max = this.now;
  }
  leave(): void {
    this.now--;
  }
}
const running = { hold: new Concurrency(), stubborn: new Concurrency() };

@Injectable()
class RunningTools {
  /** Runs until its signal fires (its task cancelled, expired or gone). */
  @TaskTool({ name: 'hold' })
  async hold(_input: unknown, task: TaskContext) {
    running.hold.enter();
    try {
      await new Promise<void>((_resolve, reject) => {
        task.signal.addEventListener('abort', () => reject(task.signal.reason), { once: true });
      });
    } finally {
      running.hold.leave();
    }
    return { content: [{ type: 'text' as const, text: 'never' }] };
  }

  /** Ignores its signal until the test opens the gate: a method that is slow to stop. */
  @TaskTool({ name: 'stubborn' })
  async stubborn(_input: unknown, task: TaskContext) {
    running.stubborn.enter();
    try {
      await new Promise<void>((resolve) => {
        task.signal.addEventListener(
          'abort',
          () => {
            stubbornGate.aborted++;
            void stubbornGate.opened.then(resolve);
          },
          { once: true },
        );
      });
    } finally {
      running.stubborn.leave();
    }
    return { content: [{ type: 'text' as const, text: 'stopped late' }] };
  }
}

function runningModule(storage: TasksModuleExtras): Type<unknown> {
  @Module({
    imports: [
      TasksModule.forRoot({
        principal: bearerPrincipal,
        maxTasksPerOwner: QUOTA,
        shutdown: { drainMs: 0 },
        ...storage,
      }),
    ],
    providers: [RunningTools],
  })
  class RunningWorkModule {}
  return RunningWorkModule;
}

type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any

/** A 2025-11-25 `tools/call` as a task with `task.ttl`; the JSON-RPC answer. */
async function call2025(url: string, who: string, name: string, ttl: number): Promise<Json> {
  const response = await fetch(url, {
    method: 'POST',
    headers: legacyHeaders(who, 'application/json'),
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/call',
      params: { name, arguments: {}, task: { ttl } },
    }),
  });
  expect(response.status).toBe(200);
  return await response.json();
}

const QUOTA_REFUSAL = {
  code: -32603,
  message: `Task quota reached (maxTasksPerOwner ${QUOTA})`,
  data: { limit: 'maxTasksPerOwner', max: QUOTA },
};

/** Waits until `check` holds, for up to `ms`. */
async function until(check: () => boolean, ms: number): Promise<void> {
  const end = Date.now() + ms;
  while (!check() && Date.now() < end) await sleep(20);
}

describe.each(Object.keys(STORES))('running work counts against its owner (%s store)', (name) => {
  let storage: Storage;
  let app: RunningApp;
  const log = new KeptLog();

  beforeAll(async () => {
    storage = await STORES[name]!('running');
    app = await startApp(runningModule(storage.parts()), 'express', '/mcp', (nest) =>
      nest.useLogger(log),
    );
  }, 60_000);
  afterAll(async () => {
    await app?.close();
    await storage?.stop();
  });

  it(`${CALLS} calls with a ${TTL_MS} ms TTL: never more than the quota running, each stopped as its task expires, no ERROR line`, async () => {
    running.hold.max = 0;
    const answers: Json[] = [];
    const started = Date.now();
    let next = 0;
    // Paced over BURST_MS: expired tasks free the store's quota several times over.
    await Promise.all(
      Array.from({ length: 20 }, async () => {
        while (next < CALLS) {
          const index = next++;
          const due = started + (index * BURST_MS) / CALLS;
          if (due > Date.now()) await sleep(due - Date.now());
          answers.push(await call2025(app.url, 'mallory', 'hold', TTL_MS));
        }
      }),
    );
    const accepted = answers.filter((answer) => answer.result?.task?.status === 'working');
    const refused = answers.filter((answer) => answer.error !== undefined);
    expect(accepted.length + refused.length).toBe(CALLS);
    for (const answer of refused) expect(answer.error).toEqual(QUOTA_REFUSAL);
    // Expired tasks made room: more than one quota's worth was taken over the burst.
    expect(accepted.length).toBeGreaterThan(QUOTA * 2);
    expect(running.hold.max).toBeLessThanOrEqual(QUOTA);
    // Every call stops within a second of its task's expiry.
    await until(() => running.hold.now === 0, TTL_MS + 1_000);
    expect(running.hold.now).toBe(0);
    // Another owner is served meanwhile and after.
    expect((await call2025(app.url, 'alice', 'hold', TTL_MS)).result?.task?.status).toBe('working');
    expect(log.errors).toEqual([]);
    // One line for the cause, however many calls it stopped.
    expect(log.warnings.filter((line) => /expired/.test(line)).length).toBeLessThanOrEqual(2);
  }, 60_000);

  it('a method slow to stop counts until it returns: its owner is refused meanwhile, served after', async () => {
    await until(() => running.hold.now === 0, TTL_MS + 1_000);
    running.stubborn.max = 0;
    closeStubbornGate();
    const ttl = 500;
    const first = await Promise.all(
      Array.from({ length: QUOTA }, () => call2025(app.url, 'trudy', 'stubborn', ttl)),
    );
    for (const answer of first) expect(answer.result?.task?.status).toBe('working');
    // The tasks have expired and their signals fired; the methods still run.
    await until(() => stubbornGate.aborted === QUOTA, ttl + 5_000);
    expect(stubbornGate.aborted).toBe(QUOTA);
    expect(running.stubborn.now).toBe(QUOTA);
    const meanwhile = await Promise.all(
      Array.from({ length: 20 }, () => call2025(app.url, 'trudy', 'stubborn', ttl)),
    );
    for (const answer of meanwhile) expect(answer.error).toEqual(QUOTA_REFUSAL);
    expect(running.stubborn.max).toBe(QUOTA);
    stubbornGate.open();
    await until(() => running.stubborn.now === 0, 5_000);
    expect(running.stubborn.now).toBe(0);
    expect((await call2025(app.url, 'trudy', 'hold', TTL_MS)).result?.task?.status).toBe('working');
    expect(log.errors).toEqual([]);
  }, 30_000);
});
