// Memory under malformed load: how much does the server's resident memory (RSS) grow while it
// answers thousands of broken requests, and does it come back?
//
//   npm run bench              (builds dist/ and .demo-build/, then runs every benchmark)
//   npm run bench:malformed    (builds .demo-build/, then runs this file)
//
// The server is the demo app (`.demo-build/examples/demo.module.js`, built from src/, Express
// adapter like `npm start`) in a CHILD process started with --expose-gc (this file with
// `--serve`), so the RSS measured is the server's alone. It reports `process.memoryUsage()` every
// 50 ms over IPC, and runs `gc()` twice on request. This process sends 5,000 seeded malformed
// requests, 32 in flight over keep-alive node:http, in a mix of families: broken JSON, bodies
// near and over maxBodyBytes (1 MiB; with and without Content-Length), 10,000-level nesting, huge
// strings, huge maps, missing and mismatched headers, wrong JSON-RPC envelopes, foreign media
// types, valid-but-wrong tasks/* params, tools/call params the SDK refuses.
//
// Figures: idle (after start-up and a short warm-up of valid requests, after a full GC), peak
// (the highest sample during the load), settled (after the load, after a full GC). Targets:
// peak − idle ≤ 150 MiB, settled − idle ≤ 30 MiB, read on the median of ROUNDS rounds (3), each
// on a fresh server: one run's peak depends on where V8's collections happen to fall (±15 MiB
// from run to run here). After each malformed round, a control round on a fresh server sends
// small valid requests for as long as the malformed round took: its peak is what V8 lets the
// heap grow to under any sustained load, so the difference is what malformed input adds. It also
// prints the answers by HTTP status and whether any answer was a 5xx.
//
// It is a report, not a test: it exits 0 whether a target is met or missed, and non-zero only when
// it cannot run (nothing built, a server that does not start or dies). A hard deadline ends it at
// 400 s whatever happens.
//
// Environment knobs (all optional): BENCH_MALFORMED_REQUESTS (5000), BENCH_MALFORMED_CONCURRENCY
// (32), BENCH_MALFORMED_SEED (20260728), BENCH_MALFORMED_ONLY (family names, comma-separated, to
// bisect), BENCH_MALFORMED_ADAPTER (express | fastify; default express),
// BENCH_MALFORMED_SERVER_FLAGS (extra Node flags for the server process), BENCH_MALFORMED_ROUNDS
// (3), BENCH_MALFORMED_TRACE (a file to write every memory sample to, as CSV).
//
// -----------------------------------------------------------------------------------------------
// Method, in detail:
//
// `bench/malformed.bench.mjs` is plain ESM JavaScript. It takes about 2 minutes (three malformed
// rounds and three control rounds, each on a fresh server) and stops by itself (a hard deadline ends
// it at 400 s whatever happens). It is a
// report, not a test: it exits 0 whether a target is met or missed. It exits non-zero only when it
// cannot run: the demo not built, a server that does not start or dies during the load.
//
// **Setup.** The server is the demo app (`.demo-build/examples/demo.module.js`, built from `src/`,
// the Express adapter like `npm start`, default `maxBodyBytes` of 1 MiB) in a child process (the same
// file, run as `--serve`) started with `--expose-gc`, so the memory measured is the server's alone.
// The child sends `process.memoryUsage()` to the parent every 50 ms over IPC, and on request runs a
// full GC (`gc()` twice, 500 ms, `gc()` again) and reports. The parent is the load generator:
// `node:http` with a keep-alive `Agent`, 32 requests in flight.
//
// **The requests.** 5,000 malformed requests made from a seeded PRNG (mulberry32), in ten families
// (weight in brackets): broken JSON text (15: truncated, a byte replaced, trailing garbage, single
// quotes, `NaN`, empty); bodies near and over `maxBodyBytes` (10: 1 MiB ± 48 bytes or up to 2 MiB,
// half of them chunked, without Content-Length); deep nesting (10: 5,000 to 10,000 levels of `[`,
// `{"a":` or `[{"a":`, in a tool argument, as a taskId, in an unknown method's params, or as the whole
// body); huge strings (10: 20,000 to 380,000 characters as a taskId, a tool name, an extra or a valid
// tool argument); huge maps (5: 1,000 to 30,000 `inputResponses` or tool arguments, an array of
// arguments); missing and mismatched headers (10); wrong JSON-RPC envelopes (10: `jsonrpc: "1.0"`, an
// object id, a numeric method, batches, `null`, scalars, a response); foreign media types (10: five
// other types or none, a third of them with a body of up to 900 KB, some chunked); valid-but-wrong
// `tasks/*` params (15); `tools/call` params the SDK refuses and unknown methods (5). Before the load,
// 200 valid requests (`tools/call` of `echo`, `tools/list`, `tasks/get`) warm the server up. Every
// malformed round sends the same 5,000 requests (the PRNG restarts from the seed).
//
// **The control.** After each malformed round, a control round starts a fresh server and sends
// small valid requests (the warm-up's mix) at the same concurrency for as long as the malformed round
// took. Its peak is what V8 lets the heap grow to under any sustained load of that length; the
// difference between the two medians is what malformed input adds.
//
// **The figures.** _Idle_: after the warm-up and a full GC. _Peak_: the highest RSS sample during the
// load. _Settled_: after the load and a full GC. Each round prints its peak and settled rise; the
// first one also `heapUsed` of `heapTotal`, `external` and `arrayBuffers`, which say where the memory
// is. **Targets: peak − idle ≤ 150 MiB, settled − idle ≤ 30 MiB, on the median of the malformed
// rounds.** The run also prints the answers by family and HTTP status, the number of 5xx answers
// (there should be none) and of connection resets or time-outs, and the requests/s of each round.
//
// **Knobs** (environment, all optional): `BENCH_MALFORMED_REQUESTS` (5000),
// `BENCH_MALFORMED_CONCURRENCY` (32), `BENCH_MALFORMED_SEED` (20260728), `BENCH_MALFORMED_ONLY`
// (family names, comma-separated: `broken-json`, `huge-body`, `deep-nesting`, `huge-strings`,
// `huge-maps`, `headers`, `envelopes`, `media-types`, `tasks-params`, `tools-params`; to bisect),
// `BENCH_MALFORMED_ADAPTER` (`express` or `fastify`), `BENCH_MALFORMED_SERVER_FLAGS` (extra Node
// flags for the server, e.g. `--max-old-space-size=160`), `BENCH_MALFORMED_ROUNDS` (3),
// `BENCH_MALFORMED_TRACE` (a file: every 50 ms memory sample of the run, as CSV, to see the shape of
// the heap's sawtooth).
//
// **Reading the figures.** The peak is V8's heap sizing, not the requests: the control rounds, small
// valid requests only, peak within a few MiB of the malformed rounds (in the run below +137.5 MiB
// against +136.8 MiB; in the one before, +144.5 against +151.7). `BENCH_MALFORMED_TRACE` shows why:
// under sustained load `heapUsed` climbs from about 35 MiB to 140–190 MiB between full collections
// and drops back to about 35 MiB after each, whatever the load; V8 sizes the old generation as a
// multiple of the heap that survived the last collection while memory is plentiful. The target of
// 150 MiB sits on that sawtooth's top, so single rounds land between +127 and +179 MiB and the median
// of three meets or misses it by a few MiB. A heap limit bounds it: with
// `BENCH_MALFORMED_SERVER_FLAGS=--max-old-space-size=160` the malformed load peaked at +52 MiB, with no
// 5xx and about 10 % fewer requests/s. The settled RSS above idle (+12.5 to +22.1 MiB) is not the
// heap (back within about 1 MiB of idle): it is memory the C allocator keeps after the load and
// gives back over the following minutes. `test/e2e/retention.e2e-spec.ts` checks the other side
// functionally: after 240 malformed requests per adapter and a full GC, no request object and no
// per-request `McpServer` is still reachable.
//
// Causes found and fixed: a body whose Content-Length was over `maxBodyBytes` was still buffered up
// to the limit before the 413, and a chunked body that went over the limit kept what it had buffered
// until its end; now the first is drained without keeping a byte and the second drops its buffers as
// soon as it passes the limit (`src/mcp/body-parsing.ts`). The nesting depth is read from the raw
// bytes, chunk by chunk (`NestingScanner`), and the body is decoded the same way, with no
// `Buffer.concat` copy outside the heap. The SDK's web handler gets the parsed body as `parsedBody`
// through the module's own bridge (`src/mcp/sdk-bridge.ts`), where the SDK's Node adapter serialized
// it again, copied it through a `TextEncoder` and once more into the web `Request`: for a 1 MiB body
// about 3 MiB less allocated per request (V8 sampling heap profiler, 10 requests), and the malformed
// load runs at 282–303 requests/s instead of 224–250. Before → after, same seed, same machine:
// single-round peaks +171.5 / +171.7 MiB → +130.7 to +179.2 MiB (median of three +151.7 and +136.8 in
// two runs); settled +24.3 / +30.6 → +12.5 to +22.1 MiB. Tried and not kept: a gate letting only 2
// or 4 large bodies be parsed and handled at once (held until the answer, until the request was
// dispatched, or at most 250 ms): with 1, 4 or 32 places the peaks stayed within the run-to-run
// spread (huge maps alone: +154, +138, +153 MiB), because the load is CPU-bound on one thread and the
// sawtooth does not depend on how many bodies are alive at once.
//
// One run's output, from the 2-vCPU development VM (Node 20):
//
// ```
// malformed-load benchmark: 5,000 requests, 32 in flight, seed 20260728, 3 rounds, express adapter; 2 CPUs, load 1.31; Node v20.20.2
// answers by family in each malformed round (HTTP status: count):
//   broken-json    200: 19, 400: 753
//   deep-nesting   400: 478
//   envelopes      400: 519
//   headers        200: 115, 400: 324
//   huge-body      200: 153, 413: 364
//   huge-maps      200: 263
//   huge-strings   200: 255, 400: 261
//   media-types    413: 20, 415: 472
//   tasks-params   200: 643, 400: 108
//   tools-params   200: 195, 404: 58
// memory (server process), per round:
//   malformed round 1: 5,000 requests in 17.3 s (288 req/s); peak − idle +132.7 MiB, settled − idle +12.8 MiB
//     idle (after a full GC)       rss  131.8 MiB   heapUsed  30.2 MiB of  66.9 MiB   external   3.5 MiB   arrayBuffers   0.1 MiB
//     peak sample during the load  rss  264.5 MiB   heapUsed 159.1 MiB of 192.4 MiB   external   6.6 MiB   arrayBuffers   3.2 MiB
//     at the end of the load       rss  197.2 MiB   heapUsed  70.4 MiB of 116.5 MiB   external  15.9 MiB   arrayBuffers  12.5 MiB
//     settled (after a full GC)    rss  144.6 MiB   heapUsed  31.2 MiB of  68.9 MiB   external   3.5 MiB   arrayBuffers   0.1 MiB
//   malformed round 2: 5,000 requests in 16.6 s (301 req/s); peak − idle +136.8 MiB, settled − idle +12.5 MiB
//   malformed round 3: 5,000 requests in 17.7 s (283 req/s); peak − idle +141.7 MiB, settled − idle +17.4 MiB
//   control round 1: 28,076 requests in 17.4 s (1,617 req/s); peak − idle +137.5 MiB, settled − idle +6.3 MiB
//   control round 2: 25,368 requests in 16.6 s (1,524 req/s); peak − idle +154.3 MiB, settled − idle +7.7 MiB
//   control round 3: 28,444 requests in 17.7 s (1,607 req/s); peak − idle +133.1 MiB, settled − idle +6.4 MiB
// 5xx answers: 0; resets/time-outs: 0
// ordinary load, same duration (median peak − idle): +137.5 MiB; malformed adds −0.7 MiB to it
// peak − idle (median):    +136.8 MiB — target ≤ 150 MiB: PASS
// settled − idle (median): +12.8 MiB — target ≤ 30 MiB: PASS
// ```
//
// Three runs after issue 15 (the demo with the task console on, telemetry loaded with no SDK) on the
// same VM, one with the console off and one with `telemetry: false` (the demo edited for the run):
//
// | run                | ordinary load, peak − idle | malformed adds | peak − idle (target ≤ 150) | settled − idle |
// | ------------------ | -------------------------- | -------------- | -------------------------- | -------------- |
// | as shipped         | +156.1 MiB                 | −5.9 MiB       | +150.3 MiB (MISS)          | +24.4 MiB      |
// | console off        | +155.0 MiB                 | +8.3 MiB       | +163.3 MiB (MISS)          | +18.9 MiB      |
// | `telemetry: false` | +154.6 MiB                 | +5.0 MiB       | +159.6 MiB (MISS)          | +13.5 MiB      |
//
// The ordinary load alone now peaks about 155 MiB above idle, with or without the console and
// telemetry (the run above had control rounds from 133 to 154 MiB), so the absolute target sits
// inside the ordinary load's own swing; what malformed requests add stays within ±10 MiB of it, and
// the settled figure passes. The likely cause of the rise from about 137 MiB: the control rounds of
// the first of these runs served 1,944–2,032 req/s against 1,524–1,617 in the run above, about a
// quarter more requests in the same 16 s, so more garbage between two collections (not checked
// further).

