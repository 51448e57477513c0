// Capacity benchmark for nestjs-mcp-tasks: the figures of docs/scaling.md's capacity plan, per
// engine (Redis, a 3-master Redis Cluster, PostgreSQL), everything on this one machine.
//
//   npm run bench:capacity   (builds dist/, then runs this file; not part of `npm run bench`)
//
// It starts its own servers as bench/fanout does (REDIS_URL, REDIS_CLUSTER_NODES and
// POSTGRES_URL are used instead when set).
//
//   (a) Changes per second through TasksService, the notifier on and off: this process writes
//       (one TasksModule application context; `TasksService.progress` on 1,000 working tasks, a
//       fixed number of writes in flight, each worker on its own tasks); a child process (this
//       file with `--watcher`) is a second instance whose ListenFeed watches all 1,000 tasks and
//       counts the changes it is delivered. Three modes: the notifier on and every change watched
//       elsewhere; the notifier on and nobody watching; the notifier off (`notifier: null`). For
//       each: changes/s, and the CPU of the writer, the watcher and the server over the window
//       (100 % = one core of two), the whole machine's (/proc/stat, so other work running at the
//       same time shows), and whether the watcher kept up.
//   (b) Subscription cost per instance: one instance watches 1,000 tasks, then 9,000 more, on
//       its ListenFeed: the time until every `listen` promise resolved (the subscriptions are in
//       place), this process's heap after a full GC, and the server's memory (Redis used_memory,
//       summed over the Cluster's nodes; PostgreSQL: the listening backend's anonymous RSS); then
//       the watcher's latency for a change to one of them, and the time to unwatch them all.
//
// Before (a), 10,000 working tasks are stored, for the server's bytes per stored task (Redis
// used_memory; PostgreSQL's tables with their indexes and TOAST).
//
// It is a report: it prints figures and exits 0; it has no targets. Knobs: BENCH_CAPACITY_ENGINES
// ("redis,cluster,postgres"), BENCH_CAPACITY_WINDOW_MS (4000), BENCH_CAPACITY_INFLIGHT ("8,64,256"),
// BENCH_CAPACITY_WATCHED ("1000,10000": the totals of (b)), BENCH_CAPACITY_STORED (10000).
//
// -----------------------------------------------------------------------------------------------
// Method, in detail:
//
// `bench/capacity.bench.mjs` gives the figures of the capacity plan in
// [docs/scaling.md](../docs/scaling.md). It starts the same servers as `bench/fanout`, and needs
// `node --expose-gc` (the script sets it). It is a report: it has no targets, and it exits 0.
//
// - **(a) Changes per second.** This process is the writer: one TasksModule context,
//   `TasksService.progress` on 1,000 working tasks, with 8, 64 or 256 writes in flight (each worker on
//   its own tasks), in 4 s windows after a 1 s warm-up. A child process (the same file,
//   `--watcher`) is a second instance, whose ListenFeed watches all 1,000 tasks and counts what it
//   is delivered. The modes are: the notifier on with every change watched, the notifier on with
//   nobody watching, and the notifier off (`notifier: null`, a second context on the same store).
//   For each, the bench gives changes/s and the CPU of the writer, the watcher and the server over
//   the window. It also gives the whole machine's CPU from `/proc/stat`, and what other work took
//   of it, so a run disturbed by other jobs shows. It gives the CPU time per change, and whether
//   the watcher was delivered every change. Before all this, 10,000 working tasks are stored, to
//   give the server's bytes per stored task (Redis `used_memory`; PostgreSQL's tables with their
//   indexes and TOAST).
// - **(b) Subscription cost.** One instance watches 1,000 tasks, then 9,000 more. The bench gives
//   the time until every `listen` resolved, what each step added to this process's heap (after a
//   full GC) and to the server's memory (`used_memory`; on PostgreSQL the listening backend's
//   `RssAnon`), the latency of 200 changes to a watched task written from another instance, and the
//   time to unwatch everything.
//
// **Knobs**: `BENCH_CAPACITY_ENGINES`, `BENCH_CAPACITY_WINDOW_MS` (4000), `BENCH_CAPACITY_INFLIGHT`
// (`8,64,256`), `BENCH_CAPACITY_WATCHED` (`1000,10000`), `BENCH_CAPACITY_STORED` (10000).
//
// Runs on the quiet development VM (other work under 10 % of a core):
//
// | Engine        | notifier off | on, nobody watching | on, watched | at that rate, CPU writer / server / watcher | per change off → on: writer, server |
// | ------------- | ------------ | ------------------- | ----------- | ------------------------------------------- | ----------------------------------- |
// | Redis         | 24,309/s     | 17,176/s            | 17,810/s    | 102 % / 53 % / 14 %                         | 43 → 57 µs, 24 → 30 µs              |
// | Redis Cluster | 17,678/s     | 9,716/s             | 9,419/s     | 96 % / 60 % / 14 %                          | 59 → 102 µs, 34 → 63 µs             |
// | PostgreSQL    | 4,834/s      | 3,240/s             | 2,781/s     | 74 % / 84 % / 8 %                           | 197 → 268 µs, 143 → 303 µs          |
//
// | Engine        | stored task | subscribe 1,000 / 9,000 more | heap / server per watched task | unwatch 10,000 | p50 with 10,000 watched |
// | ------------- | ----------- | ---------------------------- | ------------------------------ | -------------- | ----------------------- |
// | Redis         | 1,468 B     | 13 / 157 ms                  | 421 / 280 B                    | 91 ms          | 0.89 ms                 |
// | Redis Cluster | 1,494 B     | 40 / 632 ms                  | 661 / 376 B                    | 870 ms         | 1.04 ms                 |
// | PostgreSQL    | 660 B       | 10 / 278 ms                  | 222 / 205 B                    | 52 ms          | 1.97 ms                 |
//
// (On PostgreSQL the first 1,000 `LISTEN`s also grew the backend by 3.3 MB.) On Redis and on the
// Cluster, the writer reaches a full core first. On PostgreSQL the machine is about 85 % busy,
// PostgreSQL taking most of one core, and the notifier's transaction per change doubles the
// server's CPU per change. With other jobs on the VM (other work 70–100 % of a core), the same run
// gave 55–70 % of these rates. What the figures mean for a deployment is in
// [docs/scaling.md](../docs/scaling.md).

