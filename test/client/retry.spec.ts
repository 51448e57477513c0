import { afterEach, describe, expect, it, jest } from '@jest/globals';
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  Backoff,
  connectionOutage,
  DEFAULT_RETRY,
  listenOutage,
  resolveRetry,
  statusOutage,
  TaskServerUnreachableError,
} from '../../src/client/retry.js';
import { rejection } from '../support/helpers.js';

/** A loopback server; `onRequest` decides what each request gets. */
async function serve(onRequest: Parameters<typeof createServer>[1]): Promise<Server> {
  const server = createServer(onRequest);
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  return server;
}

const portOf = (server: Server): number => (server.address() as AddressInfo).port;
const close = (server: Server): Promise<void> => new Promise((done) => server.close(() => done()));

describe('resolveRetry', () => {
  it('defaults: a 60 s window, 250 ms first delay, 5 s at most; false tries once', () => {
    expect(resolveRetry(undefined)).toEqual({
      windowMs: 60_000,
      initialDelayMs: 250,
      maxDelayMs: 5_000,
    });
    expect(resolveRetry(undefined)).toBe(DEFAULT_RETRY);
    expect(resolveRetry(false)).toEqual({ ...DEFAULT_RETRY, windowMs: 0 });
    expect(resolveRetry({ windowMs: 5_000 })).toEqual({ ...DEFAULT_RETRY, windowMs: 5_000 });
  });

  it('refuses what is no finite number >= 0, naming the key', () => {
    expect(() => resolveRetry({ windowMs: -1 })).toThrow(
      'retry.windowMs must be a finite number >= 0, got -1',
    );
    expect(() => resolveRetry({ maxDelayMs: Number.NaN })).toThrow('retry.maxDelayMs');
    expect(() => resolveRetry({ initialDelayMs: Infinity })).toThrow('retry.initialDelayMs');
    expect(() => resolveRetry({ windowMs: '5' as unknown as number })).toThrow('retry.windowMs');
    expect(() => resolveRetry(true as unknown as false)).toThrow(
      'retry must be an object or false',
    );
    expect(() => resolveRetry({ initialDelayMs: 10, maxDelayMs: 5 })).toThrow(
      'retry.initialDelayMs (10) must not exceed retry.maxDelayMs (5)',
    );
  });
});

describe('what counts as an outage (real failures on loopback)', () => {
  const servers: Server[] = [];
  afterEach(async () => {
    for (const server of servers.splice(0)) await close(server).catch(() => undefined);
  });

  it('a refused connection: ECONNREFUSED, nothing sent', async () => {
    const server = await serve(() => undefined);
    const port = portOf(server);
    await close(server);

    const error = await rejection(fetch(`http://127.0.0.1:${port}/mcp`, { method: 'POST' }));

    expect(connectionOutage(error)).toEqual({
      code: 'ECONNREFUSED',
      refused: true,
      text: expect.stringMatching(/^fetch failed: connect ECONNREFUSED 127\.0\.0\.1:\d+$/),
    });
  });

  it('a connection the server drops after reading the request: sent, not refused', async () => {
    const server = await serve((req) => req.socket.destroy());
    servers.push(server);

    const error = await rejection(
      fetch(`http://127.0.0.1:${portOf(server)}/mcp`, { method: 'POST', body: '{}' }),
    );

    const outage = connectionOutage(error);
    expect(outage).toMatchObject({ code: 'UND_ERR_SOCKET', refused: false });
    expect(outage?.text).toMatch(/^fetch failed: other side closed/);
  });

  it('node:http "socket hang up" (ECONNRESET)', async () => {
    const server = await serve((req) => req.socket.destroy());
    servers.push(server);

    const error = await rejection(
      new Promise((resolve, reject) => {
        const sent = httpRequest({ port: portOf(server), host: '127.0.0.1', method: 'POST' });
        sent.on('response', resolve).on('error', reject).end('{}');
      }),
    );

    expect(connectionOutage(error)).toMatchObject({ code: 'ECONNRESET', refused: false });
    expect(connectionOutage(error)?.text).toContain('socket hang up');
  });

  it('TLS spoken to a plain HTTP server is no outage: trying again would not help', async () => {
    const server = await serve((_req, res) => res.end('plain'));
    servers.push(server);

    const error = await rejection(fetch(`https://127.0.0.1:${portOf(server)}/mcp`));

    expect((error as Error).message).toBe('fetch failed');
    expect(connectionOutage(error)).toBeUndefined();
  });

  it('a bare "fetch failed" or "socket hang up" counts; other errors do not', () => {
    expect(connectionOutage(new TypeError('fetch failed'))).toEqual({
      refused: false,
      text: 'fetch failed',
    });
    expect(connectionOutage(new Error('socket hang up'))).toMatchObject({ refused: false });
    expect(connectionOutage(new Error('boom'))).toBeUndefined();
    expect(connectionOutage(undefined)).toBeUndefined();
  });

  it('HTTP: a gateway’s 502, 503 and 504 count, other statuses do not', () => {
    for (const status of [502, 503, 504]) {
      expect(statusOutage(status)).toEqual({ status, refused: false, text: `HTTP ${status}` });
    }
    for (const status of [200, 400, 401, 404, 429, 500])
      expect(statusOutage(status)).toBeUndefined();
  });

  it('a listen: a JSON-RPC error or an HTTP error other than a gateway’s is final', () => {
    expect(listenOutage(Object.assign(new Error('Method not found'), { code: -32601 }))).toBe(
      undefined,
    );
    const http = (status: number) =>
      Object.assign(new Error('Error POSTing to endpoint'), {
        code: 'CLIENT_HTTP_NOT_IMPLEMENTED',
        data: { status },
      });
    expect(listenOutage(http(404))).toBeUndefined();
    expect(listenOutage(http(503))).toMatchObject({ status: 503 });
    expect(listenOutage(new Error('subscriptions/listen: stream ended'))).toEqual({
      refused: false,
      text: 'subscriptions/listen: stream ended',
    });
  });
});