import { Buffer } from 'node:buffer';
import { existsSync, writeFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { cpus, loadavg } from 'node:os';
import { setInterval, setTimeout } from 'node:timers';
import { URL } from 'node:url';
import {
  armHardDeadline,
  askChild,
  exitOnStop,
  fmtInt,
  msSince,
  nowNs,
  positiveEnv,
  PROTOCOL_VERSION,
  requestMeta,
  sleep,
  startChild,
  stopChild,
  verdict,
  fmt,
  recordResults,
} from './common.mjs';

// ---------------------------------------------------------------------------------------------
// Parameters
// ---------------------------------------------------------------------------------------------

const REQUESTS = positiveEnv('BENCH_MALFORMED_REQUESTS', 5_000);
const CONCURRENCY = positiveEnv('BENCH_MALFORMED_CONCURRENCY', 32);
const SEED = positiveEnv('BENCH_MALFORMED_SEED', 20_260_728);
/** Rounds of each load, each on a fresh server; the verdicts read the medians. */
const ROUNDS = positiveEnv('BENCH_MALFORMED_ROUNDS', 3);
const ADAPTER = process.env.BENCH_MALFORMED_ADAPTER ?? 'express';
const ONLY = process.env.BENCH_MALFORMED_ONLY
  ? new Set(process.env.BENCH_MALFORMED_ONLY.split(',').map((s) => s.trim()))
  : undefined;
/** Extra Node flags for the server, e.g. "--max-semi-space-size=4" (BENCH_MALFORMED_SERVER_FLAGS). */
const SERVER_FLAGS = (process.env.BENCH_MALFORMED_SERVER_FLAGS ?? '').split(/\s+/).filter(Boolean);
/** Where to write every memory sample as CSV (BENCH_MALFORMED_TRACE), to see a run's shape. */
const TRACE_FILE = process.env.BENCH_MALFORMED_TRACE;
const TRACE = TRACE_FILE ? [] : undefined;
/** The demo's limit (TasksModule's default maxBodyBytes). */
const MAX_BODY_BYTES = 1_048_576;
const PEAK_TARGET = 150 * 1_048_576;
const SETTLED_TARGET = 30 * 1_048_576;
const SAMPLE_MS = 50;
const WARMUP_REQUESTS = 200;
const REQUEST_TIMEOUT_MS = 30_000;
const HARD_DEADLINE_MS = 400_000;

// ---------------------------------------------------------------------------------------------
// Server side (child process): `node --expose-gc bench/malformed.bench.mjs --serve <adapter>`
// ---------------------------------------------------------------------------------------------

async function serve(adapter) {
  await import('reflect-metadata');
  const { NestFactory } = await import('@nestjs/core');
  const { DemoModule } = await import('../.demo-build/examples/demo.module.js');
  let httpAdapter;
  if (adapter === 'fastify') {
    const { FastifyAdapter } = await import('@nestjs/platform-fastify');
    httpAdapter = new FastifyAdapter();
  } else {
    const { ExpressAdapter } = await import('@nestjs/platform-express');
    httpAdapter = new ExpressAdapter();
  }
  const app = await NestFactory.create(DemoModule, httpAdapter, {
    logger: ['error', 'fatal'],
    forceCloseConnections: true,
  });
  await app.listen(0, '127.0.0.1');
  const { port } = app.getHttpServer().address();
  const memory = () => {
    const { rss, heapUsed, heapTotal, external, arrayBuffers } = process.memoryUsage();
    return { rss, heapUsed, heapTotal, external, arrayBuffers };
  };
  setInterval(() => process.send({ type: 'mem', ...memory() }), SAMPLE_MS);
  process.on('message', (message) => {
    if (message?.type === 'gc') {
      globalThis.gc();
      globalThis.gc();
      // Let the sweeper finish and freed pages go back before reading.
      setTimeout(() => {
        globalThis.gc();
        process.send({ type: 'gc', ...memory() });
      }, 500);
    }
  });
  exitOnStop(app);
  process.send({ type: 'ready', port });
}

class ServerProcess {
  static async start(adapter) {
    const { child, ready } = await startChild(import.meta.url, ['--serve', adapter], {
      execArgv: ['--expose-gc', ...SERVER_FLAGS],
      label: 'server',
    });
    child.once('exit', (code, signal) => {
      if (!stopping) {
        console.error(`the server died (code ${code}, signal ${signal})`);
        process.exit(1);
      }
    });
    return new ServerProcess(child, ready.port);
  }

  constructor(child, port) {
    this.child = child;
    this.port = port;
    this.last = undefined;
    this.peak = undefined;
    child.on('message', (message) => {
      if (message?.type !== 'mem') return;
      if (TRACE) TRACE.push(message);
      this.last = message;
      if (this.peak && message.rss > this.peak.rss) this.peak = message;
    });
  }

  /** Starts tracking the highest RSS sample. */
  trackPeak() {
    this.peak = this.last ?? { rss: 0 };
  }

  /** Full GC in the child, then its memory. */
  gc() {
    return askChild(this.child, 'gc');
  }

  stop() {
    stopping = true;
    return stopChild(this.child);
  }
}
let stopping = false;

// ---------------------------------------------------------------------------------------------
// The malformed requests (seeded)
// ---------------------------------------------------------------------------------------------

/** mulberry32: a small seeded PRNG. */
function prng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}
/** Reset at the start of each malformed round, so every round sends the same requests. */
let random = prng(SEED);
const int = (min, max) => min + Math.floor(random() * (max - min + 1));
const pick = (items) => items[Math.floor(random() * items.length)];

