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
//
// -----------------------------------------------------------------------------------------------
// Method, in detail:
//
// `bench/soak.bench.mjs` is plain ESM JavaScript. It takes 30 to 60 s, depending on how busy the
// machine is, and stops by itself (a hard deadline ends it at 170 s whatever happens). It is a
// report, not a test: it exits 0 whether a target is met or missed. It exits non-zero only when it
// cannot run: nothing built, no `--expose-gc`, or a broken invariant (a stream that is not
// acknowledged with its task id, a notification that does not arrive within 15 s). Streams,
// connections or tasks that the server never lets go of are not such a failure. After 15 s the script
// notes them and measures anyway, so they show as MISS in the measures.
//
// **Setup.** One process: a Nest app on the Express adapter, on loopback, with the in-memory store
// and `TasksModule.forRoot({ maxRows: null, maxTasksPerOwner: 2 × all the run's tasks, listen: {
// maxStreamsPerPrincipal: 1_024 }, janitor: { intervalMs: 100 } })` from `dist/`. The
// caller is anonymous. The client ends of the listen streams are in the same process, on plain `net`
// sockets, so the handle and timer counts cover both ends. There is no row limit, because a full store
// removes expired tasks itself on `create`. Here only the janitor is meant to remove them. The script
// wraps the store's `cleanup` to count what the janitor's sweeps remove.
//
// **The measures.** The script takes them after a warm-up (2,000 cycles of (a) and 20,000 tasks of
// (b): compiled code, type feedback, pooled parsers and the store's lane for the short TTL are
// allocated by then). It takes them again halfway through each phase and after each phase. Each time
// it first waits 1.1 s, because Node's HTTP server keeps its cached `Date` header for up to a second
// with a timer. Then it runs a full GC (two `gc()` passes). The measures are:
//
// - the heap used;
// - `process.getActiveResourcesInfo()`, counted by type (the resources that keep the process alive);
// - every live timer, unref'd ones included. Unref'd timers are not active resources, and the
//   library's own timers are all unref'd (the janitor, the listen keep-alive, the Redis time-outs),
//   and so are Node's socket time-outs. An `async_hooks` hook, installed before anything else runs,
//   sees each `Timeout` from `init` to `destroy`. The run also prints the live timers (delay,
//   interval or not, callback name). On the development VM there are four: the script's own
//   deadline, the listen keep-alive, the janitor and Node's HTTP connection check. With that hook
//   Node also tracks every promise, which slows every phase alike;
// - the server's open connections;
// - `ListenHandler.size` and `ListenHandler.watchedTasks` (the provider that holds the listen
//   streams), and `watchedTasks` of `ListenFeed` and of `WaiterFeed`. No public entry exports these
//   classes: `providerNamed` in `bench/common.mjs` finds their instances by class name through
//   Nest's `DiscoveryService`;
// - the store's `size`;
// - three internals, read for this check only: the entries of the store's two expiry indexes (TTL and
//   terminal) and TasksService's per-task change queues.
//
// **What it runs.**
//
// - **(a) 10,000 listen open/close cycles.** 50 run at a time, over 50 tasks without a TTL, so
//   several streams often share a task. A cycle POSTs `subscriptions/listen` with `taskIds: [id]`
//   and waits for the acknowledgement, which must honour the id. Every other cycle then calls
//   `TasksService.progress` on the task and waits for the `notifications/tasks` carrying that
//   message, so the delivery path (a stream's `delivered` map, the frame it writes) runs too. Then
//   the client goes away, with a FIN and with a RST in turn. After the cycles the script waits until
//   the router has dropped every stream and the server has closed every connection.
// - **(b) 100,000 short-lived tasks.** They are created through `TasksService.create` with
//   `ttlMs: 200`, in batches of 500 started together, with 10 ms between batches. A quarter of them
//   are left working, a quarter completed, a quarter asked for input and answered (`requireInput`,
//   then `update`), and a quarter cancelled. The tasks expire while the next ones are created, and
//   the janitor removes them every 100 ms. After the last batch the script waits until the store is
//   back to its 50 long-lived tasks. It reports the largest number stored at once, how long the last
//   ones took to go, and how many the janitor removed (it should be all of them).
//
// **Target:** after each phase, every count equal to its start value, and the heap within 2 MiB of
// its start. The line "bytes per cycle (per task) over the second half" is the slope from the
// halfway measure to the end. A leak of one stream record per cycle (about 1 KB) would show as about
// 1,000 there and as 10 MB over (a). A leaked task id per task (a 43-character string, about 60
// bytes) would show as about 60 bytes per task there and as 6 MB over (b).
//
// **Knobs** (environment, all optional): `BENCH_SOAK_CYCLES` (10000) and `BENCH_SOAK_TASKS` (100000).
//
// **Reading the figures.** Other work on the machine changes the rates (cycles per second, tasks
// per second) by a factor of 3 from run to run. The counts and the heap do not depend on it. The heap
// moves by a few hundred KiB either way between measures. That is the same order as the one-off
// growth the warm-up does not cover, and far from a per-cycle or per-task leak. A count that differs
// from its start always means something was left behind. With a stream the router never drops, for
// example, `ListenHandler.size` and `ListenFeed.watchedTasks` show the leftovers and the row reads
// MISS.
//
// One run's summary, from the 2-vCPU development VM (Node 20, other work running on the machine,
// hence 361 cycles/s where a quieter run did 1,057):
//
// ```
// (a) 10,000 cycles in 27.7 s (361 /s); heap 30.26 → 30.61 MiB after 5,000 → 30.67 MiB after 10,000: 12.4 bytes per cycle over the second half
// (b) 100,000 tasks created in 9.0 s (11,111 /s); at most 5,500 stored at once; the last removed 214 ms after the last create; the janitor removed 100,000
//     heap 30.67 → 30.61 MiB after 50,000 → 30.64 MiB after 100,000: 0.48 bytes per task over the second half
//   measure                             start   after (a)                     after (b)
//   heap after a full GC            30.26 MiB   30.67 MiB   +423.3 KiB PASS   30.64 MiB   +386.5 KiB PASS
//   active: TCPServerWrap                   1           1              PASS           1              PASS
//   timers, unref’d included                4           4              PASS           4              PASS
//   server connections                      0           0              PASS           0              PASS
//   ListenHandler.size                       0           0              PASS           0              PASS
//   ListenHandler.watchedTasks               0           0              PASS           0              PASS
//   ListenFeed.watchedTasks                0           0              PASS           0              PASS
//   WaiterFeed.watchedTasks                 0           0              PASS           0              PASS
//   store.size                             50          50              PASS          50              PASS
//   store expiry index (TTL)                0           0              PASS           0              PASS
//   store expiry index (terminal)           0           0              PASS           0              PASS
//   TasksService change queues              0           0              PASS           0              PASS
// (a) target counts equal, heap ±2 MiB: PASS
// (b) target counts equal, heap ±2 MiB: PASS
// ```

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
