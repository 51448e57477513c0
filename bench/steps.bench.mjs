// Step benchmark for nestjs-mcp-tasks: what `task.step` costs (issue 39), on the in-memory store,
// a private Redis and a private PostgreSQL, against baselines measured in the same run.
//
//   npm run bench:steps   (builds dist/, then runs this file)
//
// Each step returns a small result (`{ id: 'ch_<i>' }`), as a payment or an email id would be.
//
//   (a) Per step: whole calls of a task tool whose method takes 10 steps, against the same tool
//       with no step (the baseline call: create, the method, the completion). The per-step cost
//       is (call with 10 steps − baseline call) ÷ 10, in ms and as a ratio to the baseline call.
//       Target: per step ÷ baseline call ≤ 0.5 on every store.
//   (b) A step against a status message write (`task.progress`, which reads the task then writes
//       it: two round trips), timed one by one inside a method that alternates them (who goes
//       first alternating). A step writes without a read: one round trip. Target: step ÷ progress
//       ≤ 0.6 on Redis and on PostgreSQL (about half: one round trip where progress makes two,
//       plus the CPU both share), ≤ 1.0 on memory (a step never costs more than a status message).
//   (c) Store calls per step, counted by a proxy over the real store (as test/tools/steps.spec.ts
//       counts them), each call attributed to the step that made it: exactly 1 compareAndSet and
//       0 get per step, on every store. Beside it, the Redis round trips per step (counted on the
//       store's ioredis client) and the PostgreSQL statements per step (on its pg pool): 1 each.
//       Progress, for context: 1 get and 1 compareAndSet.
//
// The targets were set before the first run and are kept whatever a run gives.
//
// Each store gets two Nest application contexts (no HTTP) importing `TasksModule.forRoot({ store,
// notifier: null, lease: false, maxRows: null, maxTasksPerOwner: null, path: false, janitor: false,
// shutdown: { drainMs: 0 } })` from the built package, with the tools of this file: one on the
// bare store for the timings, one on the counting proxy for (c), so the proxy's own cost never
// lands in a timing. No notifier: a status message's publish would weigh on progress alone, and
// the comparison is of the store's work. No lease: its renewal would land in the counts now and
// then. Calls are made as the endpoint makes them, through the package's TaskToolRunner (found by
// class name, `providerNamed` in common.mjs), one at a time; a call's end is the moment the
// completion is written (heard by an `@OnTaskChange` method), and its task is deleted after it,
// outside the timed window, so the store holds nothing between calls.
//
// (a) After a warm-up, ROUNDS rounds: in each, CALLS calls of the tool with no step and CALLS of
// the one with 10 (20 × CALLS on memory, where a call takes microseconds), who goes first
// alternating from round to round; each turn's median call; the per-step cost and its ratio per
// round; the medians over the rounds. (b) In each round, 5 calls (100 on memory) of a method that
// writes 20 status messages and takes 20 steps, alternating; each write timed with hrtime; the
// medians per round, the ratio per round, the median ratio. (c) 20 calls of each tool on the counting context: each
// store call is attributed (AsyncLocalStorage, on only in this phase) to the step or status
// message that made it, so the call's own reads (its watch of the task) do not count for a step.
//
// It is a report, not a test: it exits 0 whether a target is met or missed, and non-zero only when
// it cannot run (dist/ missing, no redis-server or PostgreSQL, a broken invariant, the hard
// deadline at 150 s). It takes about 30 s. It starts its own redis-server and PostgreSQL
// (`synchronous_commit=off`, as bench/postgres) and stops both; with REDIS_URL / POSTGRES_URL it
// uses those, under a key prefix / schema of its own that it removes at the end.
//
// Knobs (environment, all optional): REDIS_URL, POSTGRES_URL, BENCH_STEPS_ROUNDS (default 7),
// BENCH_STEPS_CALLS (default 100), BENCH_STEPS_ONLY (memory, redis or postgres: one store).
//
// Four runs on the 2-vCPU development VM (Node 20, redis-server and PostgreSQL 15 on the same
// machine, load average 0.9–1.5 at the starts), from the code as committed, ratios (a) / (b):
// memory 0.84–0.86 / 2.46–2.60; Redis 0.33–0.48 / 0.58–0.67; PostgreSQL 0.33–0.40 / 0.58–0.64;
// (c) exactly 1 compareAndSet and 0 get for every step, on every store, in every run. Redis's
// times move as a whole from run to run (a step 70 µs in one run, 120 µs in the next), its ratios
// less. A CPU profile of the memory store's turns puts the step's own code first: the copy of
// the journal in `recordStepTask` (a new object per step, the size of the journal so far), the
// size count of the record (`jsonBytes`) and the JSON copy of the value (`jsonOf`).

