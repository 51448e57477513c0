// Helpers every benchmark shares: reading knobs from the environment, medians, time, formatting,
// verdicts, the built package (its public entries only) and apps made of it, task ids and records,
// child processes, the MCP request envelope, and private redis-server and PostgreSQL servers.

import { Buffer } from 'node:buffer';
import { fork, spawnSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { randomFillSync } from 'node:crypto';
import { cpus, loadavg } from 'node:os';
import { clearTimeout, setImmediate, setTimeout } from 'node:timers';
import { fileURLToPath, URL } from 'node:url';
import { freePort } from '../test/support/servers/free-port.mjs';
import { postgresBinDir, startPrivatePostgres } from '../test/support/servers/postgres.mjs';
import { startRedisCluster } from '../test/support/servers/redis-cluster.mjs';
import { startRedis } from '../test/support/servers/redis.mjs';

/** The repository this bench runs from. */
const REPO_ROOT = fileURLToPath(new URL('..', import.meta.url));

// ---------------------------------------------------------------------------------------------
// Knobs, checks, time
// ---------------------------------------------------------------------------------------------

/** A positive integer from the environment, or `fallback`; anything else stops the bench. */
export function positiveEnv(name, fallback) {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isSafeInteger(value) || value <= 0) {
    console.error(`${name} must be a positive integer, got ${JSON.stringify(raw)}`);
    process.exit(1);
  }
  return value;
}

/** Throws when a benchmark's own invariant does not hold (the run then cannot go on). */
export function assert(condition, message) {
  if (!condition) throw new Error(`Benchmark invariant broken: ${message}`);
}

export const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
};

export const nowNs = () => process.hrtime.bigint();
export const msSince = (start) => Number(nowNs() - start) / 1e6;
export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
export const yieldToLoop = () => new Promise((resolve) => setImmediate(resolve));

/**
 * `work(worker)` run by `inFlight` loops at once (`worker` from 0 to inFlight − 1), each calling it
 * again as soon as its call ends, for about `ms`; the calls per second.
 */
export async function inFlightRate(work, inFlight, ms) {
  let done = 0;
  const start = nowNs();
  const end = start + BigInt(Math.round(ms * 1e6));
  const loop = async (worker) => {
    while (nowNs() < end) {
      await work(worker);
      done++;
    }
  };
  await Promise.all(Array.from({ length: inFlight }, (_, worker) => loop(worker)));
  return done / (msSince(start) / 1000);
}

/**
 * `ours` against `baseline` (each a `work` of inFlightRate), `inFlight` calls at once: a warm-up
 * turn of each for `warmUpMs`, then `pairs` pairs of turns of `turnMs`, who goes first
 * alternating, with `reset()` after the warm-up and after each pair. Each side's rates and the
 * per-pair ratios (ours ÷ baseline), in the order measured.
 */
export async function alternatingPairs({
  ours,
  baseline,
  reset,
  inFlight,
  pairs,
  turnMs,
  warmUpMs,
}) {
  await inFlightRate(ours, inFlight, warmUpMs);
  await inFlightRate(baseline, inFlight, warmUpMs);
  await reset();
  const rates = { ours: [], baseline: [] };
  const ratios = [];
  for (let i = 0; i < pairs; i++) {
    let oursRate;
    let baseRate;
    if (i % 2 === 0) {
      oursRate = await inFlightRate(ours, inFlight, turnMs);
      baseRate = await inFlightRate(baseline, inFlight, turnMs);
    } else {
      baseRate = await inFlightRate(baseline, inFlight, turnMs);
      oursRate = await inFlightRate(ours, inFlight, turnMs);
    }
    rates.ours.push(oursRate);
    rates.baseline.push(baseRate);
    ratios.push(oursRate / baseRate);
    await reset();
  }
  return { rates, ratios };
}