/** A 2026-07-28 message: the per-request _meta envelope, optionally with the tasks extension. */
function rpc(method, params, { id = int(1, 1e6), tasks = true } = {}) {
  return {
    jsonrpc: '2.0',
    ...(id !== undefined && { id }),
    method,
    params: { ...params, _meta: requestMeta('malformed-bench', tasks) },
  };
}

/** The standard headers a client would send for `message`. */
function headersFor(message) {
  const headers = {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': PROTOCOL_VERSION,
    authorization: 'Bearer malformed-bench',
  };
  if (typeof message?.method === 'string') headers['mcp-method'] = message.method;
  const name = message?.params?.name ?? message?.params?.taskId;
  if (typeof name === 'string' && name.length < 200) headers['mcp-name'] = name;
  return headers;
}

const json = (message) => ({ headers: headersFor(message), body: JSON.stringify(message) });

/** Cached big strings, so the client does not spend its time building them. */
const padCache = new Map();
const pad = (length) => {
  let text = padCache.get(length);
  if (!text) padCache.set(length, (text = 'x'.repeat(length)));
  return text;
};
const nested = (levels, open, close) => open.repeat(levels) + '1' + close.repeat(levels);

const wrongTasksParams = () =>
  pick([
    () => rpc('tasks/get', { taskId: 5 }),
    () => rpc('tasks/get', { taskId: `unknown-${int(0, 1e9)}` }),
    () => rpc('tasks/get', {}),
    () => rpc('tasks/cancel', { taskId: [1, 2, 3] }),
    () => rpc('tasks/cancel', { taskId: `unknown-${int(0, 1e9)}` }),
    () => rpc('tasks/update', { taskId: 'no-such-task', inputResponses: 5 }),
    () => rpc('tasks/update', { taskId: 'no-such-task', inputResponses: { a: { action: 1 } } }),
    () => rpc('tasks/get', { taskId: 'x' }, { tasks: false }),
  ])();