import 'reflect-metadata';
import { AsyncLocalStorage } from 'node:async_hooks';
import { Redis } from 'ioredis';
import pg from 'pg';
import {
  armHardDeadline,
  assert,
  decorateMethod,
  fmt,
  loadBuiltPackage,
  machineLine,
  median,
  msSince,
  nowNs,
  positiveEnv,
  printTargetTable,
  providerNamed,
  removeRedisKeys,
  startBenchPostgres,
  startBenchRedis,
  verdict,
} from './common.mjs';

const HARD_DEADLINE_MS = 150_000;
const ROUNDS = positiveEnv('BENCH_STEPS_ROUNDS', 7);
const CALLS = positiveEnv('BENCH_STEPS_CALLS', 100);
/** On memory a call takes microseconds: this many times the calls, so a turn outlasts the noise. */
const MEMORY_SCALE = 20;
const ONLY = process.env.BENCH_STEPS_ONLY ?? '';
const STORE_NAMES = ['memory', 'redis', 'postgres'];
if (ONLY !== '' && !STORE_NAMES.includes(ONLY)) {
  console.error(`BENCH_STEPS_ONLY must be one of ${STORE_NAMES.join(', ')}, got ${ONLY}`);
  process.exit(1);
}
/** Steps of the method measured against the baseline in (a). */
const STEPS = 10;
/** Steps and status messages of one call in (b), and the calls of a round. */
const PAIRS = 20;
const MIXED_CALLS = 5;
/** Calls of each tool counted in (c). */
const COUNTED_CALLS = 20;
const PREFIX = `bench-steps-${process.pid}:`;
const SCHEMA = `bench_steps_${process.pid}`;
const OWNER = { principal: 'alice' };

/** A duration given in ms: in µs below a millisecond (a step on memory takes a few). */
const dur = (ms) => (ms < 1 ? `${fmt(ms * 1000, 1)} µs` : `${fmt(ms, 2)} ms`);

const halts = [];
armHardDeadline(
  HARD_DEADLINE_MS,
  `The benchmark did not finish within ${HARD_DEADLINE_MS / 1000} s; stopping.`,
  () => halts.forEach((halt) => halt()),
);

const lib = await loadBuiltPackage();
const { Injectable, Module } = await import('@nestjs/common');
const { DiscoveryModule, NestFactory } = await import('@nestjs/core');

// ---------------------------------------------------------------------------------------------
// The tools, and what the calls leave for the bench
// ---------------------------------------------------------------------------------------------

/**
 * The counts of (c): while `counting`, each step and status message runs with an entry of its own
 * in `doing`, which the counting proxy and clients add to. Off in the timed phases: in Node 20 an
 * AsyncLocalStorage in use slows every promise, so it is disabled again after each count.
 */
const doing = new AsyncLocalStorage();
let counting = false;
const entries = [];
function within(what, run) {
  if (!counting) return run();
  const entry = { what, get: 0, compareAndSet: 0, roundTrips: 0, statements: 0, inFlight: 0 };
  entries.push(entry);
  return doing.run(entry, run);
}
/** The timings of (b), in ms, filled by the `mixed` method. */
const timed = { step: [], progress: [] };

