// Timing-oracle benchmark for nestjs-mcp-tasks: does a `tasks/get` of another owner's task take
// longer than one of an id that does not exist? If it does, any principal can tell which ids
// exist, for the price of timing its own requests (issue 23: on Redis the foreign id was slower in
// 97.5 % of pairs for a record holding 800 KB).
//
//   npm run bench          (builds dist/ and the demo, then runs every benchmark)
//   npm run bench:oracle   (builds dist/, then runs this file)
//
// On both stores (in memory; Redis: a private redis-server from PATH, without persistence, or
// REDIS_URL under a key prefix of its own, removed at the end), with the largest record the
// default options allow: a task of alice's completed with a result as large as `maxTaskBytes`
// (1 MiB by default) lets it be.
//
//   (a) Over real HTTP: a server in a child process (this file with `--serve <store>`), the
//       package's TasksModule with its defaults, Express, on loopback; bob's 2026-07-28
//       `tasks/get` of alice's task against one of a made-up id of the same form (43 characters
//       of base64url), one request at a time on one keep-alive connection. Both ids are asked
//       again and again (one made-up id per run, as there is one foreign one); a context line
//       sets that made-up id against one new in each request.
//   (b) At the store: `store.get(id, bob)` of the same two, in this process, without HTTP (what
//       the store itself adds, apart from the noise of the network stack). A context line shows
//       `store.get(id)` unscoped, which on Redis transfers and parses the record: what the owner
//       check avoids, and proof that the bench sees such a difference when there is one. Another
//       sets alice's 1 MiB task against a new one of hers with nothing in it, both foreign to bob:
//       whether the record's size shows.
//
// Each comparison runs interleaved pairs (the order inside a pair drawn at random, so neither id
// is always first) after a warm-up, and gives the median of each id and the share of pairs in
// which the foreign id was slower (a tie counts half). Both answers must be the same bytes, or the
// run stops. Target: the foreign id slower in 45–55 % of the pairs, on each store, over HTTP and
// at the store: no more often than chance.
//
// It is a report, not a test: it exits 0 whether a target is met or missed, and non-zero only when
// it cannot run (dist/ missing, no redis-server, a broken invariant).
//
// Environment knobs (all optional): REDIS_URL, BENCH_ORACLE_PAIRS (default 3000, at least 2,000
// for the target), BENCH_ORACLE_STORE_PAIRS (10000), BENCH_ORACLE_WARMUP (300 pairs).
//
// -----------------------------------------------------------------------------------------------
// Method, in detail:
//
// `bench/oracle.bench.mjs` is plain ESM JavaScript. It asks whether bob can tell that an id he does
// not own exists: if his `tasks/get` of alice's task took longer than one of an id that does not
// exist, timing his own requests would tell him which ids are real (issue 23 measured it on Redis
// before the owner was compared inside Redis: for a record holding 800 KB the foreign id was slower
// in 97.5 % of 2,000 pairs). It imports the built package's public entries, on both stores: a
// `new InMemoryTaskStore()` and a `new RedisTaskStore({ connection, prefix })` on its own
// `redis-server` from PATH (free loopback port, temporary directory, no persistence; with
// `REDIS_URL`, that server under the prefix `bench-oracle-<pid>:`, removed at the end). On each, alice
// owns the largest record the default options allow: a task completed with a text result that makes
// the record exactly `maxTaskBytes` (1,048,576 bytes as TasksService counts it; the first try a little
// over, then shortened by the excess the refusal names). It takes about 25 s, and a hard deadline ends
// it at 240 s whatever happens. It is a report, not a test: it exits 0 whether a target is met or
// missed, and non-zero only when it cannot run (no `dist/`, no `redis-server`, a broken invariant such
// as two answers that differ).
//
// **(a) Over HTTP.** The server is a child process (the same file, run as `--serve <store>`):
// `TasksModule.forRoot` with every default but the principal (`Authorization: Bearer <name>`) and the
// store, Express, on loopback. The parent sends bob's 2026-07-28 `tasks/get` of alice's task and of a
// made-up id of the same form (43 characters of base64url, made the service's way; one per run, sent
// again and again as alice's id is), one request at a time on one keep-alive connection, and times
// each from its write to its last byte. A context line, without target, sets that made-up id against
// one new in each request (2,000 pairs): what a new id costs by itself. Both must answer the same bytes (the same "Task not found", the JSON-RPC id being the
// same), checked on every request. 300 pairs warm up, then 3,000 pairs are measured; the order inside
// each pair is drawn at random, so neither id always goes first.
//
// **(b) At the store.** The same in this process, without HTTP: `store.get(id, { principal: 'bob' })`
// through the store the module was given, 10,000 pairs. Each get takes a string of its own (as a
// request's parsed id is), since V8 keeps a string's hash once computed and the same string object
// again would make the foreign lookup cheaper. Two context lines, without target:
// `store.get(id)` unscoped, which on Redis transfers and parses the record (what the owner check
// avoids, and a proof that the bench sees such a difference when there is one), and alice's 1 MiB
// task against a new, empty task of hers, both foreign to bob (whether the size shows).
//
// For each, the script gives both medians and the share of pairs in which the foreign id was slower (a
// tie counts half). **Target: 45–55 %, over HTTP and at the store, on each store, with at least 2,000
// pairs.**
//
// **Knobs** (environment, all optional): `REDIS_URL`, `BENCH_ORACLE_PAIRS` (3000),
// `BENCH_ORACLE_STORE_PAIRS` (10000), `BENCH_ORACLE_WARMUP` (300).
//
// Two runs' summaries, from the 2-vCPU development VM (Node 20, redis-server 7.0 on the same machine,
// other work running at the same time):
//
// ```
// memory, (a) HTTP: foreign id slower   49.8 % of 3,000 (406.6 vs 406.0 µs)  target 45–55 %  PASS
// memory, (b) store: foreign id slower  83.4 % of 10,000 (0.4 vs 0.3 µs)     target 45–55 %  MISS
// redis, (a) HTTP: foreign id slower    48.8 % of 3,000 (544.9 vs 549.4 µs)  target 45–55 %  PASS
// redis, (b) store: foreign id slower   46.5 % of 10,000 (58.1 vs 58.5 µs)   target 45–55 %  PASS
//
// memory, (a) HTTP: foreign id slower   48.5 % of 3,000 (414.2 vs 415.7 µs)  target 45–55 %  PASS
// memory, (b) store: foreign id slower  83.7 % of 10,000 (0.4 vs 0.3 µs)     target 45–55 %  MISS
// redis, (a) HTTP: foreign id slower    48.9 % of 3,000 (542.5 vs 542.8 µs)  target 45–55 %  PASS
// redis, (b) store: foreign id slower   46.4 % of 10,000 (54.2 vs 54.9 µs)   target 45–55 %  PASS
// ```
//
// with, as context, the unscoped Redis get of the 1 MiB record at 2,992–3,054 µs against 201–222 µs
// for a made-up id (the foreign one slower in 99.6–99.9 % of pairs: the difference the owner check
// removes), and alice's 1 MiB task against her empty one, as bob, at 50.4–53.0 % on both stores.
//
// **Reading the figures.** Over HTTP neither store tells a foreign id from a made-up one: the shares
// stay within two points of half, the medians within 5 µs of each other. On Redis the owner is
// compared inside the script that reads the record (`GET_OWNED` in `src/redis/redis.task-store.ts`),
// so a foreign record never leaves Redis; at the store the foreign id is even a little faster in about
// 54 % of pairs (0.4–0.7 µs): the script stops after reading the owner field of a foreign task, and
// reads a second field for a missing one. **The miss: the in-memory store at the store level.** A
// foreign id costs about 0.1 µs more than a made-up one in 83 % of pairs: `get` finds the record in
// its `Map` (a hit compares the key's characters, a miss rarely does), then checks its expiry and its
// owner, where a made-up id returns at the lookup. The cost does not depend on the record (its 1 MiB
// task and an empty one are even, 51–53 %), and over HTTP, where a request takes about 400 µs, it is
// not visible (48.5–49.8 %).
//
// **After: a made-up id checked like a foreign one.** The in-memory `get` now runs the expiry and
// owner checks of a missing id on a record of no one's (`NOBODY` in
// `src/store/in-memory.task-store.ts`). One run after it:
//
// ```
// memory, (a) HTTP: foreign id slower   46.7 % of 3,000 (404.1 vs 407.1 µs)  target 45–55 %  PASS
// memory, (b) store: foreign id slower  56.5 % of 10,000 (0.4 vs 0.4 µs)     target 45–55 %  MISS
// redis, (a) HTTP: foreign id slower    49.9 % of 3,000 (523.9 vs 524.3 µs)  target 45–55 %  PASS
// redis, (b) store: foreign id slower   46.5 % of 10,000 (32.8 vs 32.9 µs)   target 45–55 %  PASS
// ```
//
// 83 % became 56.5 %, with both medians at 0.4 µs: what is left is the `Map` hit's key comparison, a
// few nanoseconds, a miss by 1.5 points at the store and nothing over HTTP.
//
// **Then (2026-12-02): the stand-in shaped like a stored task, and like for like over HTTP.**
// `NOBODY` now has a stored task's fields in their order and a TTL, so a made-up id's checks compute
// an expiry as a real record's do (with `ttlMs: null` they returned at once). Three runs with it
// (the HTTP arm still sending a made-up id new in every request):
//
// ```
// memory, (a) HTTP: foreign id slower   43.8 % / 45.1 % / 43.1 % of 3,000    target 45–55 %
// memory, (b) store: foreign id slower  47.4 % / 48.6 % / 67.2 % of 10,000   target 45–55 %
// redis, (a) HTTP: foreign id slower    47.3 % / 45.7 % / 44.9 % of 3,000    target 45–55 %
// redis, (b) store: foreign id slower   44.1 % / 46.9 % / 47.2 % of 10,000   target 45–55 %
// ```
//
// Over HTTP the made-up id was the slower one, by 1.5–2.5 µs. An A/B found why: with one made-up id
// sent again and again, as alice's id is, the shares were 49.3–50.7 % on both stores (four runs);
// with a new made-up id in each request, 40.6–45.9 %. A new id costs the round trip about 2 µs
// whether or not a task has it, so the bench now compares like with like (one made-up id per run),
// and a context line sets that id against one new in each request, two ids of no task's. Two runs:
//
// ```
// memory, (a) HTTP: foreign id slower   50.3 % / 49.4 % of 3,000    target 45–55 %  PASS
// memory, (b) store: foreign id slower  65.4 % / 42.4 % of 10,000   target 45–55 %  MISS
// redis, (a) HTTP: foreign id slower    51.3 % / 49.3 % of 3,000    target 45–55 %  PASS
// redis, (b) store: foreign id slower   44.9 % / 46.2 % of 10,000   target 45–55 %  MISS / PASS
// context (HTTP): a made-up id asked again slower than a new one in 38.2 % / 39.0 % (memory)
//                 and 46.2 % / 41.4 % (Redis) of 2,000 pairs
// ```
//
// Over HTTP neither store tells a foreign id from a made-up one. At the store, the in-memory shares
// swing from run to run, on both sides of the band (42.4–67.2 % in five runs), with both medians at
// 0.2 µs: a `Map` hit compares the key's 43 characters where a miss rarely does, a few nanoseconds
// that timer resolution and the JIT's state outweigh. The Redis store level sits at 44–47 %, the
// foreign id a little faster (its script stops at the owner field).