import 'reflect-metadata';
import { readFileSync } from 'node:fs';
import { Redis } from 'ioredis';
import pg from 'pg';
import {
  armHardDeadline,
  assert,
  exitOnStop,
  fmt,
  fmtInt,
  CLOCK_TICKS,
  fmtMiB,
  heapUsed,
  loadBuiltPackage,
  machineLine,
  msSince,
  newTaskId,
  nowNs,
  pool,
  positiveEnv,
  processTreeCpuUs,
  providerNamed,
  redisCpuUs,
  redisInfoNumber,
  requireGc,
  sleep,
  startBenchPostgres,
  startBenchRedis,
  startBenchRedisCluster,
  startChild,
  stopChild,
  tasksContext,
  until,
  askChild,
} from './common.mjs';

const ENGINE_NAMES = (process.env.BENCH_CAPACITY_ENGINES ?? 'redis,cluster,postgres')
  .split(',')
  .map((name) => name.trim())
  .filter(Boolean);
const WINDOW_MS = positiveEnv('BENCH_CAPACITY_WINDOW_MS', 4_000);
const WARMUP_MS = 1_000;
const IN_FLIGHT = (process.env.BENCH_CAPACITY_INFLIGHT ?? '8,64,256').split(',').map(Number);
const WATCHED = (process.env.BENCH_CAPACITY_WATCHED ?? '1000,10000').split(',').map(Number);
const TASKS = 1_000;
/** Tasks stored to measure the server's bytes per stored task (the first TASKS are written in (a)). */
const STORED = positiveEnv('BENCH_CAPACITY_STORED', 10_000);
/** (b) Changes written to one watched task, one after the other, for the latency. */
const LATENCY_CHANGES = 200;
const HARD_DEADLINE_MS = 600_000;
const HOUR = 3_600_000;
const OWNER = Object.freeze({ principal: 'bench' });
const PREFIX = `bench-capacity-${process.pid}:`;
const SCHEMA = 'bench_capacity';