/** Each family makes one request: { headers, body (string | Buffer), chunked? }. */
const FAMILIES = {
  'broken-json': 15,
  'huge-body': 10,
  'deep-nesting': 10,
  'huge-strings': 10,
  'huge-maps': 5,
  headers: 10,
  envelopes: 10,
  'media-types': 10,
  'tasks-params': 15,
  'tools-params': 5,
};

const make = {
  'broken-json'() {
    const message = wrongTasksParams();
    const text = JSON.stringify(message);
    const body = pick([
      () => text.slice(0, int(1, text.length - 1)),
      () => text + pick(['}', ']', ',', 'x', '\u0000']),
      () => {
        const at = int(0, text.length - 1);
        return text.slice(0, at) + pick(['{', '"', ':', '\\', 'Ω', ' ']) + text.slice(at + 1);
      },
      () => "{'jsonrpc':'2.0'}",
      () => 'NaN',
      () => '',
    ])();
    return { headers: headersFor(message), body };
  },
  'huge-body'() {
    const size =
      random() < 0.5
        ? int(MAX_BODY_BYTES - 48, MAX_BODY_BYTES + 48)
        : int(MAX_BODY_BYTES + 1, 2 * MAX_BODY_BYTES);
    const base =
      random() < 0.5
        ? (p) => rpc('tasks/get', { taskId: 5, pad: p })
        : (p) => rpc('tools/call', { name: 'echo', arguments: { text: 5, pad: p } });
    const bare = Buffer.byteLength(JSON.stringify(base('')));
    const message = base(pad(Math.max(0, size - bare)));
    return { headers: headersFor(message), body: JSON.stringify(message), chunked: random() < 0.5 };
  },
  'deep-nesting'() {
    const [open, close] = pick([
      ['[', ']'],
      ['{"a":', '}'],
      ['[{"a":', '}]'],
    ]);
    const deep = nested(int(5_000, 10_000), open, close);
    const where = pick(['echo', 'taskId', 'whole', 'unknown']);
    const message =
      where === 'echo'
        ? rpc('tools/call', { name: 'echo', arguments: { text: 5, deep: '@' } })
        : where === 'taskId'
          ? rpc('tasks/get', { taskId: '@' })
          : rpc('x/deep', { deep: '@' });
    const body = where === 'whole' ? deep : JSON.stringify(message).replace('"@"', deep);
    return { headers: headersFor(message), body };
  },
  'huge-strings'() {
    const text = pad(int(20_000, 380_000));
    return json(
      pick([
        () => rpc(pick(['tasks/get', 'tasks/cancel', 'tasks/update']), { taskId: text }),
        () => rpc('tools/call', { name: text, arguments: {} }),
        () => rpc('tools/call', { name: 'echo', arguments: { text: 5, note: text } }),
        () => rpc('tools/call', { name: 'echo', arguments: { text } }, { tasks: false }),
      ])(),
    );
  },
  'huge-maps'() {
    const size = int(1_000, 30_000);
    const map = Object.fromEntries(
      Array.from({ length: size }, (_, i) => [`k${i}`, { action: 'accept' }]),
    );
    return json(
      pick([
        () => rpc('tasks/update', { taskId: `unknown-${int(0, 1e9)}`, inputResponses: map }),
        () => rpc('tools/call', { name: 'echo', arguments: { text: 5, ...map } }),
        () =>
          rpc('tools/call', {
            name: 'add_slowly',
            arguments: Array.from({ length: size }, () => 1),
          }),
      ])(),
    );
  },
  headers() {
    const message = wrongTasksParams();
    const { headers, body } = json(message);
    pick([
      () => delete headers['mcp-method'],
      () => (headers['mcp-method'] = 'tools/list'),
      () => (headers['mcp-name'] = 'someone-else'),
      () => (headers['mcp-protocol-version'] = '1999-01-01'),
      () => delete headers['mcp-protocol-version'],
      () => delete headers.accept,
      () => (headers['content-type'] = 'application/json; charset=latin1'),
    ])();
    return { headers, body };
  },
  envelopes() {
    const good = wrongTasksParams();
    const message = pick([
      () => ({ ...good, jsonrpc: '1.0' }),
      () => ({ ...good, id: { a: 1 } }),
      () => ({ ...good, method: 5 }),
      () => ({ ...good, jsonrpc: undefined }),
      () => [good, good],
      () => [],
      () => null,
      () => 'a string',
      () => 42,
      () => ({ ...good, params: 'x' }),
      () => ({ jsonrpc: '2.0', id: 1, result: {} }),
    ])();
    return { headers: headersFor(good), body: JSON.stringify(message) ?? '' };
  },
  'media-types'() {
    const message = wrongTasksParams();
    const headers = headersFor(message);
    const type = pick([
      'text/plain',
      'application/x-www-form-urlencoded',
      'multipart/form-data; boundary=x',
      'application/xml',
      'application/octet-stream',
      undefined,
    ]);
    if (type === undefined) delete headers['content-type'];
    else headers['content-type'] = type;
    const body = random() < 0.3 ? pad(int(1_000, 900_000)) : JSON.stringify(message);
    return { headers, body, chunked: random() < 0.3 };
  },
  'tasks-params'() {
    return json(wrongTasksParams());
  },
  'tools-params'() {
    return json(
      pick([
        () => rpc('tools/call', { name: 'echo', arguments: { text: 5 } }),
        () => rpc('tools/call', { name: 'no_such_tool', arguments: {} }),
        () => rpc('tools/call', { name: 'add_slowly', arguments: { a: 'x' } }),
        () => rpc('tools/list', { cursor: 5 }),
        () => rpc('x/unknown', {}),
      ])(),
    );
  },
};

