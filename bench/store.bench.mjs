// Store benchmark for nestjs-mcp-tasks.
//
//   npm run bench          (builds dist/, then runs this file)
//   npm run bench:store    (runs this file against the dist/ already built)
//
// Three measurements, each next to a baseline measured in the same run:
//
//   (a) Throughput of create → get → complete cycles through TasksService + InMemoryTaskStore,
//       against a baseline that does only the unavoidable work of such a cycle (random id, two
//       timestamps, three Map operations), once synchronous and once with one `await` per
//       operation (the store API is async, so one await per operation is inherent).
//       Target: subject / baseline ≥ 0.5.
//   (b) Duration of one `store.cleanup()` with 1,000,000 stored tasks of which 1,000 are
//       expired, against one naive full scan over a 1,000,000-entry Map. Target: < 5 ms.
//   (c) Heap bytes per stored `working` task at 100,000 tasks, minus the payload (the 43-char
//       task id string). Target: < 1,000 bytes beyond the payload.
//
// It is a report, not a test: the process exits 0 whether a target is met or missed. It exits
// non-zero only when it cannot run at all (dist/ missing, no --expose-gc, a broken invariant).

import { randomBytes } from 'node:crypto';
import { cpus } from 'node:os';

// The built package. `npm run bench` builds it first; `bench:store` assumes it is there.
let lib;
try {
  lib = await import('../dist/index.js');
} catch (error) {
  console.error('Cannot import ../dist/index.js; run `npm run build` first (or `npm run bench`).');
  console.error(error);
  process.exit(1);
}
const { TasksService, InMemoryTaskStore, resolveTasksConfig, newTask } = lib;

if (typeof global.gc !== 'function') {
  console.error('This benchmark needs the garbage collector exposed: node --expose-gc ...');
  process.exit(1);
}

// ---------------------------------------------------------------------------------------------
// Parameters
// ---------------------------------------------------------------------------------------------

const HOUR = 3_600_000;
const OWNER = Object.freeze({ principal: 'bench' });

/** (a) Warm-up per contender, then ROUNDS rounds of ROUND_MS per contender; medians reported. */
const WARMUP_MS = 500;
const ROUNDS = 5;
const ROUND_MS = 1_000;
/** (a) Cycles between two clock reads (the clock is not read inside the cycle). */
const BATCH = 1_000;
/** (a) The store / baseline Map is emptied every RESET_EVERY cycles, so it stays ≤ 10,000 rows. */
const RESET_EVERY = 10_000;
const CYCLE_TARGET_RATIO = 0.5;

/** (b) Store size, how many of them are expired, and how many times cleanup is timed. */
const CLEANUP_ROWS = 1_000_000;
const CLEANUP_EXPIRED = 1_000;
const CLEANUP_REPEATS = 7;
const SCAN_REPEATS = 5;
const CLEANUP_TARGET_MS = 5;

/** (c) Tasks stored for the heap measurement. */
const HEAP_TASKS = 100_000;
const HEAP_TARGET_BYTES = 1_000;

/** The service configuration: no row limit (the bench controls the size), the default 1 h TTL. */
const CONFIG = resolveTasksConfig({ maxRows: null, defaultTtlMs: HOUR });

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/** The same id the service makes: 32 random bytes, base64url, 43 characters. */
const newId = () => randomBytes(32).toString('base64url');

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
};

const nowNs = () => process.hrtime.bigint();
const msSince = (start) => Number(nowNs() - start) / 1e6;

/** A full, settled collection: two passes so objects freed by the first are gone too. */
function fullGc() {
  global.gc();
  global.gc();
}

function heapUsed() {
  fullGc();
  return process.memoryUsage().heapUsed;
}

const fmtInt = (n) => Math.round(n).toLocaleString('en-US');
const fmtMs = (ms) => `${ms.toFixed(3)} ms`;
const verdict = (ok) => (ok ? 'PASS' : 'MISS');

function assert(condition, message) {
  if (!condition) throw new Error(`Benchmark invariant broken: ${message}`);
}