import 'reflect-metadata';
import { Buffer } from 'node:buffer';
import { Agent, request } from 'node:http';
import {
  armHardDeadline,
  assert,
  exitOnStop,
  fmt,
  fmtInt,
  loadBuiltPackage,
  median,
  newTaskId,
  nowNs,
  platformLine,
  positiveEnv,
  printTargetTable,
  PROTOCOL_VERSION,
  requestMeta,
  startBenchRedis,
  startChild,
  startTasksApp,
  stopChild,
  tasksContext,
  verdict,
} from './common.mjs';

// ---------------------------------------------------------------------------------------------
// Parameters
// ---------------------------------------------------------------------------------------------

const PAIRS = positiveEnv('BENCH_ORACLE_PAIRS', 3_000);
const STORE_PAIRS = positiveEnv('BENCH_ORACLE_STORE_PAIRS', 10_000);
const WARMUP = positiveEnv('BENCH_ORACLE_WARMUP', 300);
/** Whatever happens, the whole run ends by then. */
const HARD_DEADLINE_MS = 240_000;
const REQUEST_TIMEOUT_MS = 10_000;

/** The target: the share of pairs in which the foreign id was slower, 45–55 %. */
const TARGET_LOW = 0.45;
const TARGET_HIGH = 0.55;

const ALICE = Object.freeze({ principal: 'alice' });
const BOB = Object.freeze({ principal: 'bob' });
const PREFIX = `bench-oracle-${process.pid}:`;