const names = Object.keys(FAMILIES).filter((name) => !ONLY || ONLY.has(name));
if (names.length === 0) {
  console.error(
    `BENCH_MALFORMED_ONLY names no family; families: ${Object.keys(FAMILIES).join(', ')}`,
  );
  process.exit(1);
}
const totalWeight = names.reduce((sum, name) => sum + FAMILIES[name], 0);
function nextFamily() {
  let r = random() * totalWeight;
  for (const name of names) {
    r -= FAMILIES[name];
    if (r < 0) return name;
  }
  return names[names.length - 1];
}

// ---------------------------------------------------------------------------------------------
// Load side (this process)
// ---------------------------------------------------------------------------------------------

function send(agent, port, { headers, body, chunked }) {
  const payload = typeof body === 'string' ? Buffer.from(body) : body;
  const finalHeaders = { host: `127.0.0.1:${port}`, ...headers };
  if (!chunked) finalHeaders['content-length'] = String(payload.length);
  return new Promise((resolve) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path: '/mcp',
        method: 'POST',
        headers: finalHeaders,
        agent,
        timeout: REQUEST_TIMEOUT_MS,
      },
      (res) => {
        res.on('end', () => resolve(res.statusCode));
        res.on('error', () => resolve('reset'));
        res.resume();
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', (error) => resolve(error.message === 'timeout' ? 'timeout' : 'reset'));
    req.end(payload);
  });
}

