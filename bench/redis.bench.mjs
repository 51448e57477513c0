// Redis store benchmark for nestjs-mcp-tasks: RedisTaskStore through TasksService, next to a raw
// ioredis baseline measured in the same run.
//
//   npm run bench         (builds dist/, then runs every benchmark)
//   npm run bench:redis   (builds dist/, then runs this file)
//
// It starts its own redis-server (from PATH, on a free loopback port, in a temporary directory,
// without persistence) and stops it at the end; with REDIS_URL set it uses that server instead,
// under a key prefix of its own that it removes at the end.
//
//   (a) Redis round trips per operation, counted on the store's own ioredis client (every command
//       it sends; commands sent while another of the same operation is still in flight share a
//       round trip) and checked against MONITOR on a separate connection. Targets: `get` 1, a
//       transition (`progress`, `complete`) at most 2.
//   (b) create → get → complete cycles per second through TasksService + RedisTaskStore, against
//       a raw ioredis client doing the same number of sequential round trips per cycle with plain
//       commands (ZADD, HSET, HGET, HGET, HSET) and payloads of the same size, JSON included.
//       Target: subject / baseline ≥ 0.7.
//
// TasksService, the store and the notifier come from the public entries as an app gets them:
// `TasksModule.forRoot({ store: new RedisTaskStore(...), notifier: null | redisNotifier(...) })` in
// a Nest application context (no HTTP; `tasksContext` in common.mjs), closed at the end.
//
// It is a report, not a test: it exits 0 whether a target is met or missed, and non-zero only when
// it cannot run (dist/ missing, no redis-server, a broken invariant, the hard deadline).
//
// Environment knobs (all optional): REDIS_URL, BENCH_REDIS_ROUNDS (default 5),
// BENCH_REDIS_ROUND_MS (1500), BENCH_REDIS_WARMUP_MS (1000).

import { URL } from 'node:url';
import { Redis } from 'ioredis';
import {
  armHardDeadline,
  assert,
  countRedisCommands,
  fmtInt,
  loadBuiltPackage,
  median,
  msSince,
  newTaskId,
  nowNs,
  platformLine,
  positiveEnv,
  printTargetTable,
  removeRedisKeys,
  sleep,
  tasksContext,
  verdict,
  startBenchRedis,
} from './common.mjs';

// ---------------------------------------------------------------------------------------------
// Parameters
// ---------------------------------------------------------------------------------------------

const ROUNDS = positiveEnv('BENCH_REDIS_ROUNDS', 5);
const ROUND_MS = positiveEnv('BENCH_REDIS_ROUND_MS', 1_500);
const WARMUP_MS = positiveEnv('BENCH_REDIS_WARMUP_MS', 1_000);
/** Whatever happens, the whole run ends by then. */
const HARD_DEADLINE_MS = 120_000;
/** (a) Operations per kind counted on the client, and the smaller sample checked on MONITOR. */
const COUNT_OPS = 200;
const MONITOR_OPS = 20;
/** (b) Cycles between two clock reads. */
const BATCH = 50;

const GET_TARGET = 1;
const TRANSITION_TARGET = 2;
const CYCLE_TARGET_RATIO = 0.7;

const HOUR = 3_600_000;
const OWNER = Object.freeze({ principal: 'bench' });
const RESULT = Object.freeze({ content: [{ type: 'text', text: 'ok' }] });
const PREFIX = `bench-redis-${process.pid}:`;

// ---------------------------------------------------------------------------------------------
// The built package
// ---------------------------------------------------------------------------------------------

const lib = await loadBuiltPackage();
const { RedisTaskStore, RedisTaskNotifier, redisNotifier } = lib;

/**
 * TasksService over a RedisTaskStore of its own under the bench prefix, from the module: no row
 * limit (the bench controls the size), a per-owner quota it never reaches, the default 1 h TTL,
 * and `notifier` (`null`: none). The context closes the store (and the notifier) when it closes.
 */