// ---------------------------------------------------------------------------------------------
// The largest record the defaults allow
// ---------------------------------------------------------------------------------------------

/**
 * A task of alice's, completed with a text result as large as `maxTaskBytes` lets the record be:
 * a first try a little under the limit, then, when the service refuses it (TaskTooLargeError,
 * which names the size it would have had), a new task with the text shortened by the excess.
 * Returns the task id and the record's size.
 */
async function largestTask(service, store) {
  // The default limit; a smaller one is learnt from the refusal.
  let length = 1_048_576;
  for (let attempt = 0; attempt < 5; attempt++) {
    const { taskId } = await service.create(ALICE);
    try {
      await service.complete(taskId, { content: [{ type: 'text', text: 'x'.repeat(length) }] });
    } catch (error) {
      assert(typeof error?.bytes === 'number', `complete failed: ${error}`);
      length -= error.bytes - error.max;
      continue;
    }
    const record = await store.get(taskId);
    assert(record?.status === 'completed', 'the large task did not complete');
    return { taskId, bytes: record.bytes ?? Buffer.byteLength(JSON.stringify(record)) };
  }
  throw new Error('no result fits maxTaskBytes after 5 tries');
}

// ---------------------------------------------------------------------------------------------
// Server side (child process): `node bench/oracle.bench.mjs --serve <memory|redis> [url]`
// ---------------------------------------------------------------------------------------------

