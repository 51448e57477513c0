import { afterEach, beforeEach, describe, expect, it, jest } from '@jest/globals';
import { Injectable, type INestApplication, Logger, type LoggerService } from '@nestjs/common';
import { BullModule } from '@nestjs/bullmq';
import { Test } from '@nestjs/testing';
import { TasksQueueModule } from '../../src/bullmq/index.js';
import { TaskTool, TasksModule } from '../../src/index.js';
import { PostgresTaskStore, postgresNotifier } from '../../src/postgres/index.js';
import { RedisTaskStore, redisNotifier } from '../../src/redis/index.js';
import { freePort } from '../support/servers/free-port.mjs';

/**
 * A newcomer's store or queue at an address where nothing listens (issue 35, item 5): what the
 * app logs names that address (never the password the connection holds) and what to check,
 * within seconds; startup does not serve on a store it cannot reach; a queue's connection errors
 * are logged, not printed by BullMQ, and do not keep the app from closing; a queue without a
 * connection of its own fails the boot instead of using 127.0.0.1:6379 without a word.
 */

const PASSWORD = 'n3wc0mer-s3cret';
/** How soon the log must name the address. */
const NAMED_WITHIN_MS = 3_000;
/** Startup's wait for the store, short here (the default is storeOutageMs, 120 s). */
const OUTAGE_MS = 1_500;

/** Every line the app logs, at every level, with its time. */
class AllLines implements LoggerService {
  readonly lines: { level: string; text: string }[] = [];
  private keep(level: string, message: unknown, rest: unknown[]): void {
    this.lines.push({ level, text: [message, ...rest].map(String).join(' ') });
  }
  log(message: unknown, ...rest: unknown[]): void {
    this.keep('log', message, rest);
  }
  error(message: unknown, ...rest: unknown[]): void {
    this.keep('error', message, rest);
  }
  warn(message: unknown, ...rest: unknown[]): void {
    this.keep('warn', message, rest);
  }
  debug(message: unknown, ...rest: unknown[]): void {
    this.keep('debug', message, rest);
  }
  verbose(message: unknown, ...rest: unknown[]): void {
    this.keep('verbose', message, rest);
  }
  get errors(): string[] {
    return this.lines.filter((line) => line.level === 'error').map((line) => line.text);
  }
  get text(): string {
    return this.lines.map((line) => line.text).join('\n');
  }
}

@Injectable()
class ReportTools {
  @TaskTool({ name: 'build_report', queue: 'reports' })
  build() {
    return { content: [] };
  }
}

let log: AllLines;
/** What went to the console (BullMQ prints errors nobody listens to there). */
let printed: string[];
let apps: INestApplication[];

beforeEach(() => {
  log = new AllLines();
  printed = [];
  apps = [];
  for (const method of ['error', 'warn', 'log'] as const) {
    jest.spyOn(console, method).mockImplementation((...args: unknown[]) => {
      printed.push(args.map((arg) => (arg instanceof Error ? arg.stack : String(arg))).join(' '));
    });
  }
});

afterEach(async () => {
  for (const app of apps) await closeWithin(app, 5_000);
  jest.restoreAllMocks();
  Logger.overrideLogger(false);
});

/** An app of these modules, logging to `log`; its init is started, not awaited. */
async function start(
  imports: unknown[],
  providers: unknown[] = [],
): Promise<{ app: INestApplication; init: Promise<unknown> }> {
  const moduleRef = await Test.createTestingModule({
    imports: imports as never[],
    providers: providers as never[],
  })
    .setLogger(log)
    .compile();
  const app = moduleRef.createNestApplication({ logger: log });
  apps.push(app);
  // The outcome: the app, or the error the boot failed with.
  const init = app.init().then(
    () => 'started',
    (error: unknown) => error,
  );
  return { app, init };
}

/** Resolves with how long it took for a log line to contain `text`, or null after `ms`. */
async function loggedWithin(text: string, ms: number): Promise<number | null> {
  const started = Date.now();
  while (Date.now() - started < ms) {
    if (log.text.includes(text)) return Date.now() - started;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  return log.text.includes(text) ? Date.now() - started : null;
}

/** Closes `app`; 'timed out' when it takes longer than `ms`. */
async function closeWithin(app: INestApplication, ms: number): Promise<string> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<string>((resolve) => {
    timer = setTimeout(() => resolve('timed out'), ms);
  });
  const closed = app.close().then(
    () => 'closed',
    (error: unknown) => `failed: ${String(error)}`,
  );
  const outcome = await Promise.race([closed, late]);
  clearTimeout(timer);
  return outcome;
}

