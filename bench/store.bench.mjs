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
// TasksService comes from the public entry as an app gets it: `TasksModule.forRoot(...)` in a Nest
// application context (no HTTP; `tasksContext` in common.mjs). The 1,000,000 records of (b) are
// built by the bench (`taskRecord` in common.mjs, the TaskRecord shape of the TaskStore port),
// checked once at start-up against a record the service made.
//
// It is a report, not a test: the process exits 0 whether a target is met or missed. It exits
// non-zero only when it cannot run at all (dist/ missing, no --expose-gc, a broken invariant).
//
// -----------------------------------------------------------------------------------------------
// Method, in detail:
//
// `bench/store.bench.mjs` is plain ESM JavaScript. It imports the built package's public entry
// (`nestjs-mcp-tasks`) and gets `TasksService` as an app does: a Nest application context (no HTTP)
// importing `TasksModule.forRoot({ path: false, janitor: false, maxRows: null,
// maxTasksPerOwner: 1_000_000, defaultTtlMs: 3_600_000, notifier: null })` (`tasksContext` in
// `bench/common.mjs`), closed after
// use. It needs `node --expose-gc` (the script sets it), takes about 40 s and stops by itself. It is a
// report, not a test: it exits 0 whether a target is met or missed, and non-zero only if it cannot
// run (no `dist/`, no `--expose-gc`, or a broken invariant such as a wrong cleanup count).
//
// Every figure is measured next to its baseline in the same run. The output ends with a summary block:
// each figure, its target, and PASS or MISS.
//
// ## What it measures
//
// **(a) create → get → complete cycles per second.** One cycle is
// `await service.create(owner)`, `await service.get(id, owner)` and
// `await service.complete(id, { content: [{ type: 'text', text: 'ok' }] })` on an `InMemoryTaskStore`.
// The baselines do only the work every implementation must do: a 32-byte random id, made the way the
// service makes its own (`newTaskId` in `bench/common.mjs`, the algorithm of `src/task-id.ts`: 32
// bytes of the CSPRNG drawn 128 ids at a time with `randomFillSync`, base64url, 43 characters), two
// ISO timestamps, and three `Map` operations on a record-like object (set on create, get with an
// owner check, set on complete):
//
// - **sync baseline**: everything runs inline, with no promises.
// - **async baseline**: each of the three operations is an awaited `async` function. The store API
//   is async, so one await per operation cannot be avoided.
//
// After a warm-up, the contenders run 5 rounds of about 1 s each. Their order rotates from round to
// round. The script gives the median cycles/s for each contender, and the median of the per-round
// ratios (subject ÷ baseline). **Target: ratio ≥ 0.5.** To keep garbage-collection noise comparable,
// the store or the baseline `Map` is emptied every 10,000 cycles, and a full GC runs before each
// round. Context lines (no target) show the cost of the id alone, pooled as above and with one
// `randomBytes(32)` call per id: `randomBytes` makes a syscall, and what that costs varies a lot from
// machine to machine. The last context line gives the ratios with the id cost taken out of every
// contender.
//
// **(b) cleanup with 1,000,000 stored tasks, 1,000 of them expired.** The script fills the store
// directly with `store.create(record, { maxRows: null })`, on a `new InMemoryTaskStore()`. The records
// come from `taskRecord` in `bench/common.mjs`, which builds a new `working` record field for field as
// the service does (the `TaskRecord` shape is the TaskStore port's public contract). At start-up the
// bench checks, once, that a record `TasksService.create` stored has the same keys, with values of the
// same types, as one `taskRecord` builds, and stops if not. It adds 999,000 live tasks with a 24 h
// TTL, and 1,000 tasks created 2–3 h ago with a 1 h TTL, at random positions. Then it times
// `store.cleanup(Date.now(), { terminalTtlMs: 3_600_000 })` with `process.hrtime.bigint()` and checks
// that the call returned exactly 1000. This runs 7 times, and before each run after the first the
// 1,000 expired tasks are added again. The script reports the median, with the first (cold) run shown
// too. **Target: < 5 ms.** The baseline is one naive full scan over a 1,000,000-entry `Map` that
// checks each record's expiry: the cost of a cleanup without an expiry index.
//
// The refilled tasks are freshly allocated and still in the CPU cache, which makes those runs
// optimistic. Line (b') is there for context. At fill time, 7 more batches of 1,000 tasks are placed
// at random positions; they are live at fill time and expire one batch per hour, hours later. Each
// (b') run calls `cleanup` with the instant at which one batch has expired, so it removes 1,000
// _old, scattered_ records. That is what a real janitor sees.
//
// **(c) heap bytes per stored working task.** The script reads `heapUsed` after a full GC, creates
// 100,000 tasks through `service.create(owner)` (no `statusMessage`), runs a full GC and reads
// `heapUsed` again, then divides the difference by 100,000. The store keeps the tasks alive. The
// payload is measured the same way: 100,000 ids made like the service makes them, stored in an
// array that was allocated before the first reading. **Target: < 1,000 bytes per task beyond the
// payload.**
//
// Figures from a shared 2-vCPU VM vary by ±20 % from run to run. The ratios and medians are more
// stable than the raw rates.