const lib = await loadBuiltPackage();
const { RedisTaskStore, redisNotifier, PostgresTaskStore, postgresNotifier } = lib;

const percentile = (sorted, p) => sorted[Math.max(0, Math.ceil((p / 100) * sorted.length) - 1)];
const pct = (us, ms) => `${fmt((us / 1000 / ms) * 100, 0)} %`;

/** The whole machine's busy CPU time so far, in µs (/proc/stat: every state but idle and iowait). */
function machineBusyUs() {
  const fields = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1);
  const ticks = fields.map(Number);
  const busy = ticks.reduce((sum, t) => sum + t, 0) - ticks[3] - ticks[4];
  return (busy / CLOCK_TICKS) * 1e6;
}

/** The store and notifier recipes of an engine, from what the parent hands a child. */
function parts(where) {
  if (where.kind === 'postgres') {
    const connection = { connection: where.url, schema: SCHEMA };
    return {
      store: () => new PostgresTaskStore(connection),
      notifier: () => postgresNotifier(connection),
    };
  }
  const connection = {
    connection: where.kind === 'cluster' ? { cluster: where.nodes } : where.url,
    // The parent's: the watcher process hears the channels of the writer's prefix.
    prefix: where.prefix,
  };
  return { store: () => new RedisTaskStore(connection), notifier: () => redisNotifier(connection) };
}

/** One instance: TasksService over its own store and notifier (or none), and its ListenFeed. */
async function startInstance(where, { notifier = true } = {}) {
  const { store: makeStore, notifier: makeNotifier } = parts(where);
  const store = makeStore();
  const ctx = await tasksContext(lib, {
    maxRows: null,
    maxTasksPerOwner: 10_000_000,
    defaultTtlMs: HOUR,
    store,
    notifier: notifier ? makeNotifier() : null,
  });
  await ctx.notifier?.ready;
  return { ...ctx, feed: await providerNamed(ctx.app, 'ListenFeed') };
}

// ---------------------------------------------------------------------------------------------
// The watcher: `node bench/capacity.bench.mjs --watcher <json>` (a child process)
// ---------------------------------------------------------------------------------------------

/** The watcher process: one instance whose ListenFeed watches what the parent says. */
async function watcherProcess() {
  const where = JSON.parse(process.argv[3]);
  const instance = await startInstance(where);
  exitOnStop(instance.app);
  let heard = 0;
  const listener = () => void heard++;
  let watched = [];
  process.on('message', async (message) => {
    if (message?.type === 'watch') {
      watched = message.taskIds;
      await Promise.all(watched.map((taskId) => instance.feed.listen(taskId, listener)));
      process.send({ type: 'watch' });
    } else if (message?.type === 'unwatch') {
      for (const taskId of watched) instance.feed.unlisten(taskId, listener);
      watched = [];
      await until('the unsubscriptions', () => instance.notifier.watchedTasks === 0, 30_000);
      process.send({ type: 'unwatch' });
    } else if (message?.type === 'count') {
      const { user, system } = process.cpuUsage();
      process.send({ type: 'count', heard, cpuUs: user + system });
    }
  });
  process.send({ type: 'ready' });
}

// ---------------------------------------------------------------------------------------------
// Servers
// ---------------------------------------------------------------------------------------------

const onDeadline = [];