// ---------------------------------------------------------------------------------------------
// (a) create → get → complete cycles
// ---------------------------------------------------------------------------------------------

// Each contender is { name, setup() → state, batch(state, n) [→ Promise], reset(state) }.
// `batch` runs n cycles; `reset` empties the store/Map (every RESET_EVERY cycles, inside the
// timed window for every contender alike, so no Map grows without bound during a round).

/**
 * Baseline, synchronous: only what any implementation of a cycle must do — a 32-byte random id,
 * an ISO timestamp at creation and one at completion, and three plain Map operations on an
 * object shaped like a task record (set on create, get with an owner check, set on complete).
 */
const syncBaseline = {
  name: 'baseline (sync)',
  setup: () => ({ map: new Map() }),
  reset: (state) => state.map.clear(),
  batch(state, n) {
    const map = state.map;
    for (let i = 0; i < n; i++) {
      // create
      const taskId = newId();
      const createdAt = new Date().toISOString();
      map.set(taskId, {
        taskId,
        owner: OWNER,
        status: 'working',
        createdAt,
        lastUpdatedAt: createdAt,
        ttlMs: HOUR,
        version: 1,
      });
      // get (as the owner)
      const current = map.get(taskId);
      if (current === undefined || current.owner.principal !== OWNER.principal) {
        throw new Error('baseline: task not found');
      }
      // complete: a new record replaces the old one
      map.set(taskId, {
        taskId,
        owner: current.owner,
        status: 'completed',
        createdAt: current.createdAt,
        lastUpdatedAt: new Date().toISOString(),
        ttlMs: current.ttlMs,
        result: { content: [{ type: 'text', text: 'ok' }] },
        version: current.version + 1,
      });
    }
  },
};

/**
 * Baseline, async: the same work, each of the three operations an `async` function that is
 * awaited — the floor for any implementation behind an async store API.
 */
const asyncOps = {
  async create(map) {
    const taskId = newId();
    const createdAt = new Date().toISOString();
    const record = {
      taskId,
      owner: OWNER,
      status: 'working',
      createdAt,
      lastUpdatedAt: createdAt,
      ttlMs: HOUR,
      version: 1,
    };
    map.set(taskId, record);
    return record;
  },
  async get(map, taskId, owner) {
    const current = map.get(taskId);
    if (current === undefined || current.owner.principal !== owner.principal) {
      throw new Error('baseline: task not found');
    }
    return current;
  },
  async complete(map, current, result) {
    const record = {
      taskId: current.taskId,
      owner: current.owner,
      status: 'completed',
      createdAt: current.createdAt,
      lastUpdatedAt: new Date().toISOString(),
      ttlMs: current.ttlMs,
      result,
      version: current.version + 1,
    };
    map.set(current.taskId, record);
    return record;
  },
};

const asyncBaseline = {
  name: 'baseline (async)',
  setup: () => ({ map: new Map() }),
  reset: (state) => state.map.clear(),
  async batch(state, n) {
    const map = state.map;
    for (let i = 0; i < n; i++) {
      const { taskId } = await asyncOps.create(map);
      const current = await asyncOps.get(map, taskId, OWNER);
      await asyncOps.complete(map, current, { content: [{ type: 'text', text: 'ok' }] });
    }
  },
};

/** The subject: the real service over the real in-memory store, exactly as an app calls it. */
const subject = {
  name: 'TasksService + InMemoryTaskStore',
  setup() {
    const store = new InMemoryTaskStore();
    return { store, service: new TasksService(store, null, CONFIG) };
  },
  reset: (state) => state.store.clear(),
  async batch(state, n) {
    const service = state.service;
    for (let i = 0; i < n; i++) {
      const { taskId } = await service.create(OWNER);
      await service.get(taskId, OWNER);
      await service.complete(taskId, { content: [{ type: 'text', text: 'ok' }] });
    }
  },
};