import { randomBytes } from 'node:crypto';
import {
  assert,
  checkTaskRecordShape,
  fmtInt,
  fullGc,
  heapUsed,
  loadBuiltPackage,
  median,
  msSince,
  newTaskId,
  nowNs,
  platformLine,
  printTargetTable,
  requireGc,
  taskRecord,
  tasksContext,
  verdict,
} from './common.mjs';

// The built package. `npm run bench` builds it first; `bench:store` assumes it is there.
const lib = await loadBuiltPackage();
const { InMemoryTaskStore } = lib;

requireGc();

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

/**
 * The module's options: no row limit (the bench controls the size), a per-owner quota no owner
 * here reaches (one owner makes every task, 100,000 at most in (c)), so the count still runs on
 * every create but never refuses or makes room, the default 1 h TTL, the in-memory store (the
 * default), no notifier (nothing listens here).
 */
const MODULE_OPTIONS = Object.freeze({
  maxRows: null,
  maxTasksPerOwner: 1_000_000,
  defaultTtlMs: HOUR,
  notifier: null,
});

/** TasksService over a fresh InMemoryTaskStore, from the module (close the context after use). */
async function serviceContext() {
  const ctx = await tasksContext(lib, MODULE_OPTIONS);
  assert(ctx.store instanceof InMemoryTaskStore, 'the store is not the in-memory store');
  return ctx;
}

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/**
 * The same id the service makes, by the same algorithm (common.mjs copies src/task-id.ts): 32
 * random bytes (drawn from the CSPRNG in batches of 128 ids), base64url, 43 characters. The
 * baselines use it too, so the id costs both sides the same and the ratio measures what the
 * library adds.
 */
const newId = newTaskId;
/** For context only: one CSPRNG call per id, what a naive implementation pays. */
const newIdUnpooled = () => randomBytes(32).toString('base64url');

const fmtMs = (ms) => `${ms.toFixed(3)} ms`;

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

/**
 * The subject: the real service over the real in-memory store, from the module, exactly as an app
 * calls it. One context serves every round; each round starts on an emptied store.
 */