/** Nothing anywhere holds the password: log lines, the console, the boot's error. */
function expectNoPassword(...more: unknown[]): void {
  const everything = [log.text, ...printed, ...more.map(String)].join('\n');
  expect(everything).not.toContain(PASSWORD);
}

describe.each([
  {
    engine: 'Redis',
    parts: (port: number) => {
      const redis = { connection: `redis://:${PASSWORD}@127.0.0.1:${port}` };
      return { store: new RedisTaskStore(redis), notifier: redisNotifier(redis) };
    },
  },
  {
    engine: 'PostgreSQL',
    parts: (port: number) => {
      const postgres = { connection: `postgres://app:${PASSWORD}@127.0.0.1:${port}/tasks` };
      return { store: new PostgresTaskStore(postgres), notifier: postgresNotifier(postgres) };
    },
  },
])('a $engine store where nothing listens', ({ engine, parts }) => {
  it('is logged with its address and what to check, and fails the boot after storeOutageMs', async () => {
    const port = await freePort();
    const address = `${engine} at 127.0.0.1:${port}`;
    const started = Date.now();
    const { init } = await start([
      TasksModule.forRoot({
        ...parts(port),
        storeOutageMs: OUTAGE_MS,
        shutdown: { drainMs: 0 },
      }),
    ]);
    const namedAfter = await loggedWithin(address, NAMED_WITHIN_MS);
    expect({ namedAfter, errors: log.errors }).toEqual({
      namedAfter: expect.any(Number),
      errors: expect.arrayContaining([expect.stringContaining(address)]),
    });
    expect(log.errors.join('\n')).toContain(`check that ${engine} runs there`);

    // Startup does not serve on a store it cannot reach: past storeOutageMs the boot fails,
    // saying so and naming the address.
    const outcome = await init;
    const tookMs = Date.now() - started;
    expect(outcome).toBeInstanceOf(Error);
    expect((outcome as Error).message).toContain(address);
    expect((outcome as Error).message).toContain('storeOutageMs');
    expect(tookMs).toBeGreaterThanOrEqual(OUTAGE_MS);
    expect(tookMs).toBeLessThan(OUTAGE_MS + 4_000);
    // Logged once when the wait starts, not per attempt or per part.
    expect(log.errors.length).toBeLessThanOrEqual(3);
    expect(printed).toEqual([]);
    expectNoPassword((outcome as Error).message, (outcome as Error).stack);
  });
});

describe('a BullMQ queue', () => {
  it('where nothing listens is logged with its address, once, and the app still closes', async () => {
    const port = await freePort();
    const address = `Redis at 127.0.0.1:${port}`;
    const { app, init } = await start(
      [
        // The form docs/queue.md shows: the URL the store takes too.
        BullModule.forRoot({ connection: { url: `redis://:${PASSWORD}@127.0.0.1:${port}` } }),
        BullModule.registerQueue({ name: 'reports' }),
        TasksModule.forRoot({ shutdown: { drainMs: 0 } }),
        TasksQueueModule.forRoot(),
      ],
      [ReportTools],
    );
    expect(await init).toBe('started');
    const namedAfter = await loggedWithin(address, NAMED_WITHIN_MS);
    expect({ namedAfter, errors: log.errors }).toEqual({
      namedAfter: expect.any(Number),
      errors: expect.arrayContaining([expect.stringContaining(`Queue reports could not reach`)]),
    });
    // Two more seconds of reconnect attempts (BullMQ reports each one, on each connection).
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    const errors = log.errors;
    expect(errors.length).toBeLessThanOrEqual(2);
    expect(errors.join('\n')).toContain('check that Redis runs there');
    // BullMQ prints a queue's errors to the console when nobody listens: nothing gets there.
    expect(printed).toEqual([]);
    expect(await closeWithin(app, 5_000)).toBe('closed');
    expectNoPassword();
  });

  it('without a connection of its own fails the boot instead of using 127.0.0.1:6379', async () => {
    const { init } = await start(
      [
        // A connection read from environment variables that are not set.
        BullModule.forRoot({ connection: { host: process.env.NEWCOMER_UNSET_REDIS_HOST } }),
        BullModule.registerQueue({ name: 'reports' }),
        TasksModule.forRoot({ shutdown: { drainMs: 0 } }),
        TasksQueueModule.forRoot({ worker: false }),
      ],
      [ReportTools],
    );
    const outcome = await init;
    expect(outcome).toBeInstanceOf(Error);
    expect((outcome as Error).message).toContain('"reports", which has no Redis connection');
    expect((outcome as Error).message).toContain('127.0.0.1:6379');
    expect((outcome as Error).message).toContain('BullModule.forRoot({ connection })');
  });
});