/** `Authorization: Bearer <name>` makes `<name>` the principal. */
const bearer = (req) => /^Bearer\s+(\S+)$/i.exec(req.headers?.authorization ?? '')?.[1];

async function serve(storeName, url) {
  const lib = await loadBuiltPackage();
  const store =
    storeName === 'redis'
      ? new lib.RedisTaskStore({ connection: url, prefix: PREFIX })
      : new lib.InMemoryTaskStore();
  // Every default of the module, but the principal (bob and alice by bearer) and the store.
  const { app, port } = await startTasksApp(lib, { principal: bearer, store });
  app.enableShutdownHooks();
  const { taskId, bytes } = await largestTask(app.get(lib.TasksService), store);
  exitOnStop(app);
  process.send({ type: 'ready', port, taskId, bytes });
}

// ---------------------------------------------------------------------------------------------
// Timing side (this process)
// ---------------------------------------------------------------------------------------------

/** Bob's `tasks/get` of `taskId`: headers and body (the JSON-RPC id is the same for every one). */
function getRequest(taskId) {
  const body = JSON.stringify({
    jsonrpc: '2.0',
    id: 1,
    method: 'tasks/get',
    params: { taskId, _meta: requestMeta('oracle-bench') },
  });
  return {
    body,
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': PROTOCOL_VERSION,
      'mcp-method': 'tasks/get',
      'mcp-name': taskId,
      authorization: 'Bearer bob',
      'content-length': String(Buffer.byteLength(body)),
    },
  };
}

/** One request on `agent`, timed from its write to its last byte: `{ ns, status, text }`. */
function timedPost(port, agent, { headers, body }) {
  return new Promise((resolve, reject) => {
    const start = nowNs();
    const req = request({ host: '127.0.0.1', port, path: '/mcp', method: 'POST', agent, headers });
    req.setTimeout(REQUEST_TIMEOUT_MS, () => req.destroy(new Error('no answer in time')));
    req.on('error', reject);
    req.on('response', (res) => {
      const chunks = [];
      res.on('data', (chunk) => chunks.push(chunk));
      res.on('end', () => {
        const ns = Number(nowNs() - start);
        resolve({ ns, status: res.statusCode, text: Buffer.concat(chunks).toString('utf8') });
      });
      res.on('error', reject);
    });
    req.end(body);
  });
}

