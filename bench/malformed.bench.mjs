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