/** Waits until `check()` (sync or async) holds, polling every 5 ms; throws after `timeoutMs`. */
export async function until(what, check, timeoutMs) {
  const start = nowNs();
  while (!(await check())) {
    if (msSince(start) > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

/** Runs `work` over `items`, `concurrency` at a time. */
export async function pool(items, concurrency, work) {
  let next = 0;
  const worker = async () => {
    while (next < items.length) await work(items[next++]);
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, worker));
}

/**
 * Ends the process after `ms` whatever happens (an unref'd timer, so it never keeps it alive):
 * prints `message`, runs `beforeExit`, exits 1.
 */
export function armHardDeadline(
  ms,
  message = `\nThe benchmark ran past ${ms / 1000} s; stopping.`,
  beforeExit = () => undefined,
) {
  // Named: the soak benchmark lists live timers by their callback's name.
  const timer = setTimeout(function hardDeadline() {
    console.error(message);
    beforeExit();
    process.exit(1);
  }, ms);
  timer.unref();
  return timer;
}

// ---------------------------------------------------------------------------------------------
// Formatting and reporting
// ---------------------------------------------------------------------------------------------

export const fmt = (n, digits = 0) =>
  n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
export const fmtInt = (n) => Math.round(n).toLocaleString('en-US');
export const fmtMiB = (bytes) => `${fmt(bytes / 1_048_576, 2)} MiB`;
export const fmtSignedKiB = (bytes) =>
  `${bytes >= 0 ? '+' : '−'}${fmt(Math.abs(bytes) / 1024, 1)} KiB`;
export const verdict = (ok) => (ok ? 'PASS' : 'MISS');

/** `Node <version>, <n> CPUs (<model>), load average <1> <5> <15>` (no final period). */
export function machineLine() {
  return (
    `Node ${process.version}, ${cpus().length} CPUs (${cpus()[0]?.model ?? 'unknown'}), load ` +
    `average ${loadavg()
      .map((n) => n.toFixed(2))
      .join(' ')}`
  );
}

/** `node <version>, <platform>/<arch>, <n>× <model>`. */
export function platformLine() {
  return `node ${process.version}, ${process.platform}/${process.arch}, ${cpus().length}× ${cpus()[0]?.model ?? 'unknown CPU'}`;
}

/** The SUMMARY block: one line per `[what, figure, target, verdict]` row, in aligned columns. */
export function printTargetTable(rows) {
  recordResults(rows);
  const widths = [0, 1, 2].map((col) => Math.max(...rows.map((row) => row[col].length)));
  console.log(
    '\n==================================== SUMMARY ====================================',
  );
  for (const row of rows) {
    console.log(
      `${row[0].padEnd(widths[0])}  ${row[1].padEnd(widths[1])}  target ${row[2].padEnd(widths[2])}  ${row[3]}`,
    );
  }
}

/**
 * With `BENCH_RECORD=1`, writes a bench's summary rows (`[measure, result, target, verdict]`) to
 * `bench/results/<bench>.json`, with the date, the commit and the machine; `npm run docs:figures`
 * (scripts/bench-docs.mjs) renders them into the docs pages that quote them. Without it, nothing
 * is written: a run for a look leaves the recorded figures alone.
 */
export function recordResults(
  rows,
  bench = basename(process.argv[1] ?? '').replace(/\.bench\.mjs$/, ''),
) {
  if (process.env.BENCH_RECORD !== '1' || rows.length === 0) return;
  const git = (...args) =>
    spawnSync('git', args, { cwd: REPO_ROOT, encoding: 'utf8' }).stdout?.trim() ?? '';
  const dirty =
    git('status', '--porcelain', '--', 'src', 'bench', 'examples', ':!bench/results') !== '';
  const record = {
    bench,
    command: `npm run bench:${bench}`,
    measuredAt: new Date().toISOString(),
    commit: `${git('rev-parse', '--short', 'HEAD') || 'unknown'}${dirty ? ' (with local changes)' : ''}`,
    machine: machineLine(),
    rows: rows.map(([measure, result, target, verdict]) => ({ measure, result, target, verdict })),
  };
  const dir = join(REPO_ROOT, 'bench/results');
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, `${bench}.json`), `${JSON.stringify(record, null, 2)}\n`);
  console.log(
    `\nRecorded in bench/results/${bench}.json (npm run docs:figures puts it in the docs).`,
  );
}

// ---------------------------------------------------------------------------------------------
// The heap
// ---------------------------------------------------------------------------------------------

