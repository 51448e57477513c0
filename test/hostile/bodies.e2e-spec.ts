/**
 * Request bodies under control before authentication (issue 34): 200 anonymous clients, each from
 * its own loopback address, declare 1,000,000-byte bodies (under `maxBodyBytes`) to a real server
 * process with every default option (the suite's fixture) and never finish them: half send 900 KB
 * at once and stall, half send 500 KB and then trickle 4 KB every 100 ms. Before the fix the
 * server kept every byte until Node's 300 s `requestTimeout` (this test measured RSS 127 → 273
 * MiB, and alice waited 1.6 s). Now:
 *
 * - the process's RSS (VmRSS of /proc/<pid>/status, sampled throughout) grows by at most 64 MiB:
 *   what the endpoint holds of unfinished bodies is `bodies.maxBytesInFlight`;
 * - an authorized small request is answered in under a second, again and again, meanwhile;
 * - every slow client is answered, within `bodies.timeoutMs` and a margin, with the documented
 *   refusal (HTTP 503 with Retry-After when the budget is full, 408 when its time is up: -32000,
 *   `id: null`, the option and its value in the message and `data`) and its connection closed;
 * - nothing is logged at ERROR level, and the server lives on.
 */
import { readFileSync } from 'node:fs';
import {
  DEFAULT_BODY_TIMEOUT_MS,
  DEFAULT_MAX_BODY_BYTES_IN_FLIGHT,
} from '../../src/tasks.constants.js';
import { type SlowBody, slowBody, type SlowOutcome } from '../support/slow-body.js';
import { standardHeaders } from '../support/wire.js';
import { agent, Wire } from './http.js';
import { buildServers, FIXTURE_ENTRY, type ServerProcess, startServer } from './server.js';

const ATTACKERS = 200;
const DECLARED = 1_000_000;
const STALL_BYTES = 900_000;
/** A trickling client's first burst, then TRICKLE_BYTES every TRICKLE_EVERY_MS. */
const TRICKLE_FIRST = 500_000;
const TRICKLE_BYTES = 4_000;
const TRICKLE_EVERY_MS = 100;
const MAX_RSS_GROWTH_MIB = 64;
/** How long after its timeout a slow client may still wait for its answer. */
const ANSWER_MARGIN_MS = 3_000;
const MIB = 1_048_576;

/** The start of a body that never ends, and what slow clients send. */
const PREFIX =
  '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"';
const STALL = Buffer.from(PREFIX.padEnd(STALL_BYTES, 'x'));
const TRICKLE_START = Buffer.from(PREFIX.padEnd(TRICKLE_FIRST, 'x'));
const TRICKLE = Buffer.alloc(TRICKLE_BYTES, 'x');

/** The server process's resident set, in bytes. */
function rssOf(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = /^VmRSS:\s+(\d+)\s+kB$/m.exec(status)?.[1];
  if (kib === undefined) throw new Error(`no VmRSS in /proc/${pid}/status`);
  return Number(kib) * 1024;
}

/**
 * One anonymous client from `localAddress`: a `tools/call` head declaring DECLARED bytes, then
 * either STALL at once and nothing more, or TRICKLE_START and then TRICKLE every
 * TRICKLE_EVERY_MS until the server closes the connection.
 */
function slowClient(port: number, localAddress: string, mode: 'stall' | 'trickle'): SlowBody {
  const client = slowBody(port, {
    headers: {
      host: `127.0.0.1:${port}`,
      ...standardHeaders('tools/call', 'echo'),
      'content-length': String(DECLARED),
    },
    // One Buffer for every client: the test's own process stays light while it times alice.
    first: mode === 'stall' ? STALL : TRICKLE_START,
    localAddress,
  });
  if (mode === 'trickle') {
    let sent = TRICKLE_START.length;
    const timer = setInterval(() => {
      if (sent + TRICKLE_BYTES >= DECLARED) return clearInterval(timer);
      client.write(TRICKLE);
      sent += TRICKLE_BYTES;
    }, TRICKLE_EVERY_MS);
    void client.done.then(() => clearInterval(timer));
  }
  return client;
}