const done = { content: [{ type: 'text', text: 'done' }] };

class StepTools {
  async none() {
    return done;
  }

  async ten(_input, task) {
    for (let i = 0; i < STEPS; i++) {
      await within('step', () => task.step(`charge ${i}`, () => ({ id: `ch_${i}` })));
    }
    return done;
  }

  async mixed(_input, task) {
    const step = async (i) => {
      const start = nowNs();
      await within('step', () => task.step(`charge ${i}`, () => ({ id: `ch_${i}` })));
      timed.step.push(msSince(start));
    };
    // Each message differs from the last: the same message again writes nothing.
    const progress = async (i) => {
      const start = nowNs();
      await within('progress', () => task.progress(`Charged ${i}`));
      timed.progress.push(msSince(start));
    };
    for (let i = 0; i < PAIRS; i++) {
      if (i % 2 === 0) {
        await step(i);
        await progress(i);
      } else {
        await progress(i);
        await step(i);
      }
    }
    return done;
  }
}
for (const name of ['none', 'ten', 'mixed']) {
  decorateMethod([lib.TaskTool({ name })], StepTools.prototype, name);
}
Reflect.decorate([Injectable()], StepTools);

/** When each task's completion was written (hrtime), and the calls waiting for one. */
const ended = new Map();
const waiting = new Map();
class Ends {
  heard(record) {
    if (record.status === 'working') return;
    ended.set(record.taskId, { at: nowNs(), status: record.status });
    waiting.get(record.taskId)?.();
  }
}
decorateMethod([lib.OnTaskChange()], Ends.prototype, 'heard');
Reflect.decorate([Injectable()], Ends);

/**
 * An app over `store` (an instance, closed with the app): the tools above as task tools, no
 * notifier, no lease, no limits. Returns the app, a `call(name)` that runs one call to its end
 * (its duration in ms), and `close()`.
 */
async function startApp(store) {
  class BenchModule {}
  Reflect.decorate(
    [
      Module({
        imports: [
          DiscoveryModule,
          lib.TasksModule.forRoot({
            store,
            notifier: null,
            lease: false,
            maxRows: null,
            maxTasksPerOwner: null,
            path: false,
            janitor: false,
            shutdown: { drainMs: 0 },
          }),
        ],
        providers: [StepTools, Ends],
      }),
    ],
    BenchModule,
  );
  const app = await NestFactory.createApplicationContext(BenchModule, {
    logger: ['error', 'warn'],
    abortOnError: false,
  });
  const runner = await providerNamed(app, 'TaskToolRunner');
  const registry = await providerNamed(app, 'TaskToolRegistry');
  const tools = Object.fromEntries(
    ['none', 'ten', 'mixed'].map((name) => [name, registry.get(name)]),
  );
  assert(
    Object.values(tools).every((tool) => tool !== undefined),
    'a tool of the bench is not registered',
  );
  const appStore = app.get(lib.TaskStore);
  /** One call, from its start to its completion written; its task is then deleted. */
  const call = async (name) => {
    const start = nowNs();
    const { taskId } = await runner.start(tools[name], {}, OWNER);
    if (!ended.has(taskId)) await new Promise((resolve) => waiting.set(taskId, resolve));
    const end = ended.get(taskId);
    ended.delete(taskId);
    waiting.delete(taskId);
    if (end.status !== 'completed') throw new Error(`A ${name} call ended ${end.status}`);
    await appStore.delete(taskId);
    return Number(end.at - start) / 1e6;
  };
  return { app, call, close: () => app.close() };
}

// ---------------------------------------------------------------------------------------------
// Counting
// ---------------------------------------------------------------------------------------------

/** Adds one `kind` to the entry of the step or status message being done, if any. */
function add(kind) {
  const entry = doing.getStore();
  if (entry !== undefined) entry[kind]++;
  return entry;
}