/** Stops the bench unless Node runs with `--expose-gc`. */
export function requireGc() {
  if (typeof globalThis.gc !== 'function') {
    console.error('This benchmark needs the garbage collector exposed: node --expose-gc ...');
    process.exit(1);
  }
}

/** A full, settled collection: two passes so objects freed by the first are gone too. */
export function fullGc() {
  globalThis.gc();
  globalThis.gc();
}

/** The heap in use after a full collection. */
export function heapUsed() {
  fullGc();
  return process.memoryUsage().heapUsed;
}

// ---------------------------------------------------------------------------------------------
// The built package
// ---------------------------------------------------------------------------------------------

/**
 * The package's public entries the benchmarks use. They import nothing else from dist/: what they
 * need beyond these entries they get from Nest (`tasksContext`, `providerNamed` below) or build
 * themselves (`newTaskId`, `taskRecord`).
 */
const PUBLIC_ENTRIES = [
  'nestjs-mcp-tasks',
  'nestjs-mcp-tasks/store',
  'nestjs-mcp-tasks/redis',
  'nestjs-mcp-tasks/postgres',
];

/** The names of those entries the benchmarks use; a missing one stops the bench with a hint. */
const USED_NAMES = [
  'TasksModule',
  'TasksService',
  'TaskStore',
  'TaskNotifier',
  'InMemoryTaskStore',
  'toWire',
  'RedisTaskStore',
  'RedisTaskNotifier',
  'redisNotifier',
  'PostgresTaskStore',
];

/**
 * The built package (`npm run build`): its public entries, in one object. Stops the bench with a
 * hint when dist/ is missing or no longer exports a name the benchmarks use.
 */
export async function loadBuiltPackage() {
  const lib = {};
  try {
    const parts = await Promise.all(PUBLIC_ENTRIES.map((path) => import(path)));
    Object.assign(lib, ...parts);
  } catch (error) {
    console.error(
      'Cannot import nestjs-mcp-tasks; run `npm run build` first (or `npm run bench`).',
    );
    console.error(error);
    process.exit(1);
  }
  const missing = USED_NAMES.filter((name) => lib[name] === undefined);
  if (missing.length > 0) {
    console.error(
      `The public entries (${PUBLIC_ENTRIES.join(', ')}) lack ${missing.join(', ')}; ` +
        'the benchmarks must follow the public API.',
    );
    process.exit(1);
  }
  return lib;
}

/**
 * TasksService as an app gets it: a Nest application context (no HTTP) importing
 * `TasksModule.forRoot({ path: false, janitor: false, ...options })`. `options` are the module's
 * own: `store` / `notifier` as an instance, a class or a recipe (`notifier: null` turns
 * notifications off), `maxRows`, `defaultTtlMs`, ... Returns the app, the service, the store and
 * the notifier it injected (`null` when off), and `close()` (idempotent), which the caller owes.
 */
export async function tasksContext(lib, options = {}) {
  const { NestFactory } = await import('@nestjs/core');
  const app = await NestFactory.createApplicationContext(
    lib.TasksModule.forRoot({ path: false, janitor: false, ...options }),
    // abortOnError false: a failed start throws (and is printed) instead of a silent exit(1).
    { logger: false, abortOnError: false },
  );
  let closing;
  return {
    app,
    service: app.get(lib.TasksService),
    store: app.get(lib.TaskStore),
    notifier: app.get(lib.TaskNotifier),
    close: () => (closing ??= app.close()),
  };
}

/**
 * The one provider instance of class `className` in `app`, found through Nest's public
 * DiscoveryService, for the diagnostic counters some benchmarks read (e.g. `ListenHandler.size`)
 * without importing a class no public entry exports. Stops the bench when there is none (or
 * several): the class was renamed or is provided another way, and the bench must follow.
 */