describe('Backoff', () => {
  afterEach(() => {
    jest.useRealTimers();
  });

  /** The times (ms after the start) at which each `next()` resolved, and what with. */
  async function schedule(backoff: Backoff, tries: number): Promise<[number, boolean][]> {
    const start = Date.now();
    const seen: [number, boolean][] = [];
    for (let i = 0; i < tries; i++) {
      const next = backoff.next();
      await jest.runOnlyPendingTimersAsync();
      const goOn = await next;
      seen.push([Date.now() - start, goOn]);
      if (!goOn) break;
    }
    return seen;
  }

  it('doubles the delay up to maxDelayMs, each between half and all of it', async () => {
    jest.useFakeTimers({ now: 0, doNotFake: ['nextTick', 'setImmediate', 'queueMicrotask'] });
    const policy = { windowMs: 60_000, initialDelayMs: 100, maxDelayMs: 1_000 };
    const waits = async (random: number): Promise<number[]> => {
      const spy = jest.spyOn(globalThis, 'setTimeout');
      expect((await schedule(new Backoff(policy, () => random), 6)).every(([, goOn]) => goOn)).toBe(
        true,
      );
      const delays = spy.mock.calls.map((call) => Math.round(call[1] as number));
      spy.mockRestore();
      return delays;
    };

    expect(await waits(0.999_999)).toEqual([100, 200, 400, 800, 1_000, 1_000]);
    expect(await waits(0)).toEqual([50, 100, 200, 400, 500, 500]);
  });

  it('ends with the window: the last delay is cut short, then next() is false', async () => {
    jest.useFakeTimers({ now: 0, doNotFake: ['nextTick', 'setImmediate', 'queueMicrotask'] });
    const spy = jest.spyOn(globalThis, 'setTimeout');
    const backoff = new Backoff({ windowMs: 1_000, initialDelayMs: 400, maxDelayMs: 400 }, () => 1);

    const seen = await schedule(backoff, 10);
    const waits = spy.mock.calls.map((call) => call[1]);
    spy.mockRestore();

    expect(waits).toEqual([400, 400, 200]);
    expect(seen.map(([, goOn]) => goOn)).toEqual([true, true, true, false]);
    expect(backoff.failed).toBe(4);
  });

  it('answered() opens a new window; calm() starts the delays over', async () => {
    jest.useFakeTimers({ now: 0, doNotFake: ['nextTick', 'setImmediate', 'queueMicrotask'] });
    const spy = jest.spyOn(globalThis, 'setTimeout');
    const backoff = new Backoff({ windowMs: 500, initialDelayMs: 100, maxDelayMs: 1_000 }, () => 1);

    await schedule(backoff, 2); // 100, 200
    backoff.answered();
    await schedule(backoff, 1); // a new window, the delays go on growing: 400
    backoff.calm();
    await schedule(backoff, 1); // from the start: 100
    const waits = spy.mock.calls.map((call) => call[1]);
    spy.mockRestore();

    expect(waits).toEqual([100, 200, 400, 100]);
  });

  it('windowMs 0 never waits; stop ends a wait with false; signal rejects with its reason', async () => {
    expect(await new Backoff({ ...DEFAULT_RETRY, windowMs: 0 }).next()).toBe(false);

    const stop = new AbortController();
    const stopped = new Backoff(DEFAULT_RETRY).next(undefined, stop.signal);
    stop.abort();
    expect(await stopped).toBe(false);

    const signal = new AbortController();
    const reason = new Error('no longer wanted');
    const aborted = new Backoff(DEFAULT_RETRY).next(signal.signal);
    signal.abort(reason);
    expect(await rejection(aborted)).toBe(reason);
  });
});

describe('TaskServerUnreachableError', () => {
  it('names the URL, the request, the time and the last outage', () => {
    const error = new TaskServerUnreachableError({
      url: 'http://127.0.0.1:3000/mcp',
      method: 'tasks/get',
      taskId: 't-1',
      outage: { status: 503, refused: false, text: 'HTTP 503' },
      attempts: 12,
      waitedMs: 60_004,
    });
    expect(error.message).toBe(
      'tasks/get: the MCP server at http://127.0.0.1:3000/mcp was unreachable for 60.0 s (12 attempts); last: HTTP 503',
    );
    expect(error).toMatchObject({
      name: 'TaskServerUnreachableError',
      url: 'http://127.0.0.1:3000/mcp',
      method: 'tasks/get',
      taskId: 't-1',
      status: 503,
      errorCode: undefined,
      attempts: 12,
      waitedMs: 60_004,
    });
  });
});