/** The real store behind a proxy that counts its `get` and `compareAndSet` calls. */
function countingStore(store) {
  const wrapped = new Map();
  return new Proxy(store, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver);
      if (property !== 'get' && property !== 'compareAndSet') return value;
      if (!wrapped.has(property)) {
        wrapped.set(property, (...args) => {
          add(property);
          return value.apply(target, args);
        });
      }
      return wrapped.get(property);
    },
  });
}

/**
 * Counts the round trips of an ioredis client (the one door every command goes through, scripts
 * included): a command leaving while none of the same step's is in flight starts one, so
 * commands sent together share it.
 */
function countRedis(client) {
  const send = client.sendCommand;
  client.sendCommand = function (command, stream) {
    const entry = doing.getStore();
    if (entry !== undefined) {
      if (entry.inFlight === 0) entry.roundTrips++;
      entry.inFlight++;
      const settled = () => entry.inFlight--;
      command.promise.then(settled, settled);
    }
    return send.call(this, command, stream);
  };
}

/** Counts the statements sent on a pg pool (each one round trip: the store sends no batch). */
function countPg(pool) {
  const query = pool.query;
  pool.query = function (...args) {
    add('statements');
    return query.apply(this, args);
  };
}

// ---------------------------------------------------------------------------------------------
// Measures
// ---------------------------------------------------------------------------------------------

/** (a) and (b), on an app over a bare store: the medians of each round. */
async function timings(app, memory) {
  const calls = memory ? CALLS * MEMORY_SCALE : CALLS;
  const mixedCalls = memory ? MIXED_CALLS * MEMORY_SCALE : MIXED_CALLS;
  // Warm-up: statements prepared, code optimised, connections open.
  for (let i = 0; i < calls; i++) {
    await app.call('none');
    await app.call('ten');
  }
  await app.call('mixed');
  const rounds = [];
  for (let round = 0; round < ROUNDS; round++) {
    const turns = {};
    for (const name of round % 2 === 0 ? ['none', 'ten'] : ['ten', 'none']) {
      const times = [];
      for (let i = 0; i < calls; i++) times.push(await app.call(name));
      turns[name] = median(times);
    }
    timed.step.length = 0;
    timed.progress.length = 0;
    for (let i = 0; i < mixedCalls; i++) await app.call('mixed');
    const perStep = (turns.ten - turns.none) / STEPS;
    const step = median(timed.step);
    const progress = median(timed.progress);
    rounds.push({
      none: turns.none,
      ten: turns.ten,
      perStep,
      perStepRatio: perStep / turns.none,
      step,
      progress,
      stepRatio: step / progress,
    });
  }
  const of = (key) => median(rounds.map((round) => round[key]));
  const spread = (key) => {
    const values = rounds.map((round) => round[key]);
    return [Math.min(...values), Math.max(...values)];
  };
  return {
    calls,
    none: of('none'),
    ten: of('ten'),
    perStep: of('perStep'),
    perStepRatio: of('perStepRatio'),
    perStepSpread: spread('perStepRatio'),
    step: of('step'),
    progress: of('progress'),
    stepRatio: of('stepRatio'),
    stepSpread: spread('stepRatio'),
  };
}

/** (c), on an app over the counting proxy: what each step and status message sent. */
async function counts(app) {
  entries.length = 0;
  counting = true;
  try {
    for (let i = 0; i < COUNTED_CALLS; i++) await app.call('ten');
    for (let i = 0; i < MIXED_CALLS; i++) await app.call('mixed');
  } finally {
    counting = false;
    doing.disable();
  }
  const of = (what) => {
    const list = entries.filter((entry) => entry.what === what);
    const range = (kind) => {
      const values = list.map((entry) => entry[kind]);
      return { min: Math.min(...values), max: Math.max(...values) };
    };
    return {
      n: list.length,
      get: range('get'),
      compareAndSet: range('compareAndSet'),
      roundTrips: range('roundTrips'),
      statements: range('statements'),
    };
  };
  const steps = of('step');
  const progress = of('progress');
  assert(
    steps.n === COUNTED_CALLS * STEPS + MIXED_CALLS * PAIRS,
    `counted ${steps.n} steps, expected ${COUNTED_CALLS * STEPS + MIXED_CALLS * PAIRS}`,
  );
  assert(progress.n === MIXED_CALLS * PAIRS, `counted ${progress.n} status messages`);
  return { steps, progress };
}

