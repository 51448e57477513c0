// Soak benchmark for nestjs-mcp-tasks: does a long run leave anything behind?
//
//   npm run bench          (builds dist/, then runs every benchmark, this one last)
//   npm run bench:soak     (builds dist/, then runs this file with --expose-gc)
//
// One process: a Nest app (Express adapter) on loopback with the in-memory store and
// `TasksModule.forRoot({ maxRows: null, janitor: { intervalMs: 100 }, ... })` from dist/, and the
// client ends of its listen streams (plain TCP sockets). After a warm-up (2,000 cycles, 20,000
// tasks), it takes the measures below, then runs
//
//   (a) 10,000 `subscriptions/listen` open/close cycles: every cycle opens a stream on one of 50
//       tasks and waits for the acknowledgement; every other cycle also changes the task and waits
//       for the notification; then the client goes away (FIN and RST in turn);
//   (b) 100,000 tasks created through TasksService with `ttlMs: 200` (a quarter each left working,
//       completed, answered after an input request, cancelled), paced, which expire and which the
//       janitor removes while the next ones are created (no row limit, so only the janitor
//       removes them; the run counts what its sweeps remove);
//
// and takes the measures again halfway through each and after each (compared with the start). The measures: the heap after a full GC; the active
// resources keeping the process alive (`process.getActiveResourcesInfo()`, by type); every live
// timer, unref'd ones included (counted with an async hook: unref'd timers are no active
// resource); the server's open connections; ListenHandler `size` and `watchedTasks`; the
// `watchedTasks` of ListenFeed and of WaiterFeed (providers no public entry exports, found by class
// name through Nest's DiscoveryService: `providerNamed` in common.mjs); the store's `size`; and
// three internals read for this check only: the store's two expiry indexes and TasksService's
// per-task change queues. Target: every count back to its start value, the heap within 2 MiB of it.
//
// It is a report, not a test: it exits 0 whether a target is met or missed, and non-zero only when
// it cannot run (nothing built, no --expose-gc, a broken invariant: a stream not acknowledged, a
// notification that never comes). Streams, connections or tasks the server never lets go of are
// no such failure: they show in the measures. A hard deadline ends it at 170 s whatever happens.
//
// Environment knobs (all optional): BENCH_SOAK_CYCLES (cycles of (a), default 10000),
// BENCH_SOAK_TASKS (tasks of (b), default 100000).

import 'reflect-metadata';
import { createHook } from 'node:async_hooks';
import { connect } from 'node:net';
import { clearTimeout, setTimeout } from 'node:timers';
import {
  armHardDeadline,
  assert,
  fmt,
  fmtMiB,
  fmtSignedKiB,
  fullGc,
  listenBody,
  listenRequest,
  loadBuiltPackage,
  machineLine,
  msSince,
  nowNs,
  pool,
  positiveEnv,
  providerNamed,
  requireGc,
  sleep,
  startTasksApp,
  until,
  verdict,
  yieldToLoop,
  recordResults,
} from './common.mjs';

// ---------------------------------------------------------------------------------------------
// Parameters
// ---------------------------------------------------------------------------------------------

/** (a) Open/close cycles, how many run at once, over how many tasks. */
const CYCLES = positiveEnv('BENCH_SOAK_CYCLES', 10_000);
const CYCLE_CONCURRENCY = 50;
const CYCLE_TASKS = 50;
/** (b) Tasks created, their TTL, and the pace: a batch, then a pause. */
const TASKS = positiveEnv('BENCH_SOAK_TASKS', 100_000);
const TASK_TTL_MS = 200;
const BATCH = 500;
const BATCH_PAUSE_MS = 10;
/** The janitor's interval. */
const JANITOR_MS = 100;
/** Warm-up before the start measures: cycles of (a) and tasks of (b). */
const WARMUP_CYCLES = 2_000;
const WARMUP_TASKS = 20_000;
/** The heap may differ from the start by this much. */
const HEAP_TOLERANCE_BYTES = 2 * 1_048_576;
/** The pause before each measure. */
const SETTLE_MS = 1_100;
/** How long a client waits for a frame, and the server for closed streams and expired tasks. */
const WAIT_MS = 15_000;
const HARD_DEADLINE_MS = 170_000;

/** The listen caller is anonymous (no guard): its tasks belong to this owner. */
const OWNER = Object.freeze({ principal: null, tenant: null });

// ---------------------------------------------------------------------------------------------
// Every live timer, unref'd ones included
// ---------------------------------------------------------------------------------------------