/**
 * `pairs` interleaved pairs of `foreign()` and `madeUp()` (each resolves with its time in ns), in
 * a random order inside each pair, after `warmup` pairs not counted: the medians (µs) and the
 * share of pairs in which the foreign one was slower (a tie counts half).
 */
async function interleave(pairs, warmup, foreign, madeUp) {
  const foreignNs = [];
  const madeUpNs = [];
  let slower = 0;
  for (let i = 0; i < warmup + pairs; i++) {
    let f;
    let m;
    if (Math.random() < 0.5) {
      f = await foreign();
      m = await madeUp();
    } else {
      m = await madeUp();
      f = await foreign();
    }
    if (i < warmup) continue;
    foreignNs.push(f);
    madeUpNs.push(m);
    slower += f > m ? 1 : f === m ? 0.5 : 0;
  }
  return {
    pairs,
    foreignUs: median(foreignNs) / 1_000,
    madeUpUs: median(madeUpNs) / 1_000,
    share: slower / pairs,
  };
}

/** (a) Over HTTP, against a server in a child process on `storeName`. */
async function overHttp(storeName, redisUrl) {
  const { child, ready } = await startChild(
    import.meta.url,
    ['--serve', storeName, ...(redisUrl ? [redisUrl] : [])],
    { label: `${storeName} server` },
  );
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  try {
    const foreign = getRequest(ready.taskId);
    // The two answers must be the same bytes: "Task not found" for both, nothing else told.
    const first = await timedPost(ready.port, agent, foreign);
    const other = await timedPost(ready.port, agent, getRequest(newTaskId()));
    assert(
      first.status === other.status && first.text === other.text,
      `a foreign id and a made-up one answer differently: ${first.text} vs ${other.text}`,
    );
    assert(/Task not found/.test(first.text), `bob read alice's task: ${first.text.slice(0, 200)}`);
    const time = async (req) => {
      const answer = await timedPost(ready.port, agent, req);
      assert(answer.text === first.text, `an answer changed: ${answer.text.slice(0, 200)}`);
      return answer.ns;
    };
    // Like for like: bob asks for alice's id again and again, so the made-up id he is compared
    // with is one id asked again and again too. A made-up id new in every request costs the
    // round trip about 2 µs more whether or not any task has it (the context line, two made-up
    // ids against each other), which would read as the foreign id being faster.
    const madeUp = getRequest(newTaskId());
    const result = await interleave(
      PAIRS,
      WARMUP,
      () => time(foreign),
      () => time(madeUp),
    );
    const freshness = await interleave(
      Math.min(PAIRS, 2_000),
      WARMUP,
      () => time(madeUp),
      () => time(getRequest(newTaskId())),
    );
    return { ...result, freshness, bytes: ready.bytes };
  } finally {
    agent.destroy();
    await stopChild(child);
  }
}

/** (b) At the store, in this process: scoped gets, then the unscoped context line. */
async function atStore(lib, storeName, redisUrl) {
  const store =
    storeName === 'redis'
      ? new lib.RedisTaskStore({ connection: redisUrl, prefix: PREFIX })
      : new lib.InMemoryTaskStore();
  const ctx = await tasksContext(lib, { store, notifier: null });
  try {
    const { taskId, bytes } = await largestTask(ctx.service, store);
    const timed = async (read) => {
      const start = nowNs();
      const record = await read();
      const ns = Number(nowNs() - start);
      return { ns, record };
    };
    const scoped = async (id) => {
      const { ns, record } = await timed(() => store.get(id, BOB));
      assert(
        record === null,
        `bob read a record at the store (${id === taskId ? 'alice’s' : 'made up'})`,
      );
      return ns;
    };
    // Each get takes a string of its own, as a request's parsed id is: V8 keeps a string's hash
    // once computed, so the same string object again would make the Map lookup of the foreign
    // id cheaper than that of a new made-up one.
    const fresh = (id) => Buffer.from(id, 'latin1').toString('latin1');
    const owned = await interleave(
      STORE_PAIRS,
      WARMUP,
      () => scoped(fresh(taskId)),
      () => scoped(newTaskId()),
    );
    const unscoped = await interleave(
      Math.min(STORE_PAIRS, 2_000),
      WARMUP,
      async () => (await timed(() => store.get(fresh(taskId)))).ns,
      async () => (await timed(() => store.get(newTaskId()))).ns,
    );
    // Alice's small task against her large one, both foreign to bob: whether the size shows.
    const { taskId: small } = await ctx.service.create(ALICE);
    const sizes = await interleave(
      Math.min(STORE_PAIRS, 2_000),
      WARMUP,
      () => scoped(fresh(taskId)),
      () => scoped(fresh(small)),
    );
    return { owned: { ...owned, bytes }, unscoped, sizes };
  } finally {
    await ctx.close();
  }
}