/** Runs `contender` for about `ms` milliseconds on fresh state; returns cycles per second. */
async function cyclesPerSecond(contender, ms) {
  const state = contender.setup();
  fullGc(); // every round starts from the same, collected heap
  const start = nowNs();
  const stopAt = start + BigInt(Math.round(ms * 1e6));
  let cycles = 0;
  let end;
  do {
    await contender.batch(state, BATCH);
    cycles += BATCH;
    if (cycles % RESET_EVERY === 0) contender.reset(state);
    end = nowNs();
  } while (end < stopAt);
  return cycles / (Number(end - start) / 1e9);
}

/** One cycle through each contender, checked, before anything is timed. */
async function checkCycles() {
  const state = subject.setup();
  const created = await state.service.create(OWNER);
  await state.service.get(created.taskId, OWNER);
  const done = await state.service.complete(created.taskId, { content: [] });
  assert(done.status === 'completed' && done.version === 2, 'subject cycle did not complete');
  for (const baseline of [syncBaseline, asyncBaseline]) {
    const s = baseline.setup();
    await baseline.batch(s, 1);
    const [record] = s.map.values();
    assert(record.status === 'completed', `${baseline.name} cycle did not complete`);
  }
}

async function benchCycles() {
  console.log('\n(a) create → get → complete cycles per second');
  console.log(
    `    warm-up ${WARMUP_MS} ms each, then ${ROUNDS} rounds of ~${ROUND_MS} ms per contender,`,
  );
  console.log(
    `    contenders alternating (order rotated each round); store/Map emptied every ${fmtInt(RESET_EVERY)} cycles`,
  );
  await checkCycles();
  const contenders = [syncBaseline, asyncBaseline, subject];
  for (const contender of contenders) await cyclesPerSecond(contender, WARMUP_MS);

  const results = new Map(contenders.map((c) => [c, []]));
  for (let round = 0; round < ROUNDS; round++) {
    const order = contenders.map((_, i) => contenders[(i + round) % contenders.length]);
    for (const contender of order) {
      results.get(contender).push(await cyclesPerSecond(contender, ROUND_MS));
    }
  }

  const width = Math.max(...contenders.map((c) => c.name.length));
  for (const contender of contenders) {
    const rounds = results.get(contender);
    console.log(
      `    ${contender.name.padEnd(width)}  median ${fmtInt(median(rounds)).padStart(9)} cycles/s` +
        `   rounds: ${rounds.map((r) => fmtInt(r)).join(', ')}`,
    );
  }
  const subjectRate = median(results.get(subject));
  const syncRate = median(results.get(syncBaseline));
  const asyncRate = median(results.get(asyncBaseline));
  const vsSync = subjectRate / syncRate;
  const vsAsync = subjectRate / asyncRate;
  console.log(
    `    ratio vs sync baseline:  ${vsSync.toFixed(3)}   (target ≥ ${CYCLE_TARGET_RATIO}) ${verdict(vsSync >= CYCLE_TARGET_RATIO)}`,
  );
  console.log(
    `    ratio vs async baseline: ${vsAsync.toFixed(3)}   (target ≥ ${CYCLE_TARGET_RATIO}) ${verdict(vsAsync >= CYCLE_TARGET_RATIO)}`,
  );
  console.log(
    `    per cycle: subject ${(1e6 / subjectRate).toFixed(2)} µs, sync baseline ${(1e6 / syncRate).toFixed(2)} µs, ` +
      `async baseline ${(1e6 / asyncRate).toFixed(2)} µs`,
  );
  return { subjectRate, syncRate, asyncRate, vsSync, vsAsync };
}

// ---------------------------------------------------------------------------------------------
// (b) cleanup with 1,000,000 stored tasks, 1,000 of them expired
// ---------------------------------------------------------------------------------------------

/** A live task: created within the last hour, 24 h TTL (distinct deadlines, like real traffic). */
const liveRecord = (now) =>
  newTask(newId(), OWNER, { ttlMs: 24 * HOUR }, now - Math.floor(Math.random() * HOUR));

/** An expired task: created 2–3 h ago with a 1 h TTL. */
const expiredRecord = (now) =>
  newTask(newId(), OWNER, { ttlMs: HOUR }, now - 2 * HOUR - Math.floor(Math.random() * HOUR));