async function startEngine(name) {
  if (name === 'redis' || name === 'cluster') {
    const cluster = name === 'cluster';
    const track = (halt) => onDeadline.push(halt);
    const server = cluster
      ? await startBenchRedisCluster('capacity', track)
      : await startBenchRedis('capacity', track);
    const admins = cluster
      ? server.nodes.map(({ host, port }) => new Redis({ host, port }))
      : [new Redis(server.url)];
    const sum = async (read) =>
      (await Promise.all(admins.map(read))).reduce((total, value) => total + value, 0);
    const usedMemory = () => sum((admin) => redisInfoNumber(admin, 'memory', 'used_memory'));
    return {
      label: cluster ? 'Redis Cluster (3 masters)' : 'Redis',
      where: cluster
        ? { kind: 'cluster', nodes: server.nodes, prefix: PREFIX }
        : { kind: 'redis', url: server.url, prefix: PREFIX },
      serverCpuUs: () => sum(redisCpuUs),
      serverMemory: usedMemory,
      memoryLabel: 'used_memory',
      storedBytes: usedMemory,
      storedLabel: 'used_memory',
      stop: async () => {
        for (const admin of admins) admin.disconnect();
        await server.stop();
      },
    };
  }
  const server = await startBenchPostgres(
    'capacity',
    { fsync: 'off', max_connections: 300, shared_buffers: '128MB' },
    (halt) => onDeadline.push(halt),
  );
  const admin = new pg.Pool({ connectionString: server.url, max: 1 });
  // pool.end() does not wait for its sockets to close: the server's stop may still reach one.
  admin.on('error', () => undefined);
  const version = (await admin.query('SHOW server_version')).rows[0].server_version;
  return {
    label: `PostgreSQL ${version.split(/[ .]/)[0]} (fsync off)`,
    where: { kind: 'postgres', url: server.url },
    serverCpuUs: async () => processTreeCpuUs(server.pid()),
    // The anonymous memory of the backends that LISTEN (the notifier's listening connections).
    serverMemory: async () => {
      const { rows } = await admin.query(
        "SELECT pid FROM pg_stat_activity WHERE query LIKE 'LISTEN%' OR query LIKE 'UNLISTEN%'",
      );
      let bytes = 0;
      for (const { pid } of rows) {
        const status = readFileSync(`/proc/${pid}/status`, 'utf8');
        bytes += Number(/RssAnon:\s+(\d+) kB/.exec(status)?.[1] ?? 0) * 1024;
      }
      return bytes;
    },
    memoryLabel: 'listening backend RssAnon',
    // The schema's tables with their indexes and TOAST, as stored (before any vacuum).
    storedBytes: async () => {
      const { rows } = await admin.query(
        `SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint AS bytes FROM pg_class c
           JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind = 'r'`,
        [SCHEMA],
      );
      return Number(rows[0].bytes);
    },
    storedLabel: 'tables + indexes + TOAST',
    stop: async () => {
      await admin.end();
      await server.stop();
    },
  };
}

// ---------------------------------------------------------------------------------------------
// (a) changes per second
// ---------------------------------------------------------------------------------------------

/** Runs `inFlight` workers of progress writes for `ms`; returns the writes done. */
async function writeFor(service, taskIds, inFlight, ms, counter) {
  let writes = 0;
  const deadline = Date.now() + ms;
  const worker = async (w) => {
    for (let i = w; Date.now() < deadline; i = (i + inFlight) % taskIds.length) {
      await service.progress(taskIds[i], `step ${counter.next++}`);
      writes++;
    }
  };
  await Promise.all(Array.from({ length: inFlight }, (_, w) => worker(w)));
  return writes;
}