/** Removes every key under the bench prefix (REDIS_URL: not the bench's own server). */
async function removeKeys(url) {
  const { Redis } = await import('ioredis');
  const client = new Redis(url);
  try {
    let cursor = '0';
    do {
      const [next, keys] = await client.scan(cursor, 'MATCH', `${PREFIX}*`, 'COUNT', 1000);
      if (keys.length > 0) await client.unlink(...keys);
      cursor = next;
    } while (cursor !== '0');
  } finally {
    client.disconnect();
  }
}

const pct = (share) => `${fmt(share * 100, 1)} %`;
const inTarget = (share) => share >= TARGET_LOW && share <= TARGET_HIGH;

function line(label, r) {
  console.log(
    `  ${label}: medians foreign ${fmt(r.foreignUs, 1)} µs, made-up ${fmt(r.madeUpUs, 1)} µs; ` +
      `foreign slower in ${pct(r.share)} of ${fmtInt(r.pairs)} pairs`,
  );
}

async function main() {
  let stopRedis = () => undefined;
  armHardDeadline(HARD_DEADLINE_MS, undefined, () => stopRedis());
  console.log('nestjs-mcp-tasks timing-oracle benchmark');
  console.log(`  ${platformLine()}`);
  const lib = await loadBuiltPackage();
  const redis = await startBenchRedis('oracle', (halt) => (stopRedis = halt));
  const rows = [];
  try {
    for (const storeName of ['memory', 'redis']) {
      const url = storeName === 'redis' ? redis.url : undefined;
      console.log(`\n${storeName === 'redis' ? 'Redis' : 'In-memory'} store`);
      const http = await overHttp(storeName, url);
      console.log(
        `  alice's task: completed, its record ${fmtInt(http.bytes)} bytes as TasksService counts ` +
          'it (maxTaskBytes, by default 1,048,576)',
      );
      line('(a) HTTP tasks/get as bob', http);
      console.log(
        `      context, a made-up id asked again vs one new in each request (no task has either): ` +
          `medians ${fmt(http.freshness.foreignUs, 1)} vs ${fmt(http.freshness.madeUpUs, 1)} µs; ` +
          `the one asked again slower in ${pct(http.freshness.share)} of ` +
          `${fmtInt(http.freshness.pairs)} pairs`,
      );
      const { owned, unscoped, sizes } = await atStore(lib, storeName, url);
      line('(b) store.get(id, bob)  ', owned);
      line('    context, store.get(id) unscoped (the record read as is)', unscoped);
      console.log(
        `      context, store.get(id, bob) of alice's 1 MiB task vs her new empty one: medians ` +
          `${fmt(sizes.foreignUs, 1)} vs ${fmt(sizes.madeUpUs, 1)} µs; the large one slower in ` +
          `${pct(sizes.share)} of ${fmtInt(sizes.pairs)} pairs`,
      );
      for (const [what, r] of [
        ['(a) HTTP', http],
        ['(b) store', owned],
      ]) {
        rows.push([
          `${storeName}, ${what}: foreign id slower`,
          `${pct(r.share)} of ${fmtInt(r.pairs)} (${fmt(r.foreignUs, 1)} vs ${fmt(r.madeUpUs, 1)} µs)`,
          '45–55 %',
          verdict(inTarget(r.share) && r.pairs >= 2_000),
        ]);
      }
    }
  } finally {
    if (!redis.own) await removeKeys(redis.url);
    await redis.stop();
  }
  printTargetTable(rows);
}

if (process.argv[2] === '--serve') {
  serve(process.argv[3], process.argv[4]).catch((error) => {
    console.error(`server ${process.argv[3]} failed:`, error);
    process.exit(1);
  });
} else {
  await main();
}