const fmtMiB = (bytes) => `${(bytes / 1_048_576).toFixed(1)} MiB`;
const fmtSigned = (bytes) => `${bytes >= 0 ? '+' : '−'}${fmtMiB(Math.abs(bytes))}`;

/** A fresh server: warmed up with valid requests, then its idle memory after a full GC. */
async function freshServer() {
  const server = await ServerProcess.start(ADAPTER);
  const agent = new Agent({ keepAlive: true, maxSockets: CONCURRENCY });
  // Warm-up: valid requests, so the idle figure includes the code every request loads.
  for (let i = 0; i < WARMUP_REQUESTS; i++) await send(agent, server.port, ordinary(i));
  const idle = await server.gc();
  return { server, agent, idle };
}

/** A small valid request, as ordinary traffic sends (the control load and the warm-up). */
function ordinary(i) {
  const message =
    i % 3 === 0
      ? rpc('tools/call', { name: 'echo', arguments: { text: 'hi' } }, { tasks: false })
      : i % 3 === 1
        ? rpc('tools/list', {})
        : rpc('tasks/get', { taskId: `unknown-${i}` });
  return json(message);
}

/**
 * One round on a fresh server: `malformed` sends REQUESTS seeded malformed requests; `control`
 * sends ordinary requests for `seconds` (the duration of the malformed round before it), so the
 * two peaks compare what V8 lets the heap grow to under any sustained load with what malformed
 * input adds to it.
 */