async function redisContext(url, notifier) {
  const connection = { connection: url, prefix: PREFIX };
  const store = new RedisTaskStore(connection);
  let ctx;
  try {
    ctx = await tasksContext(lib, {
      maxRows: null,
      // One owner makes every task: a quota above all of a round's, so the reserve script still
      // counts the owner's tasks on every create but never refuses one or makes room.
      maxTasksPerOwner: 1_000_000,
      defaultTtlMs: HOUR,
      store,
      notifier: notifier ? redisNotifier(connection) : null,
    });
  } catch (error) {
    await store.onApplicationShutdown(); // the context never started, so it will not close it
    throw error;
  }
  assert(ctx.store === store, 'the service does not use the store given to the module');
  return ctx;
}

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

const fmt2 = (n) => n.toFixed(2);

/** A Redis URL fit to print: its password, if any, masked. */
function shown(url) {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.toString();
  } catch {
    return '(REDIS_URL)';
  }
}

// ---------------------------------------------------------------------------------------------
// The Redis server: a private one from PATH, or REDIS_URL
// ---------------------------------------------------------------------------------------------

/** A private redis-server (or REDIS_URL), killed by the hard deadline. */
function startRedis() {
  return startBenchRedis('redis', (halt) => (stopOnDeadline = halt));
}

let stopOnDeadline = () => undefined;
armHardDeadline(
  HARD_DEADLINE_MS,
  `The benchmark did not finish within ${HARD_DEADLINE_MS / 1000} s; stopping.`,
  () => stopOnDeadline(),
);

/** Removes every key under the bench prefix. */
const removeKeys = (client) => removeRedisKeys(client, PREFIX);

// ---------------------------------------------------------------------------------------------
// Counting round trips on an ioredis client
// ---------------------------------------------------------------------------------------------

const snapshot = (counts) => ({ commands: counts.commands, roundTrips: counts.roundTrips });

// ---------------------------------------------------------------------------------------------
// (a) round trips per operation
// ---------------------------------------------------------------------------------------------

/**
 * The operations measured. `prepare(service, n)` makes what `run` needs (not counted);
 * `run(service, input, i)` is one operation. `target`: the most round trips allowed (`exact`: the
 * number expected); `null`: no target, shown for context.
 */
const OPERATIONS = [
  {
    name: 'get',
    target: GET_TARGET,
    exact: true,
    prepare: (service, n) => createMany(service, n),
    run: (service, task) => service.get(task.taskId, OWNER),
  },
  {
    name: 'progress',
    target: TRANSITION_TARGET,
    prepare: (service, n) => createMany(service, n),
    run: (service, task, i) => service.progress(task.taskId, `step ${i}`),
  },
  {
    name: 'complete',
    target: TRANSITION_TARGET,
    prepare: (service, n) => createMany(service, n),
    run: (service, task) => service.complete(task.taskId, RESULT),
  },
  {
    name: 'cancel (as the owner)',
    target: TRANSITION_TARGET,
    prepare: (service, n) => createMany(service, n),
    run: (service, task) => service.cancel(task.taskId, OWNER),
  },
  {
    name: 'complete, task without TTL',
    target: TRANSITION_TARGET,
    prepare: (service, n) => createMany(service, n, { ttlMs: null }),
    run: (service, task) => service.complete(task.taskId, RESULT),
  },
  {
    name: 'create',
    target: null,
    prepare: async (_service, n) => Array.from({ length: n }),
    run: (service) => service.create(OWNER),
  },
];

async function createMany(service, n, params = {}) {
  const tasks = [];
  for (let i = 0; i < n; i++) tasks.push(await service.create(OWNER, params));
  return tasks;
}

/** Round trips and commands per operation, counted on the store's client. */
async function countPerOperation(service, counts) {
  const results = [];
  for (const operation of OPERATIONS) {
    const inputs = await operation.prepare(service, COUNT_OPS);
    const before = snapshot(counts);
    for (const [i, input] of inputs.entries()) await operation.run(service, input, i);
    results.push({
      operation,
      roundTrips: (counts.roundTrips - before.roundTrips) / COUNT_OPS,
      commands: (counts.commands - before.commands) / COUNT_OPS,
    });
  }
  return results;
}

/**
 * The same operations seen from the server: MONITOR on a connection of its own lists every
 * command the store's connection sent (by its address), and the commands its scripts ran (source
 * `lua`). Returns per operation: commands from the store's connection, commands inside scripts.
 */