describe('request bodies before authentication (issue 34)', () => {
  let server: ServerProcess | undefined;

  beforeAll(() => buildServers(), 300_000);
  afterAll(async () => {
    await server?.stop();
  });

  it('holds 200 slow anonymous bodies to its budget, answers each 503 or 408 and serves alice meanwhile', async () => {
    server = await startServer(FIXTURE_ENTRY);
    const pid = server.child.pid!;
    const alice = new Wire(server.url, 'alice', agent(4));
    // Warm the paths alice takes, so the baseline has what serving her costs.
    for (let i = 0; i < 5; i++) {
      expect((await alice.modern('tools/list', {})).status).toBe(200);
    }
    const baseline = rssOf(pid);

    let peak = baseline;
    const sampler = setInterval(() => {
      peak = Math.max(peak, rssOf(pid));
    }, 100);
    const clients = Array.from({ length: ATTACKERS }, (_, i) =>
      slowClient(server!.port, `127.0.1.${i + 1}`, i % 2 === 0 ? 'stall' : 'trickle'),
    );
    let outcomes: SlowOutcome[];
    const latencies: number[] = [];
    try {
      // Alice, while the slow bodies come in and are held: each answer in under a second.
      const aliceDeadline = Date.now() + 4_000;
      while (Date.now() < aliceDeadline) {
        const started = Date.now();
        const answer = await alice.modern('tools/list', {}, 5_000);
        latencies.push(Date.now() - started);
        expect(answer.status).toBe(200);
        await new Promise((wait) => setTimeout(wait, 100));
      }
      const grown = (peak - baseline) / MIB;
      process.stdout.write(
        `bodies: RSS ${(baseline / MIB).toFixed(1)} MiB before, peak ${(peak / MIB).toFixed(1)} ` +
          `MiB under ${ATTACKERS} slow bodies (+${grown.toFixed(1)} MiB); alice's slowest ` +
          `answer ${Math.max(...latencies)} ms of ${latencies.length}\n`,
      );
      expect(grown).toBeLessThanOrEqual(MAX_RSS_GROWTH_MIB);
      expect(Math.max(...latencies)).toBeLessThan(1_000);

      // Every slow client is answered, and cut, by its timeout and a margin.
      const bound = new Promise<'late'>((late) =>
        setTimeout(() => late('late'), DEFAULT_BODY_TIMEOUT_MS + ANSWER_MARGIN_MS + 2_000).unref(),
      );
      const all = Promise.all(clients.map((client) => client.done));
      expect(await Promise.race([all, bound])).not.toBe('late');
      outcomes = await all;
    } finally {
      clearInterval(sampler);
      for (const client of clients) client.abort();
    }
    const grown = (peak - baseline) / MIB;
    expect(grown).toBeLessThanOrEqual(MAX_RSS_GROWTH_MIB);

    const byStatus = new Map<number | undefined, number>();
    for (const outcome of outcomes) {
      byStatus.set(outcome.status, (byStatus.get(outcome.status) ?? 0) + 1);
      if (outcome.status === undefined) throw new Error(`no answer: ${JSON.stringify(outcome)}`);
      expect(outcome.closedAfterMs).toBeLessThan(DEFAULT_BODY_TIMEOUT_MS + ANSWER_MARGIN_MS);
      expect([408, 503]).toContain(outcome.status);
      expect(outcome.headers.connection).toBe('close');
      const json = JSON.parse(outcome.body) as {
        id: unknown;
        error: { code: number; message: string; data: Record<string, unknown> };
      };
      expect(json.id).toBeNull();
      expect(json.error.code).toBe(-32000);
      if (outcome.status === 408) {
        // At its timeout, not before.
        expect(outcome.answeredAfterMs).toBeGreaterThanOrEqual(DEFAULT_BODY_TIMEOUT_MS - 100);
        expect(json.error.data).toEqual({
          limit: 'bodies.timeoutMs',
          max: DEFAULT_BODY_TIMEOUT_MS,
        });
        expect(json.error.message).toContain(`bodies.timeoutMs ${DEFAULT_BODY_TIMEOUT_MS}`);
      } else {
        // As the budget refused it: long before any timeout.
        expect(outcome.answeredAfterMs).toBeLessThan(DEFAULT_BODY_TIMEOUT_MS / 2);
        expect(outcome.headers['retry-after']).toBe('1');
        expect(json.error.data).toEqual({
          limit: 'bodies.maxBytesInFlight',
          max: DEFAULT_MAX_BODY_BYTES_IN_FLIGHT,
          retryAfterMs: 1_000,
        });
        expect(json.error.message).toContain(
          `bodies.maxBytesInFlight ${DEFAULT_MAX_BODY_BYTES_IN_FLIGHT}`,
        );
      }
    }
    process.stdout.write(
      `bodies: answers ${JSON.stringify(Object.fromEntries(byStatus))}, the last after ` +
        `${Math.max(...outcomes.map((outcome) => outcome.closedAfterMs))} ms\n`,
    );
    // Both refusals happened: the budget filled, and the bodies it held ran out of time.
    expect(byStatus.get(503)).toBeGreaterThan(0);
    expect(byStatus.get(408)).toBeGreaterThan(0);

    // Alice is still served, the server lives, and no refusal was logged as an error.
    expect((await alice.modern('tools/list', {})).status).toBe(200);
    expect(server.alive()).toBe(true);
    expect(server.output()).not.toMatch(/ERROR/);
    alice.agent.destroy();
  }, 40_000);
});