// ---------------------------------------------------------------------------------------------
// The stores
// ---------------------------------------------------------------------------------------------

/** Each store: how to make a bare one, and a counted one (with what to close after it). */
function memoryStore() {
  return {
    label: 'memory',
    bare: () => new lib.InMemoryTaskStore(),
    counted: () => ({ store: countingStore(new lib.InMemoryTaskStore()), close: async () => {} }),
  };
}

function redisStore(url) {
  return {
    label: 'Redis',
    bare: () => new lib.RedisTaskStore({ connection: url, prefix: PREFIX }),
    counted: () => {
      const client = new Redis(url);
      countRedis(client);
      return {
        store: countingStore(new lib.RedisTaskStore({ client, prefix: PREFIX })),
        close: async () => void (await client.quit()),
      };
    },
  };
}

function postgresStore(url) {
  return {
    label: 'PostgreSQL',
    bare: () => new lib.PostgresTaskStore({ connection: url, schema: SCHEMA }),
    counted: () => {
      const pool = new pg.Pool({ connectionString: url });
      countPg(pool);
      return {
        store: countingStore(new lib.PostgresTaskStore({ connection: pool, schema: SCHEMA })),
        close: () => pool.end(),
      };
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Main
// ---------------------------------------------------------------------------------------------

const totalStart = nowNs();
const wanted = (name) => ONLY === '' || ONLY === name;
const servers = [];
const stores = [];
if (wanted('memory')) stores.push(memoryStore());
let redis;
if (wanted('redis')) {
  redis = await startBenchRedis('steps', (halt) => halts.push(halt));
  servers.push(redis);
  stores.push(redisStore(redis.url));
}
let postgres;
if (wanted('postgres')) {
  postgres = await startBenchPostgres(
    'steps',
    // As bench/postgres: a commit costs what the server does, not what this machine's disk does.
    { synchronous_commit: 'off', shared_buffers: '128MB' },
    (halt) => halts.push(halt),
  );
  servers.push(postgres);
  stores.push(postgresStore(postgres.url));
}

console.log('nestjs-mcp-tasks step benchmark (task.step, issue 39)');
console.log(machineLine());
console.log(
  `${ROUNDS} rounds; (a) ${CALLS} calls per turn (${CALLS * MEMORY_SCALE} on memory) of a tool with ` +
    `${STEPS} steps and of one with none, one at a time; (b) ${MIXED_CALLS} calls per round of ` +
    `${PAIRS} steps and ${PAIRS} status messages, alternating; (c) ${COUNTED_CALLS} + ` +
    `${MIXED_CALLS} calls counted. Servers: ${[
      redis && `Redis ${redis.own ? 'private, no persistence' : 'REDIS_URL'}`,
      postgres && `PostgreSQL ${postgres.own ? 'private, synchronous_commit off' : 'POSTGRES_URL'}`,
    ]
      .filter(Boolean)
      .join('; ')}`,
);

const results = [];
try {
  for (const store of stores) {
    const timedApp = await startApp(store.bare());
    let time;
    try {
      time = await timings(timedApp, store.label === 'memory');
    } finally {
      await timedApp.close();
    }
    const counted = store.counted();
    const countedApp = await startApp(counted.store);
    let count;
    try {
      count = await counts(countedApp);
    } finally {
      await countedApp.close();
      await counted.close();
    }
    results.push({ store, time, count });
    const ms = dur;
    console.log(
      `\n${store.label}: baseline call ${ms(time.none)}, call with ${STEPS} steps ${ms(time.ten)}; ` +
        `per step ${ms(time.perStep)} = ${fmt(time.perStepRatio, 3)} of the baseline call ` +
        `(rounds ${fmt(time.perStepSpread[0], 3)}–${fmt(time.perStepSpread[1], 3)})`,
    );
    console.log(
      `  step ${ms(time.step)} vs status message ${ms(time.progress)}: ${fmt(time.stepRatio, 3)} ` +
        `(rounds ${fmt(time.stepSpread[0], 3)}–${fmt(time.stepSpread[1], 3)})`,
    );
    const range = ({ min, max }) => (min === max ? `${min}` : `${min}–${max}`);
    const { steps, progress } = count;
    console.log(
      `  per step (${steps.n}): compareAndSet ${range(steps.compareAndSet)}, get ${range(steps.get)}` +
        `${store.label === 'Redis' ? `, Redis round trips ${range(steps.roundTrips)}` : ''}` +
        `${store.label === 'PostgreSQL' ? `, statements ${range(steps.statements)}` : ''}; ` +
        `per status message (${progress.n}): compareAndSet ${range(progress.compareAndSet)}, ` +
        `get ${range(progress.get)}` +
        `${store.label === 'Redis' ? `, Redis round trips ${range(progress.roundTrips)}` : ''}` +
        `${store.label === 'PostgreSQL' ? `, statements ${range(progress.statements)}` : ''}`,
    );
  }
} finally {
  if (redis && !redis.own) {
    const client = new Redis(redis.url);
    await removeRedisKeys(client, PREFIX);
    await client.quit();
  }
  if (postgres && !postgres.own) {
    const client = new pg.Client({ connectionString: postgres.url });
    await client.connect();
    await client.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
    await client.end();
  }
  for (const server of servers) await server.stop();
}

const rows = [];
for (const { store, time, count } of results) {
  const remote = store.label !== 'memory';
  const ms = dur;
  rows.push([
    `(a) ${store.label}: per step ÷ baseline call`,
    `${fmt(time.perStepRatio, 3)} (${ms(time.perStep)} per step; call ${ms(time.none)}, with ${STEPS} steps ${ms(time.ten)})`,
    '≤ 0.5',
    verdict(time.perStepRatio <= 0.5),
  ]);
  const bar = remote ? 0.6 : 1.0;
  rows.push([
    `(b) ${store.label}: step ÷ status message write`,
    `${fmt(time.stepRatio, 3)} (${ms(time.step)} vs ${ms(time.progress)})`,
    `≤ ${fmt(bar, 1)}`,
    verdict(time.stepRatio <= bar),
  ]);
  const { steps, progress } = count;
  const exact = (range, value) => range.min === value && range.max === value;
  const range = ({ min, max }) => (min === max ? `${min}` : `${min}–${max}`);
  const wire =
    store.label === 'Redis'
      ? { kind: 'roundTrips', name: 'Redis round trips' }
      : store.label === 'PostgreSQL'
        ? { kind: 'statements', name: 'statements' }
        : undefined;
  const wireOk = wire === undefined || exact(steps[wire.kind], 1);
  rows.push([
    `(c) ${store.label}: store calls per step`,
    `compareAndSet ${range(steps.compareAndSet)}, get ${range(steps.get)}` +
      (wire ? `, ${wire.name} ${range(steps[wire.kind])}` : '') +
      ` (${steps.n} steps; status message: compareAndSet ${range(progress.compareAndSet)}, get ${range(progress.get)}` +
      (wire ? `, ${wire.name} ${range(progress[wire.kind])}` : '') +
      ')',
    wire ? `1 and 0, ${wire.name} 1` : '1 and 0',
    verdict(exact(steps.compareAndSet, 1) && exact(steps.get, 0) && wireOk),
  ]);
}
console.log(`\nTook ${fmt(msSince(totalStart) / 1000, 1)} s.`);
printTargetTable(rows);
process.exit(0);