async function monitorPerOperation(url, service, store) {
  const info = await store.client.client('INFO');
  const address = /\baddr=(\S+)/.exec(info)?.[1];
  assert(address !== undefined, `no addr in CLIENT INFO: ${info}`);
  const admin = new Redis(url);
  const monitor = await admin.monitor();
  let fromStore = 0;
  let inScripts = 0;
  const seen = new Set();
  monitor.on('monitor', (_time, args, source) => {
    if (source === address) fromStore++;
    else if (source === 'lua') inScripts++;
    else if (args[0]?.toLowerCase() === 'echo') seen.add(args[1]);
  });
  const marked = new Redis(url);
  /** Waits until MONITOR has shown everything sent before now (MONITOR keeps server order). */
  const flush = async () => {
    const marker = `bench-marker-${seen.size}-${Date.now()}`;
    await marked.echo(marker);
    const until = Date.now() + 5_000;
    while (!seen.has(marker)) {
      assert(Date.now() < until, 'MONITOR did not show the marker');
      await sleep(5);
    }
  };
  const results = [];
  try {
    await flush();
    for (const operation of OPERATIONS) {
      const inputs = await operation.prepare(service, MONITOR_OPS);
      await flush();
      const before = { fromStore, inScripts };
      for (const [i, input] of inputs.entries()) await operation.run(service, input, i);
      await flush();
      results.push({
        operation,
        commands: (fromStore - before.fromStore) / MONITOR_OPS,
        scripted: (inScripts - before.inScripts) / MONITOR_OPS,
      });
    }
  } finally {
    monitor.disconnect();
    admin.disconnect();
    marked.disconnect();
  }
  return results;
}

/**
 * What the Redis notifier adds: PUBLISH on its own connection per change, not awaited. Measured
 * on a second context with `notifier: redisNotifier(...)` (and a store of its own, same prefix).
 */
async function countNotifier(url) {
  const ctx = await redisContext(url, true);
  try {
    const { service, notifier } = ctx;
    assert(notifier instanceof RedisTaskNotifier, 'the notifier is not the Redis notifier');
    await notifier.ready;
    // Its publishing connection, read for this count only.
    const publisher = countRedisCommands(notifier.publisher);
    const tasks = await createMany(service, COUNT_OPS);
    const before = snapshot(publisher);
    for (const [i, task] of tasks.entries()) await service.progress(task.taskId, `step ${i}`);
    return (publisher.commands - before.commands) / COUNT_OPS;
  } finally {
    await ctx.close();
  }
}

// ---------------------------------------------------------------------------------------------
// (b) create → get → complete cycles
// ---------------------------------------------------------------------------------------------

/** The subject: TasksService over RedisTaskStore, as an app calls it (notifier: none). */
function subjectContender(service, counts) {
  return {
    name: 'TasksService + RedisTaskStore',
    counts,
    async batch(n) {
      for (let i = 0; i < n; i++) {
        const { taskId } = await service.create(OWNER);
        await service.get(taskId, OWNER);
        await service.complete(taskId, RESULT);
      }
    },
  };
}

/**
 * The baseline: the same five sequential round trips with plain commands on a raw client, the
 * same payloads (the record as JSON: written twice, read and parsed twice), no scripts, no
 * version check, no expiry, no timeouts.
 */
function baselineContender(client, counts) {
  const rowsKey = `${PREFIX}baseline-rows`;
  return {
    name: 'raw ioredis, same round trips',
    counts,
    async batch(n) {
      for (let i = 0; i < n; i++) {
        // create: reserve a row, write the record
        const taskId = newTaskId();
        const now = Date.now();
        const key = `${PREFIX}baseline:{${taskId}}`;
        const record = {
          taskId,
          owner: { principal: OWNER.principal, tenant: null },
          status: 'working',
          createdAt: now,
          lastUpdatedAt: now,
          ttlMs: HOUR,
          version: 1,
        };
        await client.zadd(rowsKey, 'NX', now + HOUR, taskId);
        await client.hset(key, 'v', 1, 'j', JSON.stringify(record));
        // get, as the owner
        const got = JSON.parse(await client.hget(key, 'j'));
        if (got.owner.principal !== OWNER.principal) throw new Error('baseline: not found');
        // complete: read, then write the new record
        const current = JSON.parse(await client.hget(key, 'j'));
        const { taskId: id, owner, createdAt, ttlMs, version } = current;
        const completed = {
          taskId: id,
          owner,
          status: 'completed',
          createdAt,
          lastUpdatedAt: Math.max(Date.now(), current.lastUpdatedAt),
          ttlMs,
          version: version + 1,
          result: { ...RESULT, resultType: 'complete' },
        };
        await client.hset(key, 'v', version + 1, 'j', JSON.stringify(completed));
      }
    },
  };
}