async function benchCleanup() {
  console.log(
    `\n(b) cleanup of ${fmtInt(CLEANUP_EXPIRED)} expired tasks among ${fmtInt(CLEANUP_ROWS)} stored`,
  );
  const store = new InMemoryTaskStore();
  /** The same records in a plain Map, for the naive full-scan baseline. */
  const naive = new Map();
  const create = { maxRows: null };

  // The expired tasks sit at random positions among the live ones.
  const fillStart = nowNs();
  const now = Date.now();
  const expiredAt = new Set();
  while (expiredAt.size < CLEANUP_EXPIRED) expiredAt.add(Math.floor(Math.random() * CLEANUP_ROWS));
  for (let i = 0; i < CLEANUP_ROWS; i++) {
    const record = expiredAt.has(i) ? expiredRecord(now) : liveRecord(now);
    await store.create(record, create);
    naive.set(record.taskId, record);
  }
  assert(store.size === CLEANUP_ROWS, 'store was not filled');
  console.log(`    filled in ${(msSince(fillStart) / 1000).toFixed(1)} s`);

  // Baseline: what a cleanup without an expiry index costs — one pass over every entry.
  const scans = [];
  let naiveExpired = 0;
  for (let r = 0; r < SCAN_REPEATS; r++) {
    fullGc();
    const at = Date.now();
    const start = nowNs();
    let expired = 0;
    for (const record of naive.values()) {
      if (record.ttlMs !== null && record.createdAt + record.ttlMs <= at) expired++;
    }
    scans.push(msSince(start));
    naiveExpired = expired;
  }
  assert(naiveExpired === CLEANUP_EXPIRED, `naive scan found ${naiveExpired} expired tasks`);

  // Subject: the store's cleanup; after each run the 1,000 expired tasks are put back.
  const cleanups = [];
  for (let r = 0; r < CLEANUP_REPEATS; r++) {
    if (r > 0) {
      const refillAt = Date.now();
      for (let i = 0; i < CLEANUP_EXPIRED; i++) await store.create(expiredRecord(refillAt), create);
    }
    assert(store.size === CLEANUP_ROWS, `store holds ${store.size} tasks before cleanup`);
    fullGc();
    const start = nowNs();
    const removed = await store.cleanup(Date.now(), { terminalTtlMs: HOUR });
    cleanups.push(msSince(start));
    assert(removed === CLEANUP_EXPIRED, `cleanup removed ${removed} tasks, expected 1000`);
  }
  assert(store.size === CLEANUP_ROWS - CLEANUP_EXPIRED, 'cleanup left the wrong number of tasks');

  const cleanupMs = median(cleanups);
  const scanMs = median(scans);
  console.log(
    `    store.cleanup()         median ${fmtMs(cleanupMs)}   runs: ${cleanups.map((t) => t.toFixed(3)).join(', ')} (ms; first run cold)`,
  );
  console.log(
    `    naive full Map scan     median ${fmtMs(scanMs)}   runs: ${scans.map((t) => t.toFixed(3)).join(', ')} (ms)`,
  );
  console.log(
    `    cleanup / scan: ${(cleanupMs / scanMs).toFixed(4)} (cleanup is ${(scanMs / cleanupMs).toFixed(0)}× faster than a scan)`,
  );
  console.log(
    `    returned ${CLEANUP_EXPIRED} every run   (target < ${CLEANUP_TARGET_MS} ms) ${verdict(cleanupMs < CLEANUP_TARGET_MS)}`,
  );
  return { cleanupMs, scanMs };
}

// ---------------------------------------------------------------------------------------------
// (c) heap bytes per stored working task
// ---------------------------------------------------------------------------------------------