// `process.getActiveResourcesInfo()` lists only the timers that keep the process alive; the
// library's own (janitor, keep-alive, Redis time-outs) and Node's socket time-outs are unref'd.
// This hook sees every Timeout from its creation to its end. It is installed before anything else
// runs, so it knows every timer; its cost (Node then tracks promises too) is paid by every phase.
const liveTimers = new Map();
createHook({
  init(asyncId, type, _triggerAsyncId, resource) {
    if (type === 'Timeout') liveTimers.set(asyncId, resource);
  },
  destroy(asyncId) {
    liveTimers.delete(asyncId);
  },
}).enable();

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/**
 * Waits until the server has let go of what a phase left (streams, connections, expired tasks):
 * what it never lets go of is a leak for the measures to show, so after WAIT_MS this notes it and
 * goes on.
 */
async function settle(what, check) {
  try {
    await until(what, check, WAIT_MS);
  } catch {
    console.log(`NOTE: still waiting for ${what} after ${fmt(WAIT_MS)} ms; measuring anyway.`);
  }
}

// ---------------------------------------------------------------------------------------------
// The app
// ---------------------------------------------------------------------------------------------

async function startServer() {
  const lib = await loadBuiltPackage();
  const { app, port, connections } = await startTasksApp(lib, {
    // No row limit: a full store removes expired tasks on create, and only the janitor is to
    // remove them here. An owner at its quota does the same, and the anonymous caller owns every
    // task: a quota above all the tasks of the run, so the count still runs on every create but
    // never reaches it.
    maxRows: null,
    maxTasksPerOwner: 2 * (TASKS + WARMUP_TASKS + CYCLE_TASKS),
    // Its CYCLE_CONCURRENCY streams at a time are one principal's: a per-principal cap as high
    // as the process-wide one (the default 1,024).
    listen: { maxStreamsPerPrincipal: 1_024 },
    janitor: { intervalMs: JANITOR_MS },
    serverInfo: { name: 'soak-bench', version: '1.0.0' },
  });
  return {
    app,
    lib,
    port,
    tasks: app.get(lib.TasksService),
    store: app.get(lib.TaskStore),
    // Read for their counters only: found by class name (no public entry exports them).
    router: await providerNamed(app, 'ListenHandler'),
    feed: await providerNamed(app, 'ListenFeed'),
    events: await providerNamed(app, 'WaiterFeed'),
    connections,
  };
}

// ---------------------------------------------------------------------------------------------
// The measures
// ---------------------------------------------------------------------------------------------

/** The live timers, for the report: delay, interval or not, and the callback's name. */
function describeTimers() {
  const kinds = new Map();
  for (const timer of liveTimers.values()) {
    // Node's own fields of a Timeout (for this report only).
    const kind =
      `${timer._idleTimeout} ms${timer._repeat ? ' interval' : ''}` +
      ` ${timer._onTimeout?.name || '(anonymous)'}${timer.hasRef?.() === false ? ', unref’d' : ''}`;
    kinds.set(kind, (kinds.get(kind) ?? 0) + 1);
  }
  return [...kinds].map(([kind, n]) => (n > 1 ? `${n} × ${kind}` : kind)).join('; ');
}

/** Every measure at this moment, after a full GC. */
async function measure(ctx) {
  // Destroy hooks and socket teardown run on later turns of the loop: let them. Node's HTTP
  // server caches its Date header for up to a second with a timer: let that one end too.
  await sleep(SETTLE_MS);
  fullGc();
  await sleep(50);
  await yieldToLoop();
  await yieldToLoop();
  fullGc();
  const { store, tasks, router, feed, events } = ctx;
  const resources = {};
  for (const type of process.getActiveResourcesInfo()) resources[type] = (resources[type] ?? 0) + 1;
  return {
    heap: process.memoryUsage().heapUsed,
    timers: describeTimers(),
    counts: {
      ...Object.fromEntries(Object.entries(resources).map(([type, n]) => [`active: ${type}`, n])),
      'timers, unref’d included': liveTimers.size,
      'server connections': await ctx.connections(),
      'ListenHandler.size': router.size,
      'ListenHandler.watchedTasks': router.watchedTasks,
      'ListenFeed.watchedTasks': feed.watchedTasks,
      'WaiterFeed.watchedTasks': events.watchedTasks,
      'store.size': store.size,
      // Internals, read for this check only.
      'store expiry index (TTL)': store.byExpiry?.size ?? NaN,
      'store expiry index (terminal)': store.byTerminal?.size ?? NaN,
      'TasksService change queues': tasks.queues?.size ?? NaN,
    },
  };
}