async function round(kind, seconds) {
  const { server, agent, idle } = await freshServer();
  const statuses = new Map();
  const byFamily = new Map();
  random = prng(SEED);
  let sent = 0;
  const started = nowNs();
  const more = () =>
    kind === 'malformed' ? sent < REQUESTS : msSince(started) < (seconds ?? 0) * 1000;
  server.trackPeak();
  const worker = async () => {
    while (more()) {
      const i = sent++;
      const family = kind === 'malformed' ? nextFamily() : 'ordinary';
      const status = await send(
        agent,
        server.port,
        kind === 'malformed' ? make[family]() : ordinary(i),
      );
      statuses.set(status, (statuses.get(status) ?? 0) + 1);
      const counts = byFamily.get(family) ?? new Map();
      counts.set(status, (counts.get(status) ?? 0) + 1);
      byFamily.set(family, counts);
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  const took = msSince(started) / 1000;
  await sleep(2 * SAMPLE_MS);
  const peak = server.peak;
  const before = server.last;
  agent.destroy();
  const settled = await server.gc();
  await server.stop();
  stopping = false;
  return { kind, idle, peak, before, settled, seconds: took, sent, statuses, byFamily };
}

/** The middle value, the upper one of an even count (not common.mjs's median, which averages). */
const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
};

async function main() {
  armHardDeadline(HARD_DEADLINE_MS, `hard deadline of ${HARD_DEADLINE_MS / 1000} s reached`);
  if (!existsSync(new URL('../.demo-build/examples/demo.module.js', import.meta.url))) {
    console.error(
      'No ../.demo-build/examples/demo.module.js; run `tsc -p tsconfig.examples.json` first (or `npm run bench:malformed`).',
    );
    process.exit(1);
  }
  console.log(
    `malformed-load benchmark: ${fmtInt(REQUESTS)} requests, ${CONCURRENCY} in flight, seed ${SEED}, ` +
      `${ROUNDS} rounds, ${ADAPTER} adapter${SERVER_FLAGS.length ? ` (${SERVER_FLAGS.join(' ')})` : ''}; ` +
      `${cpus().length} CPUs, load ${loadavg()[0].toFixed(2)}; Node ${process.version}`,
  );
  const malformed = [];
  const control = [];
  for (let r = 0; r < ROUNDS; r++) {
    const m = await round('malformed');
    malformed.push(m);
    control.push(await round('control', m.seconds));
  }

  const show = (label, m) =>
    `    ${label.padEnd(28)} rss ${fmtMiB(m.rss).padStart(10)}   heapUsed ${fmtMiB(m.heapUsed).padStart(9)}` +
    ` of ${fmtMiB(m.heapTotal).padStart(9)}` +
    `   external ${fmtMiB(m.external).padStart(9)}   arrayBuffers ${fmtMiB(m.arrayBuffers).padStart(9)}`;
  const first = malformed[0];
  console.log('answers by family in each malformed round (HTTP status: count):');
  for (const [family, counts] of [...first.byFamily].sort()) {
    const list = [...counts]
      .sort()
      .map(([s, n]) => `${s}: ${n}`)
      .join(', ');
    console.log(`  ${family.padEnd(14)} ${list}`);
  }
  let serverErrors = 0;
  let failed = 0;
  for (const r of [...malformed, ...control]) {
    for (const [status, count] of r.statuses) {
      if (typeof status !== 'number') failed += count;
      else if (status >= 500) serverErrors += count;
    }
  }
  console.log('memory (server process), per round:');
  for (const [i, r] of [...malformed, ...control].entries()) {
    const n = (i % ROUNDS) + 1;
    console.log(
      `  ${r.kind} round ${n}: ${fmtInt(r.sent)} requests in ${r.seconds.toFixed(1)} s ` +
        `(${fmtInt(r.sent / r.seconds)} req/s); peak − idle ${fmtSigned(r.peak.rss - r.idle.rss)}, ` +
        `settled − idle ${fmtSigned(r.settled.rss - r.idle.rss)}`,
    );
    if (i === 0) {
      console.log(show('idle (after a full GC)', r.idle));
      console.log(show('peak sample during the load', r.peak));
      console.log(show('at the end of the load', r.before));
      console.log(show('settled (after a full GC)', r.settled));
    }
  }
  if (TRACE) {
    const mib = (n) => (n / 1_048_576).toFixed(1);
    const rows = TRACE.map(
      (m, i) =>
        `${i * SAMPLE_MS},${mib(m.rss)},${mib(m.heapTotal)},${mib(m.heapUsed)},${mib(m.external)}`,
    );
    writeFileSync(TRACE_FILE, `ms,rss,heapTotal,heapUsed,external\n${rows.join('\n')}\n`);
  }
  console.log(
    `5xx answers: ${serverErrors}${serverErrors ? ' (MISS)' : ''}; resets/time-outs: ${failed}`,
  );
  const peakRise = median(malformed.map((r) => r.peak.rss - r.idle.rss));
  const settledRise = median(malformed.map((r) => r.settled.rss - r.idle.rss));
  const controlRise = median(control.map((r) => r.peak.rss - r.idle.rss));
  console.log(
    `ordinary load, same duration (median peak − idle): ${fmtSigned(controlRise)}; ` +
      `malformed adds ${fmtSigned(peakRise - controlRise)} to it`,
  );
  console.log(
    `peak − idle (median):    ${fmtSigned(peakRise)} — target ≤ 150 MiB: ${verdict(peakRise <= PEAK_TARGET)}`,
  );
  console.log(
    `settled − idle (median): ${fmtSigned(settledRise)} — target ≤ 30 MiB: ${verdict(settledRise <= SETTLED_TARGET)}`,
  );
  recordResults([
    [
      `5xx answers to ${fmt(REQUESTS)} malformed requests × ${ROUNDS} rounds`,
      String(serverErrors),
      '0',
      verdict(serverErrors === 0),
    ],
    [
      'server RSS, peak − idle (median of rounds)',
      `malformed ${fmtSigned(peakRise)}; ordinary load ${fmtSigned(controlRise)}`,
      '≤ 150 MiB',
      verdict(peakRise <= PEAK_TARGET),
    ],
    [
      'server RSS, settled after a full GC − idle (median)',
      fmtSigned(settledRise),
      '≤ 30 MiB',
      verdict(settledRise <= SETTLED_TARGET),
    ],
  ]);
}

if (process.argv[2] === '--serve') {
  serve(process.argv[3] ?? 'express').catch((error) => {
    console.error('server failed:', error);
    process.exit(1);
  });
} else {
  main().then(
    () => process.exit(0),
    (error) => {
      console.error(error);
      process.exit(1);
    },
  );
}