/** The server's CPU time so far, in µs (`INFO cpu`: user + system, main thread included). */
async function serverCpuUs(admin) {
  const info = await admin.info('cpu');
  const field = (name) => Number(new RegExp(`${name}:([\\d.]+)`).exec(info)?.[1] ?? NaN);
  return (field('used_cpu_user') + field('used_cpu_sys')) * 1e6;
}

/**
 * One round: the two contenders take turns, BATCH cycles at a time, until each has run for about
 * `ms`; so a slow spell of the machine hits both alike. Returns per contender the cycles per
 * second, the round trips per cycle, and the CPU time per cycle of this process and of Redis
 * (read around each batch, outside the timed window).
 */
async function round(contenders, ms, admin) {
  const totals = contenders.map(() => ({ ns: 0n, cycles: 0, clientUs: 0, serverUs: 0 }));
  const before = contenders.map((contender) => snapshot(contender.counts));
  const budget = BigInt(Math.round(ms * 1e6));
  while (totals.some((total) => total.ns < budget)) {
    for (const [i, contender] of contenders.entries()) {
      const total = totals[i];
      const server = await serverCpuUs(admin);
      const cpu = process.cpuUsage();
      const start = nowNs();
      await contender.batch(BATCH);
      total.ns += nowNs() - start;
      const used = process.cpuUsage(cpu);
      total.clientUs += used.user + used.system;
      total.serverUs += (await serverCpuUs(admin)) - server;
      total.cycles += BATCH;
    }
  }
  return contenders.map((contender, i) => {
    const { ns, cycles, clientUs, serverUs } = totals[i];
    return {
      rate: cycles / (Number(ns) / 1e9),
      roundTrips: (contender.counts.roundTrips - before[i].roundTrips) / cycles,
      clientUs: clientUs / cycles,
      serverUs: serverUs / cycles,
    };
  });
}

async function benchCycles(subject, baseline, admin) {
  await round([subject, baseline], WARMUP_MS, admin);
  await removeKeys(admin);
  const results = new Map([
    [subject, []],
    [baseline, []],
  ]);
  const ratios = [];
  for (let i = 0; i < ROUNDS; i++) {
    // Who goes first alternates from round to round.
    const order = i % 2 === 0 ? [subject, baseline] : [baseline, subject];
    const measured = await round(order, ROUND_MS, admin);
    for (const [j, contender] of order.entries()) results.get(contender).push(measured[j]);
    ratios.push(results.get(subject)[i].rate / results.get(baseline)[i].rate);
    await removeKeys(admin); // every round starts on an empty prefix
  }
  return { results, ratios };
}

// ---------------------------------------------------------------------------------------------
// Main
// ---------------------------------------------------------------------------------------------

const totalStart = nowNs();
const redis = await startRedis();
const admin = new Redis(redis.url);
const serverInfo = await admin.info('server');
const redisVersion = /redis_version:(\S+)/.exec(serverInfo)?.[1] ?? 'unknown';

console.log('nestjs-mcp-tasks Redis store benchmark');
console.log(platformLine());
console.log(
  `redis-server ${redisVersion} at ${shown(redis.url)} (${redis.own ? 'private, no persistence' : 'REDIS_URL'}), key prefix ${PREFIX}`,
);