// ---------------------------------------------------------------------------------------------
// (a) listen open/close cycles
// ---------------------------------------------------------------------------------------------

let sequence = 0;

/**
 * One cycle on a plain TCP socket: open a listen stream on `taskId`, wait for its
 * acknowledgement; with `change`, change the task and wait for the notification; then go away
 * with a FIN, or with a RST (`reset`: a dropped connection, and no TIME_WAIT port left behind).
 */
function cycle(ctx, taskId, change, reset) {
  const id = `soak-${++sequence}`;
  const body = listenBody(id, taskId, 'soak-bench');
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port: ctx.port });
    let text = '';
    let stage = 'ack';
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`listen ${id}: no ${stage} within ${WAIT_MS} ms: ${text}`));
    }, WAIT_MS);
    const finish = () => {
      clearTimeout(timer);
      stage = 'done';
      if (reset) socket.resetAndDestroy();
      else socket.end();
    };
    socket.setEncoding('latin1');
    socket.on('error', (error) => {
      if (stage !== 'done') {
        clearTimeout(timer);
        reject(error);
      }
    });
    socket.on('close', () => {
      if (stage === 'done') resolve();
      else {
        clearTimeout(timer);
        reject(new Error(`listen ${id} closed at stage ${stage}: ${text}`));
      }
    });
    socket.on('data', (chunk) => {
      text += chunk;
      if (stage === 'ack' && text.includes('notifications/subscriptions/acknowledged')) {
        assert(text.includes(`"taskIds":["${taskId}"]`), `listen ${id}: task id not honoured`);
        if (!change) return finish();
        stage = 'notification';
        ctx.tasks.progress(taskId, id).catch(reject);
      } else if (stage === 'notification' && text.includes(`"statusMessage":"${id}"`)) {
        finish();
      }
    });
    socket.write(listenRequest('/mcp', ctx.port, body));
  });
}

async function listenCycles(ctx, count) {
  const start = nowNs();
  const numbers = Array.from({ length: count }, (_, n) => n);
  await pool(numbers, CYCLE_CONCURRENCY, (n) =>
    cycle(ctx, ctx.cycleTasks[n % CYCLE_TASKS], n % 2 === 0, n % 4 < 2),
  );
  // The server notices each closed stream on its own turn of the loop.
  await settle('every stream to be dropped', () => ctx.router.size === 0);
  await settle('every connection to close', async () => (await ctx.connections()) === 0);
  return msSince(start) / 1000;
}

// ---------------------------------------------------------------------------------------------
// (b) short-lived tasks and the janitor
// ---------------------------------------------------------------------------------------------

const QUESTION = {
  method: 'elicitation/create',
  params: {
    message: 'Your name?',
    requestedSchema: { type: 'object', properties: { name: { type: 'string' } } },
  },
};

/** Creates `count` tasks with a short TTL, paced, and waits until the janitor removed them all. */
async function shortLivedTasks(ctx, count, baseSize) {
  const { tasks, store } = ctx;
  const start = nowNs();
  let peak = 0;
  const removedBefore = ctx.removedByJanitor;
  const one = async (n) => {
    const task = await tasks.create(OWNER, { ttlMs: TASK_TTL_MS });
    switch (n % 4) {
      case 1:
        await tasks.complete(task.taskId, { content: [{ type: 'text', text: 'done' }] });
        break;
      case 2:
        await tasks.requireInput(task.taskId, { name: QUESTION });
        await tasks.update(task.taskId, OWNER, {
          name: { action: 'accept', content: { name: 'x' } },
        });
        break;
      case 3:
        await tasks.cancel(task.taskId, OWNER);
        break;
      default:
        break;
    }
  };
  for (let done = 0; done < count; done += BATCH) {
    const size = Math.min(BATCH, count - done);
    await Promise.all(Array.from({ length: size }, (_, i) => one(done + i)));
    peak = Math.max(peak, store.size - baseSize);
    await sleep(BATCH_PAUSE_MS);
  }
  const createdSeconds = msSince(start) / 1000;
  const lastCreated = nowNs();
  await settle('the janitor to remove every expired task', () => store.size === baseSize);
  return {
    createdSeconds,
    drainMs: msSince(lastCreated),
    seconds: msSince(start) / 1000,
    peak,
    removed: ctx.removedByJanitor - removedBefore,
  };
}