export async function providerNamed(app, className) {
  const { DiscoveryService } = await import('@nestjs/core');
  let discovery;
  try {
    discovery = app.get(DiscoveryService, { strict: false });
  } catch {
    console.error(
      `Cannot look up ${className}: the app has no DiscoveryService (import DiscoveryModule ` +
        'from @nestjs/core in the bench app).',
    );
    process.exit(1);
  }
  const instances = new Set(
    discovery
      .getProviders()
      .filter((wrapper) => wrapper.metatype?.name === className && wrapper.instance)
      .map((wrapper) => wrapper.instance),
  );
  if (instances.size !== 1) {
    console.error(
      `Expected one provider of class ${className} in the app, found ${instances.size}; was it ` +
        'renamed or provided another way? The bench reads its counters and must follow.',
    );
    process.exit(1);
  }
  return [...instances][0];
}

/**
 * A Nest app (Express adapter, no logger) on a free loopback port, importing
 * `TasksModule.forRoot(options)` from the built package. `beforeListen(app)` runs before the app
 * initialises, so routes it registers come before Nest's routes and parsers. `connections()`
 * counts the server's open connections.
 */
export async function startTasksApp(lib, options, beforeListen = () => undefined) {
  const { Module } = await import('@nestjs/common');
  const { DiscoveryModule, NestFactory } = await import('@nestjs/core');
  const { ExpressAdapter } = await import('@nestjs/platform-express');
  class BenchModule {}
  // DiscoveryModule: for providerNamed, whatever the package itself imports.
  Reflect.decorate(
    [Module({ imports: [DiscoveryModule, lib.TasksModule.forRoot(options)] })],
    BenchModule,
  );
  const app = await NestFactory.create(BenchModule, new ExpressAdapter(), {
    logger: false,
    forceCloseConnections: true,
  });
  beforeListen(app);
  await app.listen(0, '127.0.0.1');
  const server = app.getHttpServer();
  return {
    app,
    port: server.address().port,
    connections: () =>
      new Promise((resolve, reject) =>
        server.getConnections((error, count) => (error ? reject(error) : resolve(count))),
      ),
  };
}

// ---------------------------------------------------------------------------------------------
// Task ids and records, as the service makes them
// ---------------------------------------------------------------------------------------------

const ID_BYTES = 32;
const IDS_PER_FILL = 128;
const idPool = Buffer.alloc(ID_BYTES * IDS_PER_FILL);
let idOffset = idPool.length;

/**
 * A task id made the way the service makes its own (the same algorithm as src/task-id.ts, copied
 * so the baselines pay the same id cost without importing a dist/ internal): 32 random bytes from
 * the CSPRNG, drawn in batches of 128 ids with randomFillSync, base64url without padding (43
 * characters); each slice is wiped once encoded.
 */
export function newTaskId() {
  if (idOffset === idPool.length) {
    randomFillSync(idPool);
    idOffset = 0;
  }
  const end = idOffset + ID_BYTES;
  const id = idPool.toString('base64url', idOffset, end);
  idPool.fill(0, idOffset, end);
  idOffset = end;
  return id;
}

/**
 * A new `working` task record, to fill a TaskStore directly. The record's shape is the TaskStore
 * port's public contract (the `TaskRecord` type of the public entry, src/task/record.ts); this
 * mirrors `newTask` in src/task/transitions.ts field for field and in the same order (so records
 * share V8's hidden class with the service's). Last comes `bytes`, what the record keeps from
 * clients and tools as TasksService counts it before every write (see `sized`), so a store that
 * counts its bytes reads the size from the record as it does for the service's. A bench using it
 * checks once, against a record the service made, that the keys still agree.
 */
export function taskRecord(taskId, owner, params, now) {
  const record = {
    taskId,
    owner: { principal: owner.principal, tenant: owner.tenant ?? null },
    status: 'working',
    createdAt: now,
    lastUpdatedAt: now,
    ttlMs: params.ttlMs,
    version: 1,
  };
  if (params.pollIntervalMs !== undefined) record.pollIntervalMs = params.pollIntervalMs;
  if (params.statusMessage !== undefined) record.statusMessage = params.statusMessage;
  return sized(record);
}

/** The parts of a record TasksService's `keptBytes` counts (src/task/rules.ts), as JSON. */
const KEPT_PARTS = [
  'inputRequests',
  'usedInputKeys',
  'inputResponses',
  'result',
  'error',
  'arguments',
];