async function benchHeap() {
  console.log(`\n(c) heap per stored working task, ${fmtInt(HEAP_TASKS)} tasks via TasksService.create`);

  // Payload: the 43-char id strings alone. The array is allocated (and filled with a shared
  // placeholder) before the first reading, so the difference is the strings, not the array.
  const ids = new Array(HEAP_TASKS).fill('');
  const idsBefore = heapUsed();
  for (let i = 0; i < HEAP_TASKS; i++) ids[i] = newId();
  const idsAfter = heapUsed();
  const payloadBytes = (idsAfter - idsBefore) / HEAP_TASKS;
  assert(ids[HEAP_TASKS - 1].length === 43, 'unexpected id length');

  // Subject: 100,000 working tasks (no statusMessage) stored through the service. The store
  // keeps them alive; nothing else holds them.
  const store = new InMemoryTaskStore();
  const service = new TasksService(store, null, CONFIG);
  const before = heapUsed();
  for (let i = 0; i < HEAP_TASKS; i++) await service.create(OWNER);
  const after = heapUsed();
  assert(store.size === HEAP_TASKS, 'store does not hold every task');
  const perTask = (after - before) / HEAP_TASKS;
  const beyond = perTask - payloadBytes;

  console.log(`    heapUsed delta                 ${fmtInt(after - before)} bytes`);
  console.log(`    bytes per task                 ${perTask.toFixed(1)}`);
  console.log(`    payload (43-char id string)    ${payloadBytes.toFixed(1)}`);
  console.log(
    `    beyond the payload             ${beyond.toFixed(1)}   (target < ${fmtInt(HEAP_TARGET_BYTES)}) ${verdict(beyond < HEAP_TARGET_BYTES)}`,
  );
  // Used after the readings, so neither the ids nor the service/store can be collected early.
  assert(ids.length === HEAP_TASKS && store.size === HEAP_TASKS && service !== null, 'alive');
  return { perTask, payloadBytes, beyond };
}

// ---------------------------------------------------------------------------------------------
// Main
// ---------------------------------------------------------------------------------------------

const totalStart = nowNs();
console.log('nestjs-mcp-tasks store benchmark');
console.log(
  `node ${process.version}, ${process.platform}/${process.arch}, ${cpus().length}× ${cpus()[0]?.model ?? 'unknown CPU'}`,
);

const a = await benchCycles();
const b = await benchCleanup(); // its 1,000,000 tasks are garbage once it returns
const c = await benchHeap();

const rows = [
  [
    '(a) cycles/s ratio vs sync baseline',
    `${a.vsSync.toFixed(3)} (${fmtInt(a.subjectRate)} vs ${fmtInt(a.syncRate)}/s)`,
    `≥ ${CYCLE_TARGET_RATIO}`,
    verdict(a.vsSync >= CYCLE_TARGET_RATIO),
  ],
  [
    '(a) cycles/s ratio vs async baseline',
    `${a.vsAsync.toFixed(3)} (${fmtInt(a.subjectRate)} vs ${fmtInt(a.asyncRate)}/s)`,
    `≥ ${CYCLE_TARGET_RATIO}`,
    verdict(a.vsAsync >= CYCLE_TARGET_RATIO),
  ],
  [
    '(b) cleanup, 1k expired of 1M',
    `${fmtMs(b.cleanupMs)} (naive scan ${fmtMs(b.scanMs)})`,
    `< ${CLEANUP_TARGET_MS} ms`,
    verdict(b.cleanupMs < CLEANUP_TARGET_MS),
  ],
  [
    '(c) heap beyond payload per task',
    `${c.beyond.toFixed(0)} B (${c.perTask.toFixed(0)} B total, payload ${c.payloadBytes.toFixed(0)} B)`,
    `< ${fmtInt(HEAP_TARGET_BYTES)} B`,
    verdict(c.beyond < HEAP_TARGET_BYTES),
  ],
];
const widths = [0, 1, 2].map((col) => Math.max(...rows.map((row) => row[col].length)));
console.log('\n==================================== SUMMARY ====================================');
for (const row of rows) {
  console.log(
    `${row[0].padEnd(widths[0])}  ${row[1].padEnd(widths[1])}  target ${row[2].padEnd(widths[2])}  ${row[3]}`,
  );
}
console.log(`(total ${(msSince(totalStart) / 1000).toFixed(1)} s)`);
// A report, not a test: a missed target does not fail the run.
process.exitCode = 0;