async function throughput(engine, child, writerOn, writerOff, taskIds) {
  const counter = { next: 0 };
  const rows = [];
  const modes = [
    { name: 'notifier on, every change watched elsewhere', writer: writerOn, watched: true },
    { name: 'notifier on, nobody watching', writer: writerOn, watched: false },
    { name: 'notifier off', writer: writerOff, watched: false },
  ];
  for (const mode of modes) {
    if (mode.watched) await askChild(child, { type: 'watch', taskIds });
    for (const inFlight of IN_FLIGHT) {
      await writeFor(mode.writer.service, taskIds, inFlight, WARMUP_MS, counter);
      const before = await askChild(child, { type: 'count' });
      const server = await engine.serverCpuUs();
      const machine = machineBusyUs();
      const cpu = process.cpuUsage();
      const start = nowNs();
      const writes = await writeFor(mode.writer.service, taskIds, inFlight, WINDOW_MS, counter);
      const ms = msSince(start);
      const used = process.cpuUsage(cpu);
      const machineUs = machineBusyUs() - machine;
      const serverUs = (await engine.serverCpuUs()) - server;
      const after = await askChild(child, { type: 'count' });
      // Deliveries still under way when the window closed: wait a little for them, so `lag` is
      // what the watcher could not keep up with, not what was in flight.
      let heard = after.heard - before.heard;
      if (mode.watched) {
        const settle = Date.now() + 2_000;
        while (heard < writes && Date.now() < settle) {
          await sleep(50);
          heard = (await askChild(child, { type: 'count' })).heard - before.heard;
        }
      }
      rows.push({
        mode: mode.name,
        inFlight,
        rate: (writes / ms) * 1000,
        writer: pct(used.user + used.system, ms),
        watcher: pct(after.cpuUs - before.cpuUs, ms),
        server: pct(serverUs, ms),
        // The box (200 % = both cores), and what else ran on it meanwhile.
        machine: pct(machineUs, ms),
        others: pct(
          machineUs - serverUs - (used.user + used.system) - (after.cpuUs - before.cpuUs),
          ms,
        ),
        serverUsPerChange: serverUs / writes,
        writerUsPerChange: (used.user + used.system) / writes,
        delivered: mode.watched
          ? `${fmt((heard / writes) * 100, 1)} % delivered`
          : `${heard} delivered`,
      });
      const row = rows.at(-1);
      console.log(
        `  ${row.mode.padEnd(44)} ${String(inFlight).padStart(3)} in flight: ${fmtInt(row.rate).padStart(6)} changes/s; ` +
          `CPU writer ${row.writer}, watcher ${row.watcher}, server ${row.server}, box ${row.machine} (other work ${row.others}); ` +
          `per change: writer ${fmtInt(row.writerUsPerChange)} µs, server ${fmtInt(row.serverUsPerChange)} µs; ${row.delivered}`,
      );
    }
    if (mode.watched) await askChild(child, { type: 'unwatch' });
  }
  return rows;
}

// ---------------------------------------------------------------------------------------------
// (b) subscription cost
// ---------------------------------------------------------------------------------------------