/**
 * Sets `record.bytes` as TasksService does before it writes a record (its `keptBytes`): the UTF-8
 * bytes of the status message and of the JSON of each part it keeps from clients and tools (a new
 * key goes last, where the service's goes). Returns the record. For a record a bench derives from
 * another (a `completed` copy of a `working` one), so its size is its own and not the copy's.
 */
export function sized(record) {
  let bytes = record.statusMessage === undefined ? 0 : Buffer.byteLength(record.statusMessage);
  for (const part of KEPT_PARTS) {
    if (record[part] !== undefined) bytes += Buffer.byteLength(JSON.stringify(record[part]));
  }
  record.bytes = bytes;
  return record;
}

/**
 * Decorates the method `target[key]` as TypeScript's emitted code does (plain JavaScript has no
 * decorator syntax). Needs `reflect-metadata` loaded, as every bench that uses Nest does.
 */
export function decorateMethod(decorators, target, key) {
  const descriptor = Object.getOwnPropertyDescriptor(target, key);
  Object.defineProperty(target, key, Reflect.decorate(decorators, target, key, descriptor));
}

/**
 * Checks that `taskRecord` still builds what the service makes: the same keys, each with a value
 * of the same type, as the record `service.create(owner)` stored in `store`. A bench calls it once,
 * before anything is measured, so the builder cannot drift from the library unnoticed.
 */
export async function checkTaskRecordShape(service, store, owner) {
  const { taskId } = await service.create(owner);
  const stored = await store.get(taskId);
  assert(stored !== null, 'the created task is not in the store');
  const built = taskRecord(newTaskId(), owner, { ttlMs: 3_600_000 }, Date.now());
  const shape = (record) =>
    Object.keys(record)
      .map((key) => `${key}: ${record[key] === null ? 'null' : typeof record[key]}`)
      .sort()
      .join(', ');
  assert(
    shape(stored) === shape(built),
    `the bench's taskRecord (common.mjs) no longer matches the service's records: ` +
      `service { ${shape(stored)} }, bench { ${shape(built)} }`,
  );
}

// ---------------------------------------------------------------------------------------------
// Child processes: the benchmark's own file run again with other arguments, over IPC
// ---------------------------------------------------------------------------------------------

/**
 * Forks the module at `moduleUrl` (a bench's `import.meta.url`) with `args`, stdout and stderr
 * shared, and waits for its first IPC message (its "ready"): resolves `{ child, ready }`. Rejects
 * when it exits first or says nothing in 30 s; the errors start with `label`.
 */