// ---------------------------------------------------------------------------------------------
// Main
// ---------------------------------------------------------------------------------------------

function table(start, after) {
  const names = [
    ...new Set([...Object.keys(start.counts), ...after.flatMap((s) => Object.keys(s.counts))]),
  ];
  const width = Math.max(...names.map((n) => n.length), 'heap after a full GC'.length);
  const cell = (v) => String(v ?? 0).padStart(11);
  const rows = [];
  const heapOk = after.map((s) => Math.abs(s.heap - start.heap) <= HEAP_TOLERANCE_BYTES);
  rows.push(
    `  ${'heap after a full GC'.padEnd(width)} ${fmtMiB(start.heap).padStart(11)}` +
      after
        .map(
          (s, i) =>
            ` ${fmtMiB(s.heap).padStart(11)} ${fmtSignedKiB(s.heap - start.heap).padStart(12)} ${verdict(heapOk[i])}`,
        )
        .join(''),
  );
  const countsOk = after.map(() => true);
  for (const name of names) {
    const base = start.counts[name] ?? 0;
    rows.push(
      `  ${name.padEnd(width)} ${cell(base)}` +
        after
          .map((s, i) => {
            const value = s.counts[name] ?? 0;
            const ok = value === base;
            if (!ok) countsOk[i] = false;
            return ` ${cell(value)} ${''.padStart(12)} ${verdict(ok)}`;
          })
          .join(''),
    );
  }
  return { rows, width, heapOk, countsOk };
}