async function subscriptions(engine, watcher, writer) {
  const [task] = [await writer.service.create(OWNER)];
  const listener = () => undefined;
  const ids = [];
  let lastHeap = heapUsed();
  let lastServer = await engine.serverMemory();
  for (const total of WATCHED) {
    const more = [];
    while (ids.length + more.length < total) more.push(newTaskId());
    const start = nowNs();
    await Promise.all(more.map((taskId) => watcher.feed.listen(taskId, listener)));
    const ms = msSince(start);
    ids.push(...more);
    assert(watcher.notifier.watchedTasks === ids.length, 'watchedTasks after listen');
    // What these `more` tasks added (the first step also holds what the first watch sets up).
    const heapNow = heapUsed();
    const serverNow = await engine.serverMemory();
    const heap = heapNow - lastHeap;
    const server = serverNow - lastServer;
    [lastHeap, lastServer] = [heapNow, serverNow];
    // One task among them that is written: its latency with `total` others watched.
    const latencies = [];
    let sentAt;
    const timed = () => latencies.push(msSince(sentAt));
    await watcher.feed.listen(task.taskId, timed);
    for (let i = 0; i < LATENCY_CHANGES; i++) {
      const count = latencies.length;
      sentAt = nowNs();
      await writer.service.progress(task.taskId, `latency ${total} ${i}`);
      await until('the change', () => latencies.length > count, 5_000);
    }
    watcher.feed.unlisten(task.taskId, timed);
    latencies.sort((a, b) => a - b);
    console.log(
      `  ${fmtInt(total).padStart(6)} watched: +${fmtInt(more.length)} subscribed in ${fmtInt(ms)} ms ` +
        `(${fmt((ms * 1000) / more.length, 1)} µs each); heap +${fmtMiB(heap)} (${fmtInt(heap / more.length)} B each); ` +
        `server ${engine.memoryLabel} +${fmtMiB(server)} (${fmtInt(server / more.length)} B each); ` +
        `latency of a change p50 ${fmt(percentile(latencies, 50), 2)} ms, p99 ${fmt(percentile(latencies, 99), 2)} ms`,
    );
  }
  const start = nowNs();
  for (const taskId of ids) watcher.feed.unlisten(taskId, listener);
  await until('every unsubscription', () => watcher.notifier.watchedTasks === 0, 120_000);
  console.log(`  unwatching all ${fmtInt(ids.length)}: ${fmtInt(msSince(start))} ms`);
}

// ---------------------------------------------------------------------------------------------
// The run
// ---------------------------------------------------------------------------------------------

async function main() {
  requireGc();
  armHardDeadline(HARD_DEADLINE_MS, undefined, () => {
    for (const stop of onDeadline) stop();
  });
  const totalStart = nowNs();
  console.log('Capacity benchmark: the notifier for several instances, per engine, one machine');
  console.log(machineLine());
  for (const name of ENGINE_NAMES) {
    const engine = await startEngine(name);
    const opened = [];
    let child;
    try {
      console.log(`\n== ${engine.label} ==`);
      const writerOn = await startInstance(engine.where);
      opened.push(writerOn);
      const writerOff = await startInstance(engine.where, { notifier: false });
      opened.push(writerOff);
      // Tasks per node: the server's bytes per stored working task (after one first task, so
      // the schema and the store's fixed keys are in place before the first reading).
      const taskIds = [(await writerOn.service.create(OWNER)).taskId];
      const storedBefore = await engine.storedBytes();
      await pool(Array.from({ length: STORED - 1 }), 20, async () => {
        taskIds.push((await writerOn.service.create(OWNER)).taskId);
      });
      const stored = (await engine.storedBytes()) - storedBefore;
      console.log(
        `stored: ${fmtInt(STORED)} working tasks, ${engine.storedLabel} +${fmtMiB(stored)} ` +
          `(${fmtInt(stored / (STORED - 1))} B per task)`,
      );
      taskIds.length = TASKS;
      ({ child } = await startChild(import.meta.url, ['--watcher', JSON.stringify(engine.where)], {
        label: 'the watcher process',
      }));
      console.log(
        `(a) changes/s, TasksService.progress on ${TASKS} tasks, ${WINDOW_MS} ms windows (CPU: 100 % = one core; the box has two)`,
      );
      await throughput(engine, child, writerOn, writerOff, taskIds);
      await stopChild(child);
      child = undefined;
      console.log('(b) subscription cost on one instance (ListenFeed.listen, awaited)');
      const watcher = await startInstance(engine.where);
      opened.push(watcher);
      await subscriptions(engine, watcher, writerOn);
    } finally {
      if (child) await stopChild(child);
      await Promise.all(opened.map((each) => each.close()));
      await engine.stop();
    }
  }
  console.log(`(total ${(msSince(totalStart) / 1000).toFixed(1)} s)`);
  process.exitCode = 0;
}

if (process.argv[2] === '--watcher') await watcherProcess();
else await main();