const subjectContender = (ctx) => ({
  name: 'TasksService + InMemoryTaskStore',
  setup() {
    ctx.store.clear();
    return { store: ctx.store, service: ctx.service };
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
});

/**
 * Context only (no target): the 32-byte random id alone, the one cost every contender shares.
 * Shown so the ratios can be read on machines where randomBytes is unusually slow or fast.
 */
const idOnly = {
  name: 'context: id only (pooled)',
  setup: () => ({ sink: 0 }),
  reset: () => {},
  batch(state, n) {
    for (let i = 0; i < n; i++) state.sink += newId().length;
  },
};

/** Context only (no target): one randomBytes(32) call per id, what the pool saves. */
const idOnlyUnpooled = {
  name: 'context: id only (randomBytes(32) each)',
  setup: () => ({ sink: 0 }),
  reset: () => {},
  batch(state, n) {
    for (let i = 0; i < n; i++) state.sink += newIdUnpooled().length;
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
async function checkCycles(subject) {
  const state = subject.setup();
  const created = await state.service.create(OWNER);
  await state.service.get(created.taskId, OWNER);
  const done = await state.service.complete(created.taskId, { content: [] });
  assert(
    done.status === 'completed' && done.version > created.version,
    'subject cycle did not complete',
  );
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
  const ctx = await serviceContext();
  try {
    return await runCycles(subjectContender(ctx));
  } finally {
    await ctx.close();
  }
}

async function runCycles(subject) {
  await checkCycles(subject);
  const contenders = [syncBaseline, asyncBaseline, subject, idOnly, idOnlyUnpooled];
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
  const idRate = median(results.get(idOnly));
  const unpooledIdRate = median(results.get(idOnlyUnpooled));

  // The ratio is taken per round (subject and baseline ran back to back, so a slow spell of the
  // machine hits both) and the median of those per-round ratios is reported.
  const pairedRatios = (baseline) =>
    results.get(subject).map((rate, round) => rate / results.get(baseline)[round]);
  const syncRatios = pairedRatios(syncBaseline);
  const asyncRatios = pairedRatios(asyncBaseline);
  const vsSync = median(syncRatios);
  const vsAsync = median(asyncRatios);
  const showRatios = (ratios) => ratios.map((r) => r.toFixed(3)).join(', ');
  console.log(
    `    ratio vs sync baseline:  ${vsSync.toFixed(3)}   (target ≥ ${CYCLE_TARGET_RATIO}) ${verdict(vsSync >= CYCLE_TARGET_RATIO)}` +
      `   per round: ${showRatios(syncRatios)}`,
  );
  console.log(
    `    ratio vs async baseline: ${vsAsync.toFixed(3)}   (target ≥ ${CYCLE_TARGET_RATIO}) ${verdict(vsAsync >= CYCLE_TARGET_RATIO)}` +
      `   per round: ${showRatios(asyncRatios)}`,
  );
  const us = (rate) => 1e6 / rate;
  console.log(
    `    per cycle: subject ${us(subjectRate).toFixed(2)} µs, sync baseline ${us(syncRate).toFixed(2)} µs, ` +
      `async baseline ${us(asyncRate).toFixed(2)} µs; the id alone ${us(idRate).toFixed(2)} µs of each`,
  );
  console.log(
    `    context: one randomBytes(32) call per id would cost ${us(unpooledIdRate).toFixed(2)} µs per id; ` +
      `with it, the subject vs a baseline using it: ` +
      `${(us(asyncRate) - us(idRate) + us(unpooledIdRate)).toFixed(2)} / ${(us(subjectRate) - us(idRate) + us(unpooledIdRate)).toFixed(2)} µs`,
  );
  // Context, no target: the same medians with the shared id cost taken out of every side.
  const withoutId = (rate) => us(rate) - us(idRate);
  console.log(
    `    context, id cost removed: subject ${withoutId(subjectRate).toFixed(2)} µs vs ` +
      `async baseline ${withoutId(asyncRate).toFixed(2)} µs (ratio ${(withoutId(asyncRate) / withoutId(subjectRate)).toFixed(3)}), ` +
      `sync baseline ${withoutId(syncRate).toFixed(2)} µs (ratio ${(withoutId(syncRate) / withoutId(subjectRate)).toFixed(3)})`,
  );
  return { subjectRate, syncRate, asyncRate, vsSync, vsAsync };
}

// ---------------------------------------------------------------------------------------------
// (b) cleanup with 1,000,000 stored tasks, 1,000 of them expired
// ---------------------------------------------------------------------------------------------

// The records of the fill are built here (taskRecord, common.mjs), the shape checked at start-up
// by checkRecordShape; ids as the service makes them (pooled: one CSPRNG call per 128 ids).

/** A live task: created within the last hour, 24 h TTL (distinct deadlines, like real traffic). */
const liveRecord = (now) =>
  taskRecord(newId(), OWNER, { ttlMs: 24 * HOUR }, now - Math.floor(Math.random() * HOUR));

/** An expired task: created 2–3 h ago with a 1 h TTL. */
const expiredRecord = (now) =>
  taskRecord(newId(), OWNER, { ttlMs: HOUR }, now - 2 * HOUR - Math.floor(Math.random() * HOUR));

/**
 * A task of "late batch" `batch`, for the second phase: live at the fill (it counts among the
 * 999,000 live ones), it expires between now + (batch+2) h and now + (batch+3) h − 1 ms, so a
 * cleanup at `lateBatchCleanupAt(now, batch)` removes exactly that batch.
 */
const lateBatchRecord = (now, batch) =>
  taskRecord(
    newId(),
    OWNER,
    { ttlMs: (batch + 2) * HOUR + Math.floor(Math.random() * (HOUR - 1)) },
    now,
  );
const lateBatchCleanupAt = (now, batch) => now + (batch + 3) * HOUR - 1;

/** Runs `store.cleanup(at())` once after a full GC; returns [ms, removed]. */
async function timeCleanup(store, at) {
  fullGc(); // no collection debt is paid inside the timed window
  const when = at();
  const start = nowNs();
  const removed = await store.cleanup(when, { terminalTtlMs: HOUR });
  return [msSince(start), removed];
}

const showRuns = (runs) => runs.map((t) => t.toFixed(3)).join(', ');

async function benchCleanup() {
  console.log(
    `\n(b) cleanup of ${fmtInt(CLEANUP_EXPIRED)} expired tasks among ${fmtInt(CLEANUP_ROWS)} stored`,
  );
  const store = new InMemoryTaskStore();
  /** The same records in a plain Map, for the naive full-scan baseline. */
  const naive = new Map();
  const create = { maxRows: null };

  // Who sits where: 1,000 random positions hold tasks expired now; CLEANUP_REPEATS × 1,000
  // other random positions hold the "late batches" of the second phase (live for now).
  const fillStart = nowNs();
  const now = Date.now();
  const role = new Map(); // position → -1 (expired now) or late batch number
  const lateCount = CLEANUP_REPEATS * CLEANUP_EXPIRED;
  while (role.size < CLEANUP_EXPIRED + lateCount) {
    const position = Math.floor(Math.random() * CLEANUP_ROWS);
    if (role.has(position)) continue;
    const k = role.size;
    role.set(
      position,
      k < CLEANUP_EXPIRED ? -1 : Math.floor((k - CLEANUP_EXPIRED) / CLEANUP_EXPIRED),
    );
  }
  for (let i = 0; i < CLEANUP_ROWS; i++) {
    const r = role.get(i);
    const record =
      r === undefined ? liveRecord(now) : r === -1 ? expiredRecord(now) : lateBatchRecord(now, r);
    await store.create(record, create);
    naive.set(record.taskId, record);
  }
  role.clear();
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
  naive.clear();
  assert(naiveExpired === CLEANUP_EXPIRED, `naive scan found ${naiveExpired} expired tasks`);

  // Subject: store.cleanup(Date.now()). After each run the 1,000 expired tasks are put back
  // (new records, so from the second run on the expired ones are freshly allocated).
  const cleanups = [];
  for (let r = 0; r < CLEANUP_REPEATS; r++) {
    if (r > 0) {
      const refillAt = Date.now();
      for (let i = 0; i < CLEANUP_EXPIRED; i++) await store.create(expiredRecord(refillAt), create);
    }
    assert(store.size === CLEANUP_ROWS, `store holds ${store.size} tasks before cleanup`);
    const [ms, removed] = await timeCleanup(store, () => Date.now());
    cleanups.push(ms);
    assert(removed === CLEANUP_EXPIRED, `cleanup removed ${removed} tasks, expected 1000`);
  }
  assert(store.size === CLEANUP_ROWS - CLEANUP_EXPIRED, 'cleanup left the wrong number of tasks');

  // Context: the refilled tasks above are young, hot in the CPU cache. Real expired tasks are
  // old and scattered. Here each run removes one late batch planted at the fill — 1,000 old
  // records at random positions — by calling cleanup with the instant that batch has expired.
  const coldCleanups = [];
  const coldSizes = [];
  for (let r = 0; r < CLEANUP_REPEATS; r++) {
    coldSizes.push(store.size);
    const [ms, removed] = await timeCleanup(store, () => lateBatchCleanupAt(now, r));
    coldCleanups.push(ms);
    assert(
      removed === CLEANUP_EXPIRED,
      `late batch ${r}: cleanup removed ${removed}, expected 1000`,
    );
  }

  const cleanupMs = median(cleanups);
  const coldMs = median(coldCleanups);
  const scanMs = median(scans);
  console.log(
    `    store.cleanup(Date.now())      median ${fmtMs(cleanupMs)}   runs: ${showRuns(cleanups)} (ms; the first run is cold: JIT + old records)`,
  );
  console.log(
    `    naive full Map scan            median ${fmtMs(scanMs)}   runs: ${showRuns(scans)} (ms)`,
  );
  console.log(
    `    cleanup / scan: ${(cleanupMs / scanMs).toFixed(4)} (cleanup is ${(scanMs / cleanupMs).toFixed(0)}× faster than a scan)`,
  );
  console.log(
    `    returned ${CLEANUP_EXPIRED} every run   (target < ${CLEANUP_TARGET_MS} ms) ${verdict(cleanupMs < CLEANUP_TARGET_MS)}`,
  );
  console.log(
    `    context, expired records old and scattered (${fmtInt(coldSizes[0])} … ${fmtInt(coldSizes.at(-1))} stored, 1,000 of them expired):`,
  );
  console.log(
    `    store.cleanup(late instant)    median ${fmtMs(coldMs)}   runs: ${showRuns(coldCleanups)} (ms)   ${verdict(coldMs < CLEANUP_TARGET_MS)}`,
  );
  return { cleanupMs, scanMs, firstMs: cleanups[0], coldMs };
}

// ---------------------------------------------------------------------------------------------
// (c) heap bytes per stored working task
// ---------------------------------------------------------------------------------------------

async function benchHeap() {
  console.log(
    `\n(c) heap per stored working task, ${fmtInt(HEAP_TASKS)} tasks via TasksService.create`,
  );

  // Payload: the 43-char id strings alone. The array is allocated (and filled with a shared
  // placeholder) before the first reading, so the difference is the strings, not the array.
  const ids = new Array(HEAP_TASKS).fill('');
  const idsBefore = heapUsed();
  for (let i = 0; i < HEAP_TASKS; i++) ids[i] = newId();
  const idsAfter = heapUsed();
  const payloadBytes = (idsAfter - idsBefore) / HEAP_TASKS;
  assert(ids[HEAP_TASKS - 1].length === 43, 'unexpected id length');

  // Subject: 100,000 working tasks (no statusMessage) stored through the service. The store
  // keeps them alive; nothing else holds them. The context is made before the first reading.
  const ctx = await serviceContext();
  const { store, service } = ctx;
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
  await ctx.close();
  return { perTask, payloadBytes, beyond };
}

// ---------------------------------------------------------------------------------------------
// Main
// ---------------------------------------------------------------------------------------------

/**
 * The records the bench builds for (b) must be the ones the service makes: the same keys, each
 * with a value of the same type, as a record `TasksService.create` stored. Checked once, before
 * anything is measured, so the builder cannot drift from the library unnoticed.
 */
async function checkRecordShape() {
  const ctx = await serviceContext();
  try {
    await checkTaskRecordShape(ctx.service, ctx.store, OWNER);
  } finally {
    await ctx.close();
  }
}

const totalStart = nowNs();
console.log('nestjs-mcp-tasks store benchmark');
console.log(platformLine());

await checkRecordShape();
const a = await benchCycles();
const b = await benchCleanup(); // its 1,000,000 tasks are garbage once it returns
const c = await benchHeap();

const rows = [
  [
    '(a) cycle ratio vs sync baseline',
    `${a.vsSync.toFixed(3)} (${fmtInt(a.subjectRate)} vs ${fmtInt(a.syncRate)}/s)`,
    `≥ ${CYCLE_TARGET_RATIO}`,
    verdict(a.vsSync >= CYCLE_TARGET_RATIO),
  ],
  [
    '(a) cycle ratio vs async baseline',
    `${a.vsAsync.toFixed(3)} (${fmtInt(a.subjectRate)} vs ${fmtInt(a.asyncRate)}/s)`,
    `≥ ${CYCLE_TARGET_RATIO}`,
    verdict(a.vsAsync >= CYCLE_TARGET_RATIO),
  ],
  [
    '(b) cleanup, 1k expired of 1M (median)',
    `${fmtMs(b.cleanupMs)} (first/cold ${fmtMs(b.firstMs)}; naive scan ${fmtMs(b.scanMs)})`,
    `< ${CLEANUP_TARGET_MS} ms`,
    verdict(b.cleanupMs < CLEANUP_TARGET_MS),
  ],
  [
    "(b') same, expired records cold (median)",
    `${fmtMs(b.coldMs)} (context: old, scattered expired tasks)`,
    `< ${CLEANUP_TARGET_MS} ms`,
    verdict(b.coldMs < CLEANUP_TARGET_MS),
  ],
  [
    '(c) heap beyond payload per task',
    `${c.beyond.toFixed(0)} B (${c.perTask.toFixed(0)} B total, payload ${c.payloadBytes.toFixed(0)} B)`,
    `< ${fmtInt(HEAP_TARGET_BYTES)} B`,
    verdict(c.beyond < HEAP_TARGET_BYTES),
  ],
];
printTargetTable(rows);
console.log(`(total ${(msSince(totalStart) / 1000).toFixed(1)} s)`);
// A report, not a test: a missed target does not fail the run.
process.exitCode = 0;