let ctx;
let baselineClient;
try {
  ctx = await redisContext(redis.url, false);
  const { service, store } = ctx;
  // One checked cycle before anything is counted (this also loads the scripts).
  const created = await service.create(OWNER);
  assert((await service.get(created.taskId, OWNER)).version === 1, 'get after create');
  const done = await service.complete(created.taskId, RESULT);
  assert(done.status === 'completed' && done.version > 1, 'complete');
  await createMany(service, 1, { ttlMs: null }).then(([task]) =>
    service.complete(task.taskId, RESULT),
  );

  const storeCounts = countRedisCommands(store.client);

  console.log(
    `\n(a) Redis round trips per operation (${COUNT_OPS} of each, counted on the store's client)`,
  );
  const counted = await countPerOperation(service, storeCounts);
  const monitored = await monitorPerOperation(redis.url, service, store);
  const width = Math.max(...OPERATIONS.map((operation) => operation.name.length));
  for (const [i, { operation, roundTrips, commands }] of counted.entries()) {
    const server = monitored[i];
    assert(
      Math.abs(server.commands - commands) < 1e-9,
      `${operation.name}: ${commands} commands counted on the client, ${server.commands} on MONITOR`,
    );
    console.log(
      `    ${operation.name.padEnd(width)}  ${fmt2(roundTrips)} round trips, ${fmt2(commands)} commands` +
        ` (MONITOR: ${fmt2(server.commands)}, ${fmt2(server.scripted)} more run inside scripts)`,
    );
  }
  const publishes = await countNotifier(redis.url);
  console.log(
    `    context: with the Redis notifier, each change also sends ${fmt2(publishes)} PUBLISH on the notifier's own connection (not awaited)`,
  );

  console.log(`\n(b) create → get → complete cycles per second`);
  console.log(
    `    warm-up ${WARMUP_MS} ms each, then ${ROUNDS} rounds of ~${ROUND_MS} ms per contender, taking turns ${BATCH} cycles at a time; keys removed between rounds`,
  );
  baselineClient = new Redis(redis.url, { maxRetriesPerRequest: null });
  const baselineCounts = countRedisCommands(baselineClient);
  const subject = subjectContender(service, storeCounts);
  const baseline = baselineContender(baselineClient, baselineCounts);
  const { results, ratios } = await benchCycles(subject, baseline, admin);
  const names = Math.max(subject.name.length, baseline.name.length);
  for (const contender of [subject, baseline]) {
    const rounds = results.get(contender);
    const med = (key) => median(rounds.map((r) => r[key]));
    console.log(
      `    ${contender.name.padEnd(names)}  median ${fmtInt(med('rate')).padStart(6)} cycles/s,` +
        ` ${fmt2(med('roundTrips'))} round trips/cycle, CPU per cycle: this process ${fmtInt(med('clientUs'))} µs, Redis ${fmtInt(med('serverUs'))} µs` +
        `   rounds: ${rounds.map((r) => fmtInt(r.rate)).join(', ')}`,
    );
  }
  const subjectTrips = median(results.get(subject).map((r) => r.roundTrips));
  const baselineTrips = median(results.get(baseline).map((r) => r.roundTrips));
  assert(
    subjectTrips === baselineTrips,
    `round trips per cycle ${subjectTrips} vs ${baselineTrips}`,
  );
  const ratio = median(ratios);
  console.log(`    per-round ratios: ${ratios.map((r) => r.toFixed(3)).join(', ')}`);

  const rows = [
    ...counted
      .filter(({ operation }) => operation.target !== null)
      .map(({ operation, roundTrips }) => [
        `(a) round trips: ${operation.name}`,
        fmt2(roundTrips),
        `${operation.exact ? '=' : '≤'} ${operation.target}`,
        verdict(operation.exact ? roundTrips === operation.target : roundTrips <= operation.target),
      ]),
    [
      '(b) cycle ratio vs raw ioredis',
      `${ratio.toFixed(3)} (${fmtInt(median(results.get(subject).map((r) => r.rate)))} vs ${fmtInt(median(results.get(baseline).map((r) => r.rate)))}/s)`,
      `≥ ${CYCLE_TARGET_RATIO}`,
      verdict(ratio >= CYCLE_TARGET_RATIO),
    ],
  ];
  printTargetTable(rows);
} finally {
  await removeKeys(admin).catch(() => undefined);
  await ctx?.close();
  baselineClient?.disconnect();
  admin.disconnect();
  await redis.stop();
}
console.log(`(total ${(msSince(totalStart) / 1000).toFixed(1)} s)`);
// A report, not a test: a missed target does not fail the run.
process.exitCode = 0;
