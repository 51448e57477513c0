/**
 * The `bodies` limits over real HTTP on both adapters (issue 34): a body too slow is 408, one the
 * budget has no room for 503 with Retry-After (per address, then in all), each a -32000 JSON-RPC
 * error with `id: null` naming the option, and the connection closed; a small request is served
 * while the budget is full; every byte is given back once the slow clients are gone; and the HTTP
 * server's `headersTimeout` is lowered, never raised.
 */
import { Module, type Type } from '@nestjs/common';
import type { Server } from 'node:http';
import { TasksModule, type TasksModuleOptions } from '../../src/index.js';
import { BodyParsingInstaller } from '../../src/mcp/body-parsing.installer.js';
import { REFUSAL_LINGER_MS } from '../../src/mcp/body-refusals.js';
import { ADAPTERS, type AdapterName, type RunningApp, startApp } from '../support/app.js';
import { mcpRequest, post } from '../support/raw.js';
import { type SlowBody, slowBody } from '../support/slow-body.js';
import { standardHeaders } from '../support/wire.js';

const MAX_BODY = 65_536;
const PER_ADDRESS = 2 * MAX_BODY;
const IN_FLIGHT = 4 * MAX_BODY;
const TIMEOUT_MS = 1_000;

function bodiesModule(options: TasksModuleOptions): Type<unknown> {
  @Module({
    imports: [TasksModule.forRoot({ janitor: false, shutdown: { drainMs: 0 }, ...options })],
  })
  class BodiesTestModule {}
  return BodiesTestModule;
}

const LIMITS: TasksModuleOptions = {
  maxBodyBytes: MAX_BODY,
  bodies: {
    maxBytesInFlight: IN_FLIGHT,
    maxBytesInFlightPerAddress: PER_ADDRESS,
    timeoutMs: TIMEOUT_MS,
    headersTimeoutMs: 15_000,
  },
};