export function startChild(moduleUrl, args, { execArgv = [], label }) {
  const child = fork(fileURLToPath(moduleUrl), args, {
    execArgv,
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${label}: no answer in 30 s`)), 30_000);
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`${label}: exited with ${code} at start`)));
    child.once('message', (ready) => {
      clearTimeout(timer);
      child.removeAllListeners('exit');
      resolve({ child, ready });
    });
  });
}

/**
 * Sends `request` to a child (a message `{ type, … }`, or its type alone) and resolves the
 * child's first answer of the same type.
 */
export function askChild(child, request) {
  const message = typeof request === 'string' ? { type: request } : request;
  return new Promise((resolve) => {
    const onMessage = (answer) => {
      if (answer?.type !== message.type) return;
      child.off('message', onMessage);
      resolve(answer);
    };
    child.on('message', onMessage);
    child.send(message);
  });
}

/** Asks a child server process to stop (IPC `{ type: 'stop' }`); SIGKILL after 10 s. */
export function stopChild(child) {
  if (child.exitCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      resolve();
    }, 10_000);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    child.send({ type: 'stop' });
  });
}

/**
 * In a child server process, the other end of stopChild: `{ type: 'stop' }` closes the app, then
 * exits (a normal end, so --cpu-prof writes its profile); a lost parent ends it at once.
 */
export function exitOnStop(app) {
  process.on('message', (message) => {
    if (message?.type === 'stop') {
      app.close().then(
        () => process.exit(0),
        () => process.exit(1),
      );
    }
  });
  process.on('disconnect', () => process.exit(0));
}

// ---------------------------------------------------------------------------------------------
// The MCP wire: requests as a 2026-07-28 client sends them
// ---------------------------------------------------------------------------------------------

export const PROTOCOL_VERSION = '2026-07-28';
export const TASKS_EXTENSION = 'io.modelcontextprotocol/tasks';
/** The previous revision (SEP-1686 tasks): no per-request envelope, the era the endpoint also serves. */
export const LEGACY_PROTOCOL_VERSION = '2025-11-25';

/** The per-request `_meta` envelope of client `clientName`, with the tasks extension or not. */
export function requestMeta(clientName, tasks = true) {
  return {
    'io.modelcontextprotocol/protocolVersion': PROTOCOL_VERSION,
    'io.modelcontextprotocol/clientInfo': { name: clientName, version: '1.0.0' },
    'io.modelcontextprotocol/clientCapabilities': tasks
      ? { extensions: { [TASKS_EXTENSION]: {} } }
      : {},
  };
}

/** The `subscriptions/listen` request body: one task id, the tasks extension declared. */
export function listenBody(id, taskId, clientName) {
  return JSON.stringify({
    jsonrpc: '2.0',
    id,
    method: 'subscriptions/listen',
    params: { notifications: { taskIds: [taskId] }, _meta: requestMeta(clientName) },
  });
}

/** The raw HTTP/1.1 bytes of a listen POST to `path`, for a plain TCP socket. */
export function listenRequest(path, port, body) {
  return (
    `POST ${path} HTTP/1.1\r\n` +
    `Host: 127.0.0.1:${port}\r\n` +
    'Content-Type: application/json\r\n' +
    'Accept: application/json, text/event-stream\r\n' +
    `MCP-Protocol-Version: ${PROTOCOL_VERSION}\r\n` +
    'Mcp-Method: subscriptions/listen\r\n' +
    `Content-Length: ${Buffer.byteLength(body)}\r\n` +
    // So that an answer which is no stream (a JSON-RPC error) ends with the connection.
    'Connection: close\r\n' +
    '\r\n' +
    body
  );
}

// ---------------------------------------------------------------------------------------------
// Loopback ports, a private redis-server and Redis Cluster
// ---------------------------------------------------------------------------------------------

export { freePort };

/**
 * The Redis of a bench: REDIS_URL when set, else a private redis-server from PATH on a free
 * loopback port, in a temporary directory (`name` in its name) and without persistence
 * (test/support/servers/redis.mjs, as the tests start theirs). `track(halt)` gets at once a
 * synchronous `halt()` that kills the server and removes its directory, for the caller's hard
 * deadline. Exits the process with a message when there is neither.
 * @returns {Promise<{ url: string, own: boolean, stop(): Promise<void> }>}
 */
export function startBenchRedis(name, track = () => undefined) {
  return startRedis({
    name: `bench-${name}`,
    persistence: false,
    track,
    onMissing: () => {
      console.error('This benchmark needs redis-server on PATH, or REDIS_URL.');
      process.exit(1);
    },
  });
}

/**
 * The Redis Cluster of a bench: REDIS_CLUSTER_NODES (`host:port,host:port,…`) when set, else three
 * private redis-servers from PATH in a temporary directory (`name` in its name), no replicas, no
 * persistence (test/support/servers/redis-cluster.mjs). `track(halt)` gets at once a synchronous
 * `halt()` that kills the servers and removes their directory, for the caller's hard deadline.
 * Exits the process with a message when redis-server or redis-cli is missing.
 * @returns {Promise<{ nodes: { host: string, port: number }[], own: boolean, stop(): Promise<void> }>}
 */
export function startBenchRedisCluster(name, track = () => undefined) {
  return startRedisCluster({
    name: `bench-${name}`,
    track,
    onMissing: (tools) => {
      console.error(`This benchmark needs ${tools.join(' and ')} on PATH, or REDIS_CLUSTER_NODES.`);
      process.exit(1);
    },
  });
}

/**
 * Wraps `client.sendCommand` of an ioredis client, the one door every command goes through
 * (scripts and pipelines included): counts commands, and round trips as the commands sent while
 * none of the client's is in flight (so commands sent together, under Promise.all or in one
 * pipeline, count as one round trip). bench/redis checks this counting against MONITOR.
 */
export function countRedisCommands(client) {
  const counts = { commands: 0, roundTrips: 0, inFlight: 0 };
  const send = client.sendCommand;
  client.sendCommand = function (command, stream) {
    counts.commands++;
    if (counts.inFlight === 0) counts.roundTrips++;
    counts.inFlight++;
    const settled = () => {
      counts.inFlight--;
    };
    command.promise.then(settled, settled);
    return send.call(this, command, stream);
  };
  return counts;
}

/** Clock ticks per second of /proc's CPU times (USER_HZ; 100 on every common Linux build). */
export const CLOCK_TICKS =
  Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout) || 100;

/**
 * CPU time (µs) of process `pid` and of its children, alive or reaped, from /proc: utime + stime
 * of each, and `pid`'s cutime + cstime, where the CPU of the children it reaped goes (a
 * PostgreSQL postmaster's closed backends), so the sum never drops.
 */
export function processTreeCpuUs(pid) {
  let ticks = 0;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let stat;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue; // gone meanwhile
    }
    // The command name (field 2) may hold spaces: the fields after it start past its ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (Number(entry) === pid) ticks += Number(fields[13]) + Number(fields[14]);
    if (Number(entry) === pid || Number(fields[1]) === pid) {
      ticks += Number(fields[11]) + Number(fields[12]);
    }
  }
  return (ticks / CLOCK_TICKS) * 1e6;
}

const infoNumber = (info, field) => Number(new RegExp(`${field}:([\\d.]+)`).exec(info)?.[1] ?? NaN);

/** A number of a Redis node's `INFO <section>` (`used_memory`, `used_cpu_user`, …), or NaN. */
export async function redisInfoNumber(client, section, field) {
  return infoNumber(await client.info(section), field);
}

/** A Redis node's CPU time so far, in µs (one `INFO cpu`: user + system). */
export async function redisCpuUs(client) {
  const info = await client.info('cpu');
  return (infoNumber(info, 'used_cpu_user') + infoNumber(info, 'used_cpu_sys')) * 1e6;
}

/** Removes every key under `prefix` (SCAN and UNLINK, 1,000 at a time). */
export async function removeRedisKeys(client, prefix) {
  let cursor = '0';
  do {
    const [next, keys] = await client.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
    if (keys.length > 0) await client.unlink(...keys);
    cursor = next;
  } while (cursor !== '0');
}

// ---------------------------------------------------------------------------------------------
// A private PostgreSQL
// ---------------------------------------------------------------------------------------------

/**
 * The PostgreSQL of a bench: POSTGRES_URL when set, else a private server (initdb into a temporary
 * directory, `name` in its name, on a free loopback port; as the `postgres` user when run as
 * root), started with `settings` (`-c` options: `{ shared_buffers: '128MB' }`) and stopped with its
 * directory removed by `stop()`. `track(halt)` gets at once a synchronous `halt()` that stops the
 * server immediately, for the caller's hard deadline. `pid()` is the postmaster's process id
 * (null with POSTGRES_URL), whose children are the server's processes. Exits with a message when
 * there is neither PostgreSQL nor POSTGRES_URL.
 * @returns {Promise<{ url: string, own: boolean, pid(): number | null, stop(): Promise<void> }>}
 */
export async function startBenchPostgres(name, settings = {}, track = () => undefined) {
  if (process.env.POSTGRES_URL) {
    return {
      url: process.env.POSTGRES_URL,
      own: false,
      pid: () => null,
      stop: async () => undefined,
    };
  }
  const bin = postgresBinDir();
  if (bin === undefined) {
    console.error(
      'This benchmark needs PostgreSQL (apt-get install -y postgresql, or PG_BIN), or POSTGRES_URL.',
    );
    process.exit(1);
  }
  const server = await startPrivatePostgres({ bin, name: `bench-${name}`, settings, track });
  return {
    url: server.url,
    own: true,
    pid: server.pid,
    stop: async () => {
      try {
        server.stop('fast');
      } finally {
        server.remove();
      }
    },
  };
}