async function main() {
  const totalStart = nowNs();
  armHardDeadline(HARD_DEADLINE_MS);
  requireGc();
  let ctx;
  try {
    ctx = await startServer();
  } catch (error) {
    console.error('Cannot start the server; run `npm run build` first (or `npm run bench:soak`).');
    console.error(error);
    process.exit(1);
  }
  let exitCode = 0;
  try {
    console.log(
      'Soak benchmark: Nest (Express) on loopback, the in-memory store, the janitor every ' +
        `${JANITOR_MS} ms; the client ends of the listen streams in the same process.`,
    );
    console.log(`${machineLine()}.`);
    assert(ctx.store instanceof ctx.lib.InMemoryTaskStore, 'the store is not the in-memory store');
    ctx.cycleTasks = [];
    for (let i = 0; i < CYCLE_TASKS; i++) {
      ctx.cycleTasks.push((await ctx.tasks.create(OWNER, { ttlMs: null })).taskId);
    }
    const baseSize = ctx.store.size;
    // Counts what the janitor's sweeps remove (the janitor calls the store's cleanup).
    ctx.removedByJanitor = 0;
    const cleanup = ctx.store.cleanup.bind(ctx.store);
    ctx.store.cleanup = async (now, options) => {
      const removed = await cleanup(now, options);
      ctx.removedByJanitor += removed;
      return removed;
    };

    // Warm-up: what the first cycles and tasks allocate once (compiled code, type feedback,
    // pooled parsers, the store's lane for the short TTL) is allocated before the start measures.
    const warmStart = nowNs();
    await listenCycles(ctx, WARMUP_CYCLES);
    await shortLivedTasks(ctx, WARMUP_TASKS, baseSize);
    console.log(
      `Warm-up: ${fmt(WARMUP_CYCLES)} listen cycles and ${fmt(WARMUP_TASKS)} short-lived tasks ` +
        `in ${fmt(msSince(warmStart) / 1000, 1)} s.`,
    );
    await yieldToLoop();
    const start = await measure(ctx);

    console.log(
      `\n(a) ${fmt(CYCLES)} listen open/close cycles, ${CYCLE_CONCURRENCY} at a time over ` +
        `${CYCLE_TASKS} tasks; every other one also waits for a notification; FIN and RST in turn`,
    );
    const halfCycles = Math.floor(CYCLES / 2);
    let cyclesSeconds = await listenCycles(ctx, halfCycles);
    const midA = await measure(ctx);
    cyclesSeconds += await listenCycles(ctx, CYCLES - halfCycles);
    const afterA = await measure(ctx);
    console.log(
      `    ${fmt(CYCLES)} cycles in ${fmt(cyclesSeconds, 1)} s (${fmt(CYCLES / cyclesSeconds)} /s), ` +
        'every stream dropped and every connection closed',
    );
    console.log(
      `    heap ${fmtMiB(start.heap)} → ${fmtMiB(midA.heap)} after ${fmt(halfCycles)} → ` +
        `${fmtMiB(afterA.heap)} after ${fmt(CYCLES)}: ` +
        `${fmt((afterA.heap - midA.heap) / (CYCLES - halfCycles), 1)} bytes per cycle over the second half`,
    );

    console.log(
      `\n(b) ${fmt(TASKS)} tasks created through TasksService with ttlMs ${TASK_TTL_MS} ` +
        `(batches of ${BATCH}, ${BATCH_PAUSE_MS} ms apart), expired, removed by the janitor`,
    );
    const halfTasks = Math.floor(TASKS / 2);
    const b1 = await shortLivedTasks(ctx, halfTasks, baseSize);
    const midB = await measure(ctx);
    const b2 = await shortLivedTasks(ctx, TASKS - halfTasks, baseSize);
    const afterB = await measure(ctx);
    const createdSeconds = b1.createdSeconds + b2.createdSeconds;
    const removed = b1.removed + b2.removed;
    console.log(
      `    created in ${fmt(createdSeconds, 1)} s (${fmt(TASKS / createdSeconds)} /s); at most ` +
        `${fmt(Math.max(b1.peak, b2.peak))} stored at once; the last ones removed ` +
        `${fmt(Math.max(b1.drainMs, b2.drainMs))} ms after the last create; the janitor ` +
        `removed ${fmt(removed)}`,
    );
    console.log(
      `    heap ${fmtMiB(afterA.heap)} → ${fmtMiB(midB.heap)} after ${fmt(halfTasks)} → ` +
        `${fmtMiB(afterB.heap)} after ${fmt(TASKS)}: ` +
        `${fmt((afterB.heap - midB.heap) / (TASKS - halfTasks), 2)} bytes per task over the second half`,
    );

    const { rows, width, heapOk, countsOk } = table(start, [afterA, afterB]);
    for (const [label, snapshot] of [
      ['start', start],
      ['after (a)', afterA],
      ['after (b)', afterB],
    ]) {
      console.log(`Timers ${label}: ${snapshot.timers || 'none'}.`);
    }
    console.log(
      '\n==================================== SUMMARY ====================================',
    );
    console.log(
      `  ${'measure'.padEnd(width)} ${'start'.padStart(11)}` +
        ` ${'after (a)'.padStart(11)} ${''.padStart(12)}     ` +
        ` ${'after (b)'.padStart(11)} ${''.padStart(12)}`,
    );
    for (const row of rows) console.log(row);
    console.log(
      `(a) after ${fmt(CYCLES)} listen open/close cycles: heap ` +
        `${fmtSignedKiB(afterA.heap - start.heap)}, counts ${countsOk[0] ? 'all back' : 'NOT all back'}` +
        `\n    target counts equal, heap ±${fmtMiB(HEAP_TOLERANCE_BYTES)}: ` +
        `${verdict(heapOk[0] && countsOk[0])}`,
    );
    console.log(
      `(b) after ${fmt(TASKS)} short-lived tasks: heap ${fmtSignedKiB(afterB.heap - start.heap)}, ` +
        `counts ${countsOk[1] ? 'all back' : 'NOT all back'}` +
        `\n    target counts equal, heap ±${fmtMiB(HEAP_TOLERANCE_BYTES)}: ` +
        `${verdict(heapOk[1] && countsOk[1])}`,
    );
    console.log(`(total ${fmt(msSince(totalStart) / 1000, 1)} s)`);
    const heapTarget = `counts back, heap ±${fmtMiB(HEAP_TOLERANCE_BYTES)}`;
    recordResults([
      [
        `(a) ${fmt(CYCLES)} listen open/close cycles`,
        `heap ${fmtSignedKiB(afterA.heap - start.heap)}, counts ${countsOk[0] ? 'all back' : 'NOT all back'}`,
        heapTarget,
        verdict(heapOk[0] && countsOk[0]),
      ],
      [
        `(b) ${fmt(TASKS)} tasks created and expired`,
        `heap ${fmtSignedKiB(afterB.heap - start.heap)}, counts ${countsOk[1] ? 'all back' : 'NOT all back'}`,
        heapTarget,
        verdict(heapOk[1] && countsOk[1]),
      ],
    ]);
  } catch (error) {
    console.error('\nThe benchmark could not run:', error);
    exitCode = 1;
  } finally {
    await ctx.app.close();
  }
  // A report, not a test: a missed target does not fail the run. No process.exit(): stdout may
  // be a pipe, and the last lines must get out.
  process.exitCode = exitCode;
}

await main();