/** Polls until `read` is true (fails after 5 s). */
async function until(read: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 5_000;
  while (!read()) {
    if (Date.now() > deadline) throw new Error(`Timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe.each(ADAPTERS)('request bodies while they arrive (%s)', (adapter: AdapterName) => {
  let running: RunningApp;
  let port: number;
  const inFlight = (): number => running.app.get(BodyParsingInstaller).budget.bytesInFlight;

  beforeAll(async () => {
    running = await startApp(bodiesModule(LIMITS), adapter);
    port = Number(new URL(running.url).port);
  });
  afterAll(() => running.close());

  /** A `tools/call` declaring `declared` bytes, of which 100 are sent, from `localAddress`. */
  const slow = (
    declared: number,
    localAddress = '127.0.0.1',
    type = 'application/json',
    to = port,
  ): SlowBody =>
    slowBody(to, {
      headers: {
        host: `127.0.0.1:${to}`,
        ...standardHeaders('tools/call', 'echo'),
        'content-type': type,
        'content-length': String(declared),
      },
      first: '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo",'.padEnd(100),
      localAddress,
    });

  /** A small request of a principal, answered as usual. */
  const small = (url = running.url) =>
    post(url, mcpRequest('tools/list', {}, { principal: 'alice' }));

  it('a body that does not arrive in time: 408, -32000 naming bodies.timeoutMs, connection closed, nothing held', async () => {
    const client = slow(10_000);
    const outcome = await client.done;
    expect(outcome.status).toBe(408);
    expect(outcome.headers.connection).toBe('close');
    expect(JSON.parse(outcome.body)).toEqual({
      jsonrpc: '2.0',
      id: null,
      error: {
        code: -32000,
        message: `Request body not received in time (bodies.timeoutMs ${TIMEOUT_MS})`,
        data: { limit: 'bodies.timeoutMs', max: TIMEOUT_MS },
      },
    });
    // Answered at its timeout, and the connection closed by the server after the linger.
    expect(outcome.answeredAfterMs).toBeGreaterThanOrEqual(TIMEOUT_MS - 50);
    expect(outcome.answeredAfterMs).toBeLessThan(TIMEOUT_MS + 500);
    expect(outcome.closedAfterMs).toBeLessThan(TIMEOUT_MS + REFUSAL_LINGER_MS + 500);
    expect(inFlight()).toBe(0);
  });

  it('a body of another media type that does not arrive in time: 408 too', async () => {
    const outcome = await slow(10_000, '127.0.0.1', 'text/plain').done;
    expect(outcome.status).toBe(408);
    expect(JSON.parse(outcome.body).error.data).toEqual({
      limit: 'bodies.timeoutMs',
      max: TIMEOUT_MS,
    });
  });

  it('bodies beyond the budget: 503 with Retry-After naming the address’s cap, then the total; small requests still served; all given back', async () => {
    // Bodies that wait longer than the refusals take to arrive.
    const patient = await startApp(
      bodiesModule({ ...LIMITS, bodies: { ...LIMITS.bodies, timeoutMs: 30_000 } }),
      adapter,
    );
    const to = Number(new URL(patient.url).port);
    const budget = patient.app.get(BodyParsingInstaller).budget;
    const held: SlowBody[] = [];
    try {
      // Two bodies from 127.0.0.1 reserve its share (2 × 64 KiB).
      held.push(slow(MAX_BODY, '127.0.0.1', 'application/json', to));
      held.push(slow(MAX_BODY, '127.0.0.1', 'application/json', to));
      await until(() => budget.bytesInFlight === PER_ADDRESS, 'two reservations');
      const third = await slow(MAX_BODY, '127.0.0.1', 'application/json', to).done;
      expect(third.status).toBe(503);
      expect(third.headers['retry-after']).toBe('1');
      expect(third.headers.connection).toBe('close');
      expect(JSON.parse(third.body)).toEqual({
        jsonrpc: '2.0',
        id: null,
        error: {
          code: -32000,
          message:
            'Server busy: the request bodies from your address fill their budget ' +
            `(bodies.maxBytesInFlightPerAddress ${PER_ADDRESS}); retry later`,
          data: {
            limit: 'bodies.maxBytesInFlightPerAddress',
            max: PER_ADDRESS,
            retryAfterMs: 1_000,
          },
        },
      });
      // Answered at once; closed after the linger (REFUSAL_LINGER_MS).
      expect(third.answeredAfterMs).toBeLessThan(500);
      expect(third.closedAfterMs).toBeLessThan(REFUSAL_LINGER_MS + 500);

      // Other addresses fill the rest of the total; one more anywhere is refused naming it.
      held.push(slow(MAX_BODY, '127.0.0.2', 'application/json', to));
      held.push(slow(MAX_BODY, '127.0.0.3', 'application/json', to));
      await until(() => budget.bytesInFlight === IN_FLIGHT, 'the full budget');
      const fifth = await slow(MAX_BODY, '127.0.0.4', 'application/json', to).done;
      expect(fifth.status).toBe(503);
      expect(JSON.parse(fifth.body).error.data).toEqual({
        limit: 'bodies.maxBytesInFlight',
        max: IN_FLIGHT,
        retryAfterMs: 1_000,
      });

      // A request that arrives whole is served however full the budget.
      const answer = await small(patient.url);
      expect(answer.status).toBe(200);
      expect(answer.json?.result).toHaveProperty('tools');
      expect(budget.bytesInFlight).toBe(IN_FLIGHT);
    } finally {
      // The clients go away mid-body: what they held is given back.
      for (const client of held) client.abort();
    }
    try {
      await until(() => budget.bytesInFlight === 0, 'the budget back to 0');
      expect(budget.addresses).toBe(0);
      expect((await small(patient.url)).status).toBe(200);
    } finally {
      await patient.close();
    }
  });

  it('lowers the HTTP server’s headersTimeout to bodies.headersTimeoutMs', () => {
    expect((running.app.getHttpServer() as Server).headersTimeout).toBe(15_000);
  });

  it('never raises a headersTimeout the app set lower, and leaves it with headersTimeoutMs: null', async () => {
    const lower = await startApp(bodiesModule({}), adapter, '/mcp', (app) => {
      (app.getHttpServer() as Server).headersTimeout = 5_000;
    });
    const untouched = await startApp(bodiesModule({ bodies: { headersTimeoutMs: null } }), adapter);
    const defaults = await startApp(bodiesModule({}), adapter);
    try {
      expect((lower.app.getHttpServer() as Server).headersTimeout).toBe(5_000);
      expect((untouched.app.getHttpServer() as Server).headersTimeout).toBe(60_000);
      expect((defaults.app.getHttpServer() as Server).headersTimeout).toBe(20_000);
    } finally {
      await Promise.all([lower.close(), untouched.close(), defaults.close()]);
    }
  });
});
