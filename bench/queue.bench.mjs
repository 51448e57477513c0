// Queue benchmark for nestjs-mcp-tasks (issue 14): queue-run task tools on BullMQ, next to bare
// BullMQ jobs doing the same Redis work, and what the lease writes with 10 vs 10,000 running calls.
//
//   npm run bench         (builds dist/, then runs every benchmark)
//   npm run bench:queue   (builds dist/, then runs this file)
//
// It starts its own redis-server (from PATH, on a free loopback port, in a temporary directory,
// without persistence) and stops it at the end; with REDIS_URL set it uses that server instead,
// under a key prefix of its own that it removes at the end (then (c) counts every client's
// writes, so it needs a server nobody else uses at that moment).
//
// Process layout. Each contender is one Node process (this file run as `--serve <side>`), kept
// alive for the whole comparison: it takes the calls, runs the jobs on its own BullMQ Worker
// (concurrency BENCH_QUEUE_CONCURRENCY, 16) and counts the completions, as a single app instance
// with `worker: true` (the default) does. The parent only starts rounds over IPC and reads
// Redis's CPU time, so it runs nothing while a round runs.
//
//   ours  a Nest application context (no HTTP) with `BullModule.forRoot({ connection, prefix })`,
//         `BullModule.registerQueue({ name: 'bench-work' })` (@nestjs/bullmq),
//         `TasksModule.forRoot({ path: false, store: new RedisTaskStore(...), notifier:
//         redisNotifier(...), maxRows: null, defaultTtlMs: 1 h })` and
//         `TasksQueueModule.forRoot({ workers: { 'bench-work': { concurrency } } })` from dist/,
//         and one `@TaskTool({ name: 'instant', queue: 'bench-work' })` whose method returns its
//         result at once. A task is started with `TaskToolRunner.start(tool, {}, owner)`, found by
//         class name through Nest's DiscoveryService (`providerNamed` in common.mjs): the call the
//         `tools/call` handler makes once the request is parsed and its input validated. HTTP is
//         not the subject here (bench/http measures it); calling the runner keeps the request
//         parsing, which the baseline would not pay, out of the comparison. That call stores the
//         task (RedisTaskStore) and adds the job; the Worker takes the job, TaskToolRunner.runJob
//         reads the task, runs the method and completes the task, whose change the notifier
//         publishes on its channel (`<store prefix>changes`).
//   bare  plain BullMQ on the same Redis: a `Queue` and a `Worker` (same connection options and
//         concurrency, `removeOnComplete: true` as ours sets it; a BullMQ prefix of its own, so
//         neither side's Worker takes the other's jobs) and two ioredis clients (records,
//         publishing). A task: a new id (made as the service makes its own),
//         `HSET` of a `working` record as JSON (the fields our record has, built by `taskRecord`
//         in common.mjs), then `queue.add` of a job with the same data as ours (tool, taskId,
//         input). The job's handler reads the record (`HGET`), writes it back `completed` with
//         the same result (`HSET`), and publishes the completed record as JSON on a channel
//         (`PUBLISH`, not awaited, as our notifier's is not).
//
// Both count a task done when its completion is seen: a subscriber connection of the process
// (one more ioredis client, the same on both sides) listens on the side's change channel, parses
// every message and counts those that say `completed`. A round is N tasks with a fixed number in
// flight (BENCH_QUEUE_IN_FLIGHT, 64): a slot starts a task, waits until its completion is seen,
// and starts the next.
//
//   (a) Redis commands per task, seen by MONITOR over BENCH_QUEUE_MONITOR_TASKS tasks of each
//       side: those the process sent, and those its scripts ran, by command name. No target:
//       the breakdown behind (b).
//   (b) tasks per second, end to end: after a warm-up, BENCH_QUEUE_ROUNDS rounds, the side that
//       goes first alternating from round to round; medians of the rounds, the CPU time per task
//       of the contender's process and of Redis, and the median of the per-round ratios ours ÷
//       bare. Target: ≥ 0.7. A context line gives the CPU ratio per task and how busy each
//       process was: both run at about 100 % of one core, so CPU per task sets the rate.
//   (c) the lease's store writes: a third process with `TasksModule.forRoot({ store:
//       RedisTaskStore, notifier: redisNotifier, lease: { ttlMs: 3000 }, janitor: false,
//       runningTasksOnShutdown: 'leave' })` (so its stop does not fail 10,000 tasks one by one)
//       and one in-process `@TaskTool` whose method awaits its signal. With 10 calls running,
//       then with 10,000: the write commands Redis executed per second (deltas of `INFO
//       commandstats` over the commands whose `COMMAND INFO` flags say `write`, scripts'
//       commands included), over a quiet window of about BENCH_QUEUE_LEASE_WINDOW_MS (24 s).
//       The renewal runs every third of the TTL; each window opens right after a renewal and
//       lasts whole periods less half a period, so both see the same number of renewals; the
//       janitor is off, so none of its runs falls into one. Target: 10,000 ÷ 10 ≤ 1.1, i.e.
//       independent of the task count. All commands per second are shown too; each running
//       call's safety-net re-read (every 30 s without a janitor) comes after the window unless
//       starting the 10,000 calls took more than about 4 s.
//
// It is a report, not a test: it exits 0 whether a target is met or missed, and non-zero only
// when it cannot run (dist/ missing, no redis-server, a process that fails, a broken invariant,
// the hard deadline, 240 s). Every child process and the redis-server it started are stopped on
// every way out (SIGINT and SIGTERM included); the hard deadline kills them.
//
// Environment knobs (all optional): REDIS_URL, BENCH_QUEUE_ROUNDS (7), BENCH_QUEUE_TASKS (tasks
// per round and side, 8000), BENCH_QUEUE_WARMUP_TASKS (3000), BENCH_QUEUE_IN_FLIGHT (64),
// BENCH_QUEUE_CONCURRENCY (16), BENCH_QUEUE_MONITOR_TASKS (200), BENCH_QUEUE_LEASE_TASKS
// (10000), BENCH_QUEUE_LEASE_WINDOW_MS (24000), BENCH_QUEUE_ONLY (a,b,c: only those parts),
// BENCH_QUEUE_CPU_PROF=<dir> (the two contenders run with --cpu-prof and write
// <dir>/<side>.cpuprofile when they stop).
//
// -----------------------------------------------------------------------------------------------
// Method, in detail:
//
// `bench/queue.bench.mjs` is plain ESM JavaScript (issue 14's bench). It starts its own
// `redis-server` from PATH on a free loopback port, in a temporary directory and without
// persistence, and stops it at the end; with `REDIS_URL` set it uses that server instead, under a key
// prefix of its own (`bench-queue-<pid>:`) that it removes at the end. It takes about 85 s, and a hard
// deadline ends it at 240 s whatever happens. Every child process and the `redis-server` are stopped
// on every way out, SIGINT and SIGTERM included. It is a report, not a test: it exits 0 whether a
// target is met or missed, and non-zero only when it cannot run (no `dist/`, no `redis-server`, a
// process that fails, a task that ends other than `completed`, a completion left over after a round).
//
// **Setup.** Each contender is one Node process (the same file, run as `--serve <side>`), alive for
// the whole comparison. It takes the calls, runs the jobs on its own BullMQ `Worker`, 16 at a time
// (its concurrency), and counts the completions: one app instance with `worker: true`, the default.
// The parent process only starts rounds over IPC and reads Redis's `INFO cpu`, so it does nothing
// while a round runs.
//
// - **ours**: a Nest application context (no HTTP) importing, from `@nestjs/bullmq`,
//   `BullModule.forRoot({ connection, prefix })` and `BullModule.registerQueue({ name })`; from
//   `dist/`, `TasksModule.forRoot({ path: false, store, notifier, maxRows: null, maxTasksPerOwner,
// defaultTtlMs })` (a quota of 1,000,000, which no round reaches) with `new RedisTaskStore(...)`,
//   `redisNotifier(...)` and a TTL of 1 h, and `TasksQueueModule.forRoot({ workers })` with a concurrency of 16; and one
//   `@TaskTool({ name: 'instant', queue: 'bench-work' })` whose method returns its result at once.
//   A task is started with `TaskToolRunner.start(tool, {}, owner)`, the call the `tools/call`
//   handler makes once the request is parsed and its input validated. The bench finds the runner and
//   the tool registry by class name through Nest's `DiscoveryService` (`providerNamed` in
//   `common.mjs`). HTTP is not the subject here (`bench/http` measures it), and calling the runner
//   keeps request parsing, which the baseline would not pay, out of the comparison.
// - **bare**: plain BullMQ on the same Redis, with the same connection options and concurrency: a
//   `Queue`, a `Worker` (`removeOnComplete: true`, as ours sets it; a BullMQ prefix of its own, so
//   neither side's Worker takes the other's jobs) and two ioredis clients (records, publishing).
//
// What each side does per task, with the commands (a) counts:
//
// - **create.** Ours: `TasksService.create`, that is one script (1 `EVALSHA`: reservation, quota,
//   listing entries, record and expiry, since issue 37); the Redis notifier does not publish a new
//   task (no one can wait for an id before its creation returns it). Bare: a new id (the service's
//   algorithm) and one `HSET` of a `working` record with the same fields (`taskRecord` in
//   `common.mjs`).
// - **enqueue.** Both: `Queue.add` (1 `EVALSHA`) with the same job data (tool, taskId, input); ours
//   through `BullTaskQueue`, on a fair queue (the default since issue 34): first the script that
//   takes the owner's rank, shared by the adds of one tick, and the job added prioritized, with
//   its owner's key in its data; at its end the script that gives the rank back, shared by the
//   ends of one tick. Bare adds an unprioritized job.
// - **take the job.** Both: the Worker's `moveToActive` and `moveToFinished` scripts, about 1.1
//   `EVALSHA` per task, the same on both sides.
// - **run.** Ours: `TaskToolRunner.runJob`, that is `HGET` (the job's look at the task; the job
//   listens to its task's channel only when its method still runs a turn of the event loop later,
//   which this bench's method never does), the method, then `TasksService.complete`: one script on
//   the copy first read (the compare-and-set and the owner's finished entry, SET_TERMINAL; a read
//   only if that copy is stale). Bare: `HGET` of the record, `HSET` of it `completed` with the
//   same result.
// - **announce.** Both: `PUBLISH` of the completed record, not awaited.
//
// Both sides count a task done when its completion is seen: a subscriber connection in the process
// (one more ioredis client on both sides) listens on the side's change channel, parses every message
// and counts those that say `completed`. A round is N tasks with 64 in flight: each slot starts a task, waits until its completion
// is seen, and starts the next. The completed records are the same size on both sides (280 bytes of
// JSON); the run prints both.
//
// **(a) Redis commands per task.** `MONITOR` on a connection of its own over 200 tasks of each side:
// the commands the process sent and the commands its scripts ran, by name. No target; it is the
// breakdown behind (b). Now (issue 37): ours 6.34–6.38 commands sent per task (4.33–4.37
// `EVALSHA`, 1 `HGET`, 1 `PUBLISH`), bare 6.09 (2.08 `EVALSHA`, 2 `HSET`, 1 `HGET`, 1 `PUBLISH`);
// inside the scripts about 60 vs 30.7 (fair turns and BullMQ's prioritized add account for most
// of the difference). When the bench was written ours sent 11.10 (3 `HGET`, 2 `PUBLISH`): see
// below.
//
// **(b) tasks per second, end to end.** After a warm-up of 3,000 tasks each, 7 rounds of 8,000 tasks
// per side; the side that goes first alternates from round to round. For each side the median
// tasks/s and the median CPU time per task of its process (`process.cpuUsage()` over the round) and
// of Redis (`INFO cpu`); the median of the per-round ratios ours ÷ bare is the figure the target
// checks. **Target: ≥ 0.7.** A context line gives the CPU ratio per task (bare ÷ ours) and how busy
// each process was: on a quiet machine both processes use about 100 % of one core, so each side's
// rate is set by its process's CPU per task, and the CPU ratio predicts the rate ratio.
//
// **(c) the lease's store writes.** A third process: `TasksModule.forRoot({ store, notifier, lease,
// janitor: false, runningTasksOnShutdown: 'leave', maxRows: null, maxTasksPerOwner: 1_000_000,
// path: false })` with
// `RedisTaskStore`, `redisNotifier` and `lease: { ttlMs: 3000 }`, and one in-process `@TaskTool` whose
// method awaits its `task.signal`. With 10 calls running, then with 10,000 (started through
// `TaskToolRunner.start`, 64 at a time, each held under the instance's lease by its create), the bench
// waits 1 s, then counts the commands Redis executes over a quiet window from `INFO commandstats`
// deltas. Write commands are those whose `COMMAND INFO` flags say `write`; commands run inside scripts
// are counted by their own names. Nothing else uses the private server meanwhile. **Target: writes/s
// with 10,000 ÷ writes/s with 10 ≤ 1.1**, i.e. independent of the task count.
//
// A window catches whole renewals only (the renewal runs every 1,000 ms), so a window of fixed length
// placed anywhere can be one renewal off: a 5 s window gave 6 renewals with 10,000 calls and 5 with
// 10, a ratio of 1.2 with the same two writes per renewal. So each window opens right after a
// renewal (the bench polls the count of `TIME`, a command only the lease scripts run) and lasts 23.5
// periods (23.5 s): both windows see 23 renewals, and the run prints the count next to each rate. The
// janitor is off in this process, so none of its cleanups (one `ZREMRANGEBYSCORE` and a few reads
// every 30 s, whatever the task count) falls into a window. In every run so far: the same number of
// renewals in both windows, 2 writes per renewal (one `ZADD` and one `ZREMRANGEBYSCORE`, in the
// renewal script) and 5 commands in all per renewal (`EVALSHA`, `TIME`, `ZADD`, `ZREMRANGEBYSCORE`,
// `ZRANGEBYSCORE`), whether 10 or 10,000 calls were running.
//
// **Knobs** (environment, all optional): `REDIS_URL`, `BENCH_QUEUE_ROUNDS` (7), `BENCH_QUEUE_TASKS`
// (8000 per round and side), `BENCH_QUEUE_WARMUP_TASKS` (3000), `BENCH_QUEUE_IN_FLIGHT` (64),
// `BENCH_QUEUE_CONCURRENCY` (16), `BENCH_QUEUE_MONITOR_TASKS` (200), `BENCH_QUEUE_LEASE_TASKS`
// (10000), `BENCH_QUEUE_LEASE_WINDOW_MS` (24000, rounded to whole renewal periods less half a period),
// `BENCH_QUEUE_ONLY` (e.g. `b` or `a,c`; default all three) and `BENCH_QUEUE_CPU_PROF=<dir>` (the two
// contenders run with `--cpu-prof` and write `<dir>/ours.cpuprofile` and `<dir>/bare.cpuprofile` when
// they stop).
//
// One run's summary, from the 2-vCPU development VM (Node 20, redis-server 7.0 on the same machine,
// load average about 0.6; the run took 80 s), after the three savings described under _Reading the
// figures_:
//
// ```
// ==================================== SUMMARY ====================================
// (b) queue-run tool ÷ bare BullMQ, tasks/s  0.740 (4,601 vs 6,202/s)  target ≥ 0.7  PASS
// (c) lease writes/s, 10,000 ÷ 10 running    1.000 (1.96 vs 1.96/s)    target ≤ 1.1  PASS
// ```
//
// with, in (b), 215 vs 163 µs of the process's CPU and 159 vs 116 µs of Redis's per task, both
// processes at about 100 % of one core, per-round ratios 0.692 to 0.760. The run before it, on a
// busier machine: 0.917 (4,221 vs 4,732/s; rounds 0.58 to 1.10). The margin over the target is
// thin.
//
// Before those savings (11.1 commands per task), the first runs gave 0.551 (3,758 vs 6,774/s) and
// 0.561, with, in (b), 265 vs 148 µs of the process's CPU and 196 vs 114 µs of Redis's CPU per task, both
// processes at 100 % of one core, and per-round ratios 0.494, 0.565, 0.563, 0.516, 0.551, 0.549,
// 0.568; in (c), 23 renewals in each 23.5 s window, 1.96 writes/s (one `ZADD` and one
// `ZREMRANGEBYSCORE` per renewal), all commands 4.89/s with 10 calls and 5.31/s with 10,000 (the
// re-reads of the first 10 calls, 30 s after they started, fell into the second window). The run
// right after it: 0.561 (3,838 vs 6,896/s), 259 vs 147 µs, (c) 1.000. On a quiet machine the ratio
// stays between 0.55 and 0.60 from run to run; while other work ran on the machine (the processes
// busy 55–75 % of the time) it moved between 0.45 and 0.65, with single rounds up to 0.96.
//
// **Reading the figures: where ours' time goes.** On a quiet machine both processes are CPU-bound on
// one core, so the ratio is the ratio of their CPU per task. A CPU profile of each side
// (`BENCH_QUEUE_CPU_PROF`, 27,000 tasks each, startup left out; the profiler on and other work on the
// machine, so the totals are above the summary's) gives per task:
//
// |                                                                          | ours   | bare   |
// | ------------------------------------------------------------------------ | ------ | ------ |
// | socket writes (the `write` syscalls of the Redis connections)            | 222 µs | 106 µs |
// | ioredis (commands, replies, parsing)                                     | 50 µs  | 31 µs  |
// | BullMQ and msgpackr                                                      | 26 µs  | 22 µs  |
// | Node internals, microtasks                                               | 36 µs  | 21 µs  |
// | GC                                                                       | 16 µs  | 12 µs  |
// | this package's code in `dist/` (store, service, runner, notifier, queue) | 18 µs  | —      |
// | the bench's counting subscriber and slots                                | 5 µs   | 9 µs   |
// | total                                                                    | 384 µs | 206 µs |
//
// ioredis writes every command with a syscall of its own, and on this VM a write to a loopback socket
// costs about 20 µs of the writer's CPU (222 µs for 11.1 commands; on loopback the kernel does the
// receiving side's TCP work in the writer's syscall). So a task's cost is mostly its number of
// commands: ours sends 11.1 per task, bare 6.1 (and ours' extra `PUBLISH` is also received and parsed
// by every subscriber of the channel). The package's own JavaScript is about 18 µs per task. The five
// commands ours sends beyond bare: two more scripts at create (the row reservation, which the store
// needs for `maxRows` and expiry, and the owner listing), the `PUBLISH` of the created `working`
// record, the running call's first read of the task (`RunningCall` reads the task as its watch starts,
// right after `runJob` read it), and the read before the compare-and-set of `complete`. In a trial on
// a patched copy of `dist/` (not committed), dropping only the watch's first read in `runJob` and the
// `PUBLISH` at create brought ours to 238 µs of process CPU per task, against 281 µs unpatched in the
// same half hour (the rate ratio of that run: 0.845, with rounds from 0.54 to 0.92, on a busy
// machine); each one alone saved 20–40 µs per task (258 and 244 µs). Those two, and completing from
// the copy of the task the running call's watch has seen (no read before the compare-and-set), are
// now in the package: 8.1 commands per task, ratio 0.740 on a quiet machine. What remains beyond
// bare is the two scripts at create (`maxRows` and expiry, the owner listing).
//
// **Since issue 23: a MISS (2026-12-02).** On one machine in one half hour, each build with the bench
// of its own commit: 0.745 at 60447c0 (before issue 23), 0.671 at 63ba9d0 (its last commit), 0.616
// on main at c5cbd4d (6,071 vs 9,973 tasks/s), target ≥ 0.7; (c) 1.000 in all three. The limits put
// more Redis work on every task: the owner's count in the reservation script, the owner compared
// inside Redis on a read, and the `FINISH` entry of the terminal write (bench/redis (b) fell from
// 0.84–0.89 to 0.77–0.79 for the same reasons, see "Issue 23 limits" below). The fall from 0.671 to
// 0.616 after it is not traced (issue 25 moved changes to one channel per task in between).
//
// **Issue 34: fair turns (2026-12-04).** Each build's (a) and (b) run alternately, on a busy
// machine (load average 4 to 10, each process busy about 50 % of a core, so the rates are low and the
// ratio moves between runs of one build: 0.660, 0.554, 0.646, 0.551, 0.547 before). Commands sent
// per task, ours: 9.40 and 9.38 before (7.08 `EVALSHA`), 9.65 and 9.71 after (7.36 and 7.38
// `EVALSHA`); the commands run inside scripts, 50.3 before and 61.1 after (the rank's `ZADD`,
// `ZCARD`, `PEXPIRE` and `ZREM`, BullMQ's prioritized add and fetch, the custom job id's `EXISTS`).
// Rate ratio ours ÷ bare after: 0.497 and 0.477, against 0.551 and 0.547 in the runs of the same
// half hour before; CPU per task bare ÷ ours, process, 0.539 and 0.535 after against 0.582 and 0.574
// before. A first version that sent one script per add and one per job end (11.41 commands per
// task) gave 0.530, 0.496 and 0.472 (CPU ratio 0.474, 0.529, 0.491) on the same machine.
//
// **Issue 37: the queue path at BullMQ's pace (2026-12-04).** Issue 37's target is ≥ 0.6 of bare
// BullMQ (this bench's own, from issue 14, stays 0.7). A CPU profile of each side (3 rounds, the
// profiler on) put ours' extra time per task in: socket writes (about 20 µs of the writer's CPU
// per command), ioredis's work per command and per reply, and this package's code (about 40 µs,
// most of it building script calls). Beyond bare's commands, ours sent per task: the terminal
// write's second script (FINISH, the owner's finished entry, beside the compare-and-set), and a
// SUBSCRIBE and an UNSUBSCRIBE of the task's channel for every job (batched, 0.3 commands a task)
// whose replies, and the job's own completion heard back, the subscriber parsed; the SHA-256 of
// the owner at each fair add cost about 6 µs. Cut: a terminal write on one node is one script
// (SET_TERMINAL); a job reads its task first and listens only if its method still runs a turn of
// the event loop later (then reads again, so a cancel written meanwhile still fires its signal);
// the owners' fair keys are kept. Commands sent per task, ours: 7.54–7.73 before, 6.32–6.38 after
// (bare 6.09). Four alternating before/after pairs of whole runs on the same machine, busy (load
// average 5 to 10; the processes busy 37–58 % of a core, so the rates are latency-bound and the
// rate ratio moves by ±0.1 between runs of one build): CPU per task bare ÷ ours, process, 0.534,
// 0.536, 0.589, 0.560 before and 0.708, 0.656, 0.676, 0.704 after (ours 295–303 and 232–236 µs
// before, 197–217 µs after; Redis 178–222 before, 160–177 after); rate ratio 0.469, 0.635, 0.672,
// 0.604 before and 0.662, 0.550, 0.580, 0.676 after. The one run on a quieter machine (load
// average 3, both processes at 93–97 % of a core; at 4d4a0a6, 5 rounds): 0.753 (6,018 vs
// 7,340/s), CPU ratio 0.782.
// What remains beyond bare: the work inside the scripts (60 commands vs 31: the create script's
// listing and quota, fair turns, BullMQ's prioritized add), and one more round trip before the job
// is queued (create, fair rank, add), which costs most when the machine is short of CPU.
//
// In (c), the figure counts writes. Each running in-process call also re-reads its task every 30 s
// (the janitor's interval, or 30 s without a janitor) as a safety net against a lost notifier
// message; the window ends before the first of those reads unless starting the 10,000 calls took
// more than about 4 s. With 10,000 calls they come to about 330 reads per second at steady state,
// which grow with the task count. An earlier version of the bench, with a 33 s window (janitor on,
// window not aligned to renewals), saw them: all commands 307.7/s with 10,000 calls against 5.2/s
// with 10, while the writes stayed at 2.03 vs 1.97/s (ratio 1.030).

import { mkdirSync } from 'node:fs';
import { resolve as resolvePath } from 'node:path';
import { clearTimeout, setTimeout } from 'node:timers';
import { URL } from 'node:url';
import { Redis } from 'ioredis';
import {
  armHardDeadline,
  assert,
  decorateMethod,
  fmt,
  fmtInt,
  loadBuiltPackage,
  machineLine,
  median,
  msSince,
  newTaskId,
  nowNs,
  positiveEnv,
  printTargetTable,
  providerNamed,
  redisCpuUs,
  removeRedisKeys,
  sleep,
  startBenchRedis,
  startChild,
  taskRecord,
  verdict,
} from './common.mjs';

// ---------------------------------------------------------------------------------------------
// Parameters
// ---------------------------------------------------------------------------------------------

const ROUNDS = positiveEnv('BENCH_QUEUE_ROUNDS', 7);
const TASKS = positiveEnv('BENCH_QUEUE_TASKS', 8_000);
const WARMUP_TASKS = positiveEnv('BENCH_QUEUE_WARMUP_TASKS', 3_000);
const IN_FLIGHT = positiveEnv('BENCH_QUEUE_IN_FLIGHT', 64);
const CONCURRENCY = positiveEnv('BENCH_QUEUE_CONCURRENCY', 16);
const MONITOR_TASKS = positiveEnv('BENCH_QUEUE_MONITOR_TASKS', 200);
const LEASE_TASKS = positiveEnv('BENCH_QUEUE_LEASE_TASKS', 10_000);
const LEASE_FEW = 10;
const LEASE_WINDOW_MS = positiveEnv('BENCH_QUEUE_LEASE_WINDOW_MS', 24_000);
const LEASE_TTL_MS = 3_000;
/** Calls started at once in (c) while filling up (in-process calls return once stored). */
const LEASE_START_IN_FLIGHT = 64;
const ONLY = new Set((process.env.BENCH_QUEUE_ONLY ?? 'a,b,c').split(',').map((s) => s.trim()));
const CPU_PROF = process.env.BENCH_QUEUE_CPU_PROF;
/** Whatever happens, the whole run ends by then. */
const HARD_DEADLINE_MS = 240_000;

const THROUGHPUT_TARGET = 0.7;
const LEASE_TARGET = 1.1;

const HOUR = 3_600_000;
/** The sender's tag before each redisNotifier message (12 characters: src/notify/change-message.ts). */
const ORIGIN_LENGTH = 12;
const QUEUE = 'bench-work';
const TOOL = 'instant';
const OWNER = Object.freeze({ principal: 'bench' });
const RESULT = Object.freeze({ content: [{ type: 'text', text: 'ok' }] });

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

/** BullMQ's connection options for a redis:// URL (host, port, password, db). */
function bullConnection(url) {
  const parsed = new URL(url);
  return {
    host: parsed.hostname,
    port: Number(parsed.port || 6379),
    ...(parsed.username && { username: decodeURIComponent(parsed.username) }),
    ...(parsed.password && { password: decodeURIComponent(parsed.password) }),
    ...(parsed.pathname.length > 1 && { db: Number(parsed.pathname.slice(1)) }),
  };
}

/** Sends `message` to a child and resolves its first answer of the same type (60 s at most). */
function ask(child, message, timeoutMs = 60_000) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      cleanup();
      reject(new Error(`no answer to ${message.type} in ${timeoutMs / 1000} s`));
    }, timeoutMs);
    const onMessage = (answer) => {
      if (answer?.type !== message.type) return;
      cleanup();
      if (answer.error) reject(new Error(`child: ${answer.error}`));
      else resolve(answer);
    };
    const onExit = (code) => {
      cleanup();
      reject(new Error(`the child exited with ${code} during ${message.type}`));
    };
    const cleanup = () => {
      clearTimeout(timer);
      child.off('message', onMessage);
      child.off('exit', onExit);
    };
    child.on('message', onMessage);
    child.once('exit', onExit);
    child.send(message);
  });
}

/** Asks a child to stop (IPC `stop`); SIGKILL after 15 s. */
function stopProcess(child) {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    try {
      child.send({ type: 'stop' });
    } catch {
      child.kill('SIGKILL');
    }
  });
}

// ---------------------------------------------------------------------------------------------
// Child side: `node bench/queue.bench.mjs --serve <ours|bare|lease> <redis url> <prefix>`
// ---------------------------------------------------------------------------------------------

/**
 * Completions seen on the change channels, by task id: `wait(id)` resolves once a message says
 * the task is `completed` (also when it came before the wait). A `failed` or `cancelled` task
 * stops the process: the bench counts only tasks that did their work. `channel`: one channel of
 * bare JSON records (the bare side's). `pattern`: the redisNotifier's channels of every task
 * (`{prefix}changes:*`), whose messages are the sender's tag (ORIGIN_LENGTH characters) and the
 * record (the bench's records are small enough to travel whole).
 */
function completionFeed(url, { channel, pattern }) {
  const subscriber = new Redis(url, { maxRetriesPerRequest: null });
  const waiting = new Map();
  const early = new Set();
  let completed = 0;
  const heard = (message) => {
    const record = JSON.parse(message);
    if (record.status === 'working') return;
    if (record.status !== 'completed') {
      console.error(`A bench task ended ${record.status}: ${message}`);
      process.exit(1);
    }
    completed++;
    const resolve = waiting.get(record.taskId);
    if (resolve === undefined) early.add(record.taskId);
    else {
      waiting.delete(record.taskId);
      resolve();
    }
  };
  subscriber.on('message', (from, message) => {
    if (from === channel) heard(message);
  });
  subscriber.on('pmessage', (from, _channel, message) => {
    if (from === pattern) heard(message.slice(ORIGIN_LENGTH));
  });
  return {
    ready: pattern === undefined ? subscriber.subscribe(channel) : subscriber.psubscribe(pattern),
    get completed() {
      return completed;
    },
    get pending() {
      return waiting.size + early.size;
    },
    wait(taskId) {
      if (early.delete(taskId)) return Promise.resolve();
      return new Promise((resolve) => waiting.set(taskId, resolve));
    },
    close: () => subscriber.quit().catch(() => subscriber.disconnect()),
  };
}

/** `n` tasks, `inFlight` at a time: each slot starts one, waits until it is seen completed. */
async function runTasks(n, inFlight, start, feed) {
  let next = 0;
  const slot = async () => {
    while (next < n) {
      next++;
      await feed.wait(await start());
    }
  };
  const cpu = process.cpuUsage();
  const begin = nowNs();
  await Promise.all(Array.from({ length: Math.min(inFlight, n) }, slot));
  const ms = msSince(begin);
  const used = process.cpuUsage(cpu);
  return { ms, cpuUs: used.user + used.system };
}

async function serveOurs(url, prefix) {
  const lib = await loadBuiltPackage();
  const { Injectable, Module } = await import('@nestjs/common');
  const { DiscoveryModule, NestFactory } = await import('@nestjs/core');
  const { BullModule } = await import('@nestjs/bullmq');
  const { TasksQueueModule } = await import('nestjs-mcp-tasks/bullmq');
  const { TasksModule, TaskTool, TasksService, RedisTaskStore, redisNotifier } = lib;

  class QueueTools {
    instant() {
      return RESULT;
    }
  }
  decorateMethod(
    [TaskTool({ name: TOOL, description: 'Returns at once.', queue: QUEUE })],
    QueueTools.prototype,
    'instant',
  );
  Reflect.decorate([Injectable()], QueueTools);
  const connection = { connection: url, prefix: `${prefix}tasks:` };
  class OursModule {}
  Reflect.decorate(
    [
      Module({
        imports: [
          DiscoveryModule,
          BullModule.forRoot({ connection: bullConnection(url), prefix: `${prefix}ours-bull` }),
          BullModule.registerQueue({ name: QUEUE }),
          TasksModule.forRoot({
            path: false,
            store: new RedisTaskStore(connection),
            notifier: redisNotifier(connection),
            maxRows: null,
            // One owner makes every task: a quota above all of them (the rounds' 1 h tasks are
            // not removed in between), so the count still runs in every create script but no
            // create has to make room.
            maxTasksPerOwner: 1_000_000,
            defaultTtlMs: HOUR,
          }),
          TasksQueueModule.forRoot({ workers: { [QUEUE]: { concurrency: CONCURRENCY } } }),
        ],
        providers: [QueueTools],
      }),
    ],
    OursModule,
  );
  const app = await NestFactory.createApplicationContext(OursModule, {
    logger: ['error', 'warn'],
    abortOnError: false,
  });
  await app.init();
  const runner = await providerNamed(app, 'TaskToolRunner');
  const registry = await providerNamed(app, 'TaskToolRegistry');
  const tool = registry.get(TOOL);
  assert(tool?.options.queue !== undefined, `no queue-run tool ${TOOL}`);
  const service = app.get(TasksService);
  const feed = completionFeed(url, { pattern: `${prefix}tasks:changes:*` });
  await feed.ready;
  const start = async () => (await runner.start(tool, {}, OWNER)).taskId;
  return {
    start,
    feed,
    /** One task end to end, its stored result checked. */
    async check() {
      const taskId = await start();
      await feed.wait(taskId);
      const task = await service.get(taskId, OWNER);
      assert(task.status === 'completed', `ours: task ${task.status}`);
      assert(task.result?.content?.[0]?.text === 'ok', `ours: result ${JSON.stringify(task)}`);
      return { taskId, key: `${prefix}tasks:{${taskId}}` };
    },
    close: async () => {
      await feed.close();
      await app.close();
    },
  };
}

async function serveBare(url, prefix) {
  const { Queue, Worker } = await import('bullmq');
  const connection = bullConnection(url);
  const bullPrefix = `${prefix}bare-bull`;
  const records = new Redis(url, { maxRetriesPerRequest: null });
  const publisher = new Redis(url, { maxRetriesPerRequest: null });
  const channel = `${prefix}bare:changes`;
  const keyOf = (taskId) => `${prefix}bare:{${taskId}}`;
  const queue = new Queue(QUEUE, { connection, prefix: bullPrefix });
  const worker = new Worker(
    QUEUE,
    async (job) => {
      const key = keyOf(job.data.taskId);
      const current = JSON.parse(await records.hget(key, 'j'));
      const version = current.version + 1;
      const completed = {
        ...current,
        status: 'completed',
        lastUpdatedAt: Math.max(Date.now(), current.lastUpdatedAt),
        version,
        result: { ...RESULT, resultType: 'complete' },
      };
      const json = JSON.stringify(completed);
      await records.hset(key, 'v', version, 'j', json);
      publisher.publish(channel, json).catch(() => undefined);
    },
    { connection, prefix: bullPrefix, concurrency: CONCURRENCY },
  );
  worker.on('failed', (job, error) => {
    console.error(`bare: job failed: ${String(error)}`);
    process.exit(1);
  });
  await worker.waitUntilReady();
  const feed = completionFeed(url, { channel });
  await feed.ready;
  const start = async () => {
    const taskId = newTaskId();
    const record = taskRecord(taskId, OWNER, { ttlMs: HOUR }, Date.now());
    await records.hset(keyOf(taskId), 'v', 1, 'j', JSON.stringify(record));
    await queue.add(TOOL, { tool: TOOL, taskId, input: {} }, { removeOnComplete: true });
    return taskId;
  };
  return {
    start,
    feed,
    async check() {
      const taskId = await start();
      await feed.wait(taskId);
      const task = JSON.parse(await records.hget(keyOf(taskId), 'j'));
      assert(task.status === 'completed', `bare: task ${task.status}`);
      assert(task.result?.content?.[0]?.text === 'ok', `bare: result ${JSON.stringify(task)}`);
      return { taskId, key: keyOf(taskId) };
    },
    close: async () => {
      await feed.close();
      await worker.close();
      await queue.close();
      await Promise.all([records.quit(), publisher.quit()]);
    },
  };
}

/** (c): an app with a short lease and one in-process tool that awaits its signal. */
async function serveLease(url, prefix) {
  const lib = await loadBuiltPackage();
  const { Injectable, Module } = await import('@nestjs/common');
  const { DiscoveryModule, NestFactory } = await import('@nestjs/core');
  const { TasksModule, TaskTool, RedisTaskStore, redisNotifier } = lib;
  let running = 0;
  class WaitTools {
    async wait(_input, task) {
      running++;
      try {
        await new Promise((resolve) =>
          task.signal.addEventListener('abort', resolve, { once: true }),
        );
        return { content: [{ type: 'text', text: 'cancelled' }] };
      } finally {
        running--;
      }
    }
  }
  decorateMethod(
    [TaskTool({ name: 'wait_for_signal', description: 'Works until its signal fires.' })],
    WaitTools.prototype,
    'wait',
  );
  Reflect.decorate([Injectable()], WaitTools);
  const connection = { connection: url, prefix: `${prefix}lease:` };
  class LeaseModule {}
  Reflect.decorate(
    [
      Module({
        imports: [
          DiscoveryModule,
          TasksModule.forRoot({
            path: false,
            store: new RedisTaskStore(connection),
            notifier: redisNotifier(connection),
            maxRows: null,
            // One owner holds every running call: a quota above them, so none is refused.
            maxTasksPerOwner: 1_000_000,
            defaultTtlMs: HOUR,
            lease: { ttlMs: LEASE_TTL_MS },
            // The subject is the lease: no janitor run (its cleanup every 30 s, whatever the task
            // count) falls into a window. The calls' safety-net re-reads stay (every 30 s).
            janitor: false,
            // At shutdown the calls are left running, not failed one by one (10,000 writes).
            runningTasksOnShutdown: 'leave',
          }),
        ],
        providers: [WaitTools],
      }),
    ],
    LeaseModule,
  );
  const app = await NestFactory.createApplicationContext(LeaseModule, {
    logger: ['error', 'warn'],
    abortOnError: false,
  });
  await app.init();
  const runner = await providerNamed(app, 'TaskToolRunner');
  const registry = await providerNamed(app, 'TaskToolRegistry');
  const lease = await providerNamed(app, 'TasksLease');
  const tool = registry.get('wait_for_signal');
  assert(tool !== undefined && tool.options.queue === undefined, 'no in-process tool');
  assert(lease.ttlMs === LEASE_TTL_MS, `the lease does not run (ttlMs ${lease.ttlMs})`);
  return {
    /** Starts calls until `total` are running; resolves when each has been stored. */
    async fill(total) {
      let missing = total - running;
      const slot = async () => {
        while (missing > 0) {
          missing--;
          await runner.start(tool, {}, OWNER);
        }
      };
      await Promise.all(Array.from({ length: LEASE_START_IN_FLIGHT }, slot));
      // The methods start in the background; wait until every one runs.
      const until = Date.now() + 10_000;
      while (running !== total || runner.size !== total) {
        assert(Date.now() < until, `${running} calls running, ${runner.size} in the runner`);
        await sleep(10);
      }
      return { running, size: runner.size };
    },
    close: () => app.close(),
  };
}

async function serve(side, url, prefix) {
  // A lost parent ends the child at once.
  process.on('disconnect', () => process.exit(0));
  const make = { ours: serveOurs, bare: serveBare, lease: serveLease }[side];
  assert(make !== undefined, `unknown side ${side}`);
  const contender = await make(url, prefix);
  let stopping = false;
  process.on('message', (message) => {
    const reply = (fields) => process.send({ type: message.type, ...fields });
    const fail = (error) => reply({ error: error?.stack ?? String(error) });
    switch (message?.type) {
      case 'check':
        contender.check().then(reply, fail);
        break;
      case 'round':
        runTasks(message.n, message.inFlight, contender.start, contender.feed).then((result) => {
          assert(contender.feed.pending === 0, `${contender.feed.pending} completions left over`);
          reply(result);
        }, fail);
        break;
      case 'fill':
        contender.fill(message.total).then(reply, fail);
        break;
      case 'stop':
        if (stopping) return;
        stopping = true;
        contender.close().then(
          () => process.exit(0),
          (error) => {
            console.error(error);
            process.exit(1);
          },
        );
        break;
      default:
        fail(new Error(`unknown message ${JSON.stringify(message)}`));
    }
  });
  process.send({ type: 'ready', pid: process.pid });
}

// ---------------------------------------------------------------------------------------------
// The Redis server: a private one from PATH, or REDIS_URL
// ---------------------------------------------------------------------------------------------

/** What the hard deadline and signals kill: the children and the redis-server, by their pid. */
const started = new Set();

/** Kills the private redis-server and removes its temporary directory, on every way out. */
const halts = new Set();

function killEverything() {
  for (const child of started) {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
  for (const halt of halts) halt();
}

/** A private redis-server (or REDIS_URL), halted by killEverything. */
function startRedis() {
  return startBenchRedis('queue', (halt) => halts.add(halt));
}

// ---------------------------------------------------------------------------------------------
// Parent side
// ---------------------------------------------------------------------------------------------

async function startSide(side, url, prefix) {
  const execArgv = [];
  if (CPU_PROF && side !== 'lease') {
    const dir = resolvePath(CPU_PROF);
    mkdirSync(dir, { recursive: true });
    execArgv.push('--cpu-prof', '--cpu-prof-dir', dir, '--cpu-prof-name', `${side}.cpuprofile`);
  }
  const { child } = await startChild(import.meta.url, ['--serve', side, url, prefix], {
    execArgv,
    label: side,
  }).catch((error) => {
    throw new Error(`${side} did not start: ${error.message}`);
  });
  started.add(child);
  child.on('exit', (code, signal) => {
    if (!child.stopping && code !== 0) {
      console.error(`The ${side} process exited (${code ?? signal}) during the run.`);
    }
  });
  return {
    side,
    child,
    ask: (message, timeoutMs) => ask(child, message, timeoutMs),
    stop: () => {
      child.stopping = true;
      return stopProcess(child);
    },
  };
}

/**
 * (a) MONITOR on its own connection: the commands Redis ran while `count` tasks of one side ran
 * (none other works meanwhile), by name, split into those clients sent and those scripts ran.
 * A marker (ECHO on another connection) tells when MONITOR has shown everything sent before it.
 */
async function monitorTasks(url, contender, count) {
  const admin = new Redis(url);
  const monitor = await admin.monitor();
  const marker = new Redis(url);
  const markerInfo = await marker.client('INFO');
  const markerAddress = /\baddr=(\S+)/.exec(markerInfo)?.[1];
  let counting = false;
  const seenMarkers = new Set();
  const sent = new Map();
  const scripted = new Map();
  monitor.on('monitor', (_time, args, source) => {
    if (source === markerAddress) {
      seenMarkers.add(args[1]);
      return;
    }
    if (!counting) return;
    const name = String(args[0]).toLowerCase();
    const into = source === 'lua' ? scripted : sent;
    into.set(name, (into.get(name) ?? 0) + 1);
  });
  const flush = async () => {
    const id = `bench-marker-${seenMarkers.size}-${Date.now()}`;
    await marker.echo(id);
    const until = Date.now() + 5_000;
    while (!seenMarkers.has(id)) {
      assert(Date.now() < until, 'MONITOR did not show the marker');
      await sleep(5);
    }
  };
  try {
    await flush();
    counting = true;
    await contender.ask({ type: 'round', n: count, inFlight: IN_FLIGHT });
    await flush();
    counting = false;
  } finally {
    monitor.disconnect();
    admin.disconnect();
    marker.disconnect();
  }
  const per = (map) =>
    [...map.entries()].map(([name, n]) => [name, n / count]).sort((a, b) => b[1] - a[1]);
  const total = (map) => [...map.values()].reduce((a, b) => a + b, 0) / count;
  return {
    sent: per(sent),
    scripted: per(scripted),
    sentTotal: total(sent),
    scriptedTotal: total(scripted),
  };
}

/** One measured run of `n` tasks on a side: tasks/s, CPU µs per task of its process and of Redis. */
async function measure(contender, admin, n) {
  const before = await redisCpuUs(admin);
  const { ms, cpuUs } = await contender.ask({ type: 'round', n, inFlight: IN_FLIGHT }, 120_000);
  const redisUs = (await redisCpuUs(admin)) - before;
  return { rate: n / (ms / 1000), cpuUs: cpuUs / n, redisUs: redisUs / n };
}

/** The names of Redis's write commands (`COMMAND INFO` flags), cached. */
const writeFlags = new Map();
async function isWrite(admin, name) {
  if (!writeFlags.has(name)) {
    const [info] = await admin.command('INFO', name);
    writeFlags.set(name, Array.isArray(info) && info[2].includes('write'));
  }
  return writeFlags.get(name);
}

/** Calls per command name since the server started (`INFO commandstats`). */
async function commandCalls(admin) {
  const info = await admin.info('commandstats');
  const calls = new Map();
  for (const match of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
    calls.set(match[1], Number(match[2]));
  }
  return calls;
}

/** (c) Commands per second over a quiet window of `ms`: writes (by name), and all. */
/** A window of whole renewal periods less half a period, about `ms` long. */
function leaseWindowMs(ms) {
  const period = Math.ceil(LEASE_TTL_MS / 3);
  return Math.max(1, Math.round(ms / period)) * period - period / 2;
}

async function commandRates(admin, ms) {
  // The window opens right after a renewal (TIME runs only inside the lease scripts) and lasts
  // whole renewal periods less half a period, so every window sees the same number of renewals.
  const period = Math.ceil(LEASE_TTL_MS / 3);
  const renewalsSoFar = async () => (await commandCalls(admin)).get('time') ?? 0;
  const seen = await renewalsSoFar();
  const until = Date.now() + 3 * period;
  while ((await renewalsSoFar()) === seen) {
    assert(Date.now() < until, 'no lease renewal seen');
    await sleep(10);
  }
  const windowMs = leaseWindowMs(ms);
  const before = await commandCalls(admin);
  const start = nowNs();
  await sleep(windowMs);
  const after = await commandCalls(admin);
  const seconds = msSince(start) / 1000;
  const writes = [];
  let all = 0;
  let renewals = 0;
  for (const [name, calls] of after) {
    // The two INFO calls of this window are the bench's own.
    const delta = calls - (before.get(name) ?? 0) - (name === 'info' ? 1 : 0);
    if (delta <= 0) continue;
    all += delta;
    // TIME runs only inside the lease scripts: once per renewal in an idle instance.
    if (name === 'time') renewals = delta;
    if (await isWrite(admin, name)) writes.push([name, delta / seconds]);
  }
  writes.sort((a, b) => b[1] - a[1]);
  return {
    writes: writes.reduce((sum, [, rate]) => sum + rate, 0),
    byName: writes,
    all: all / seconds,
    renewals,
    seconds,
  };
}

function printBreakdown(label, result) {
  const list = (pairs) => pairs.map(([name, n]) => `${name} ${fmt2(n)}`).join(', ');
  console.log(
    `    ${label}: ${fmt2(result.sentTotal)} commands sent per task (${list(result.sent)})`,
  );
  console.log(
    `    ${' '.repeat(label.length)}  ${fmt2(result.scriptedTotal)} more run inside scripts (${list(result.scripted) || 'none'})`,
  );
}

async function main() {
  const totalStart = nowNs();
  armHardDeadline(
    HARD_DEADLINE_MS,
    `The benchmark did not finish within ${HARD_DEADLINE_MS / 1000} s; stopping.`,
    killEverything,
  );
  for (const signal of ['SIGINT', 'SIGTERM']) {
    process.once(signal, () => {
      killEverything();
      process.exit(130);
    });
  }
  process.once('exit', killEverything);
  // Fail fast when nothing is built.
  await loadBuiltPackage();
  await import('nestjs-mcp-tasks/bullmq').catch((error) => {
    console.error('Cannot import nestjs-mcp-tasks/bullmq; run `npm run build` first.');
    console.error(error);
    process.exit(1);
  });

  const redis = await startRedis();
  const admin = new Redis(redis.url);
  const prefix = `bench-queue-${process.pid}:`;
  const version = /redis_version:(\S+)/.exec(await admin.info('server'))?.[1] ?? 'unknown';
  console.log('nestjs-mcp-tasks queue benchmark (queue-run task tools on BullMQ)');
  console.log(machineLine());
  console.log(
    `redis-server ${version} at ${shown(redis.url)} (${redis.own ? 'private, no persistence' : 'REDIS_URL'}), key prefix ${prefix}`,
  );
  const rows = [];
  const sides = [];
  try {
    if (ONLY.has('a') || ONLY.has('b')) {
      const ours = await startSide('ours', redis.url, prefix);
      sides.push(ours);
      const bare = await startSide('bare', redis.url, prefix);
      sides.push(bare);
      const names = {
        ours: 'ours (TaskToolRunner.start → BullMQ → runJob)',
        bare: 'bare BullMQ, same Redis work',
      };
      const width = Math.max(...Object.values(names).map((name) => name.length));
      // One checked task each (this also loads the scripts), and the records' sizes.
      for (const side of [ours, bare]) {
        const { key } = await side.ask({ type: 'check' });
        side.recordBytes = (await admin.hget(key, 'j')).length;
      }
      console.log(
        `    one process per side: calls + BullMQ Worker (concurrency ${CONCURRENCY}) + a subscriber counting completions; ` +
          `${IN_FLIGHT} tasks in flight; completed record ${ours.recordBytes} bytes (ours) vs ${bare.recordBytes} (bare)`,
      );

      if (ONLY.has('a')) {
        console.log(`\n(a) Redis commands per task (MONITOR, ${MONITOR_TASKS} tasks of each side)`);
        for (const side of [ours, bare]) {
          side.monitored = await monitorTasks(redis.url, side, MONITOR_TASKS);
          printBreakdown(names[side.side].padEnd(width), side.monitored);
        }
      }

      if (ONLY.has('b')) {
        console.log(`\n(b) tasks per second, end to end`);
        console.log(
          `    warm-up ${WARMUP_TASKS} tasks each, then ${ROUNDS} rounds of ${TASKS} tasks per side, the first side alternating`,
        );
        for (const side of [ours, bare]) await measure(side, admin, WARMUP_TASKS);
        const results = new Map([
          [ours, []],
          [bare, []],
        ]);
        const ratios = [];
        for (let i = 0; i < ROUNDS; i++) {
          const order = i % 2 === 0 ? [ours, bare] : [bare, ours];
          for (const side of order) results.get(side).push(await measure(side, admin, TASKS));
          ratios.push(results.get(ours)[i].rate / results.get(bare)[i].rate);
        }
        for (const side of [ours, bare]) {
          const rounds = results.get(side);
          const med = (key) => median(rounds.map((r) => r[key]));
          side.rate = med('rate');
          side.cpuUs = med('cpuUs');
          side.redisUs = med('redisUs');
          console.log(
            `    ${names[side.side].padEnd(width)}  median ${fmtInt(side.rate).padStart(6)} tasks/s, CPU per task: process ${fmtInt(med('cpuUs'))} µs, Redis ${fmtInt(med('redisUs'))} µs` +
              `   rounds: ${rounds.map((r) => fmtInt(r.rate)).join(', ')}`,
          );
        }
        const ratio = median(ratios);
        console.log(
          `    per-round ratios ours ÷ bare: ${ratios.map((r) => r.toFixed(3)).join(', ')}`,
        );
        // Each side's process runs its calls and its jobs on one event loop: when it is busy all
        // the time, its CPU per task sets the rate, and this ratio predicts the one above.
        console.log(
          `    context: CPU per task bare ÷ ours, process ${(bare.cpuUs / ours.cpuUs).toFixed(3)}, ` +
            `process + Redis ${((bare.cpuUs + bare.redisUs) / (ours.cpuUs + ours.redisUs)).toFixed(3)}; ` +
            `busy share of one core: ours ${fmtInt((ours.rate * ours.cpuUs) / 1e4)} %, bare ${fmtInt((bare.rate * bare.cpuUs) / 1e4)} %`,
        );
        // The summary carries the spread of the rounds and each side's CPU per task: on a shared
        // machine a median alone hides how far apart the rounds were.
        const spread = `rounds ${Math.min(...ratios).toFixed(2)}–${Math.max(...ratios).toFixed(2)}`;
        const cpu = (side) => `${fmtInt(side.cpuUs)} + ${fmtInt(side.redisUs)} µs`;
        rows.push([
          '(b) queue-run tool ÷ bare BullMQ, tasks/s',
          `${ratio.toFixed(3)} (${fmtInt(ours.rate)} vs ${fmtInt(bare.rate)}/s, ${spread}; ` +
            `CPU per task, process + Redis: ${cpu(ours)} vs ${cpu(bare)})`,
          `≥ ${THROUGHPUT_TARGET}`,
          verdict(ratio >= THROUGHPUT_TARGET),
        ]);
      }
      await Promise.all([ours.stop(), bare.stop()]);
    }

    if (ONLY.has('c')) {
      console.log(
        `\n(c) the lease's store writes (lease ttlMs ${LEASE_TTL_MS}, renewed every ${Math.ceil(LEASE_TTL_MS / 3)} ms; windows of ${fmt(leaseWindowMs(LEASE_WINDOW_MS) / 1000, 1)} s, each opened right after a renewal)`,
      );
      const lease = await startSide('lease', redis.url, prefix);
      sides.push(lease);
      const rates = [];
      for (const total of [LEASE_FEW, LEASE_TASKS]) {
        const fillStart = nowNs();
        const { running } = await lease.ask({ type: 'fill', total }, 120_000);
        const filled = msSince(fillStart);
        await sleep(1_000); // what the starts sent has settled
        const rate = await commandRates(admin, LEASE_WINDOW_MS);
        rates.push(rate);
        console.log(
          `    ${fmtInt(running).padStart(6)} calls running (${fmt(filled / 1000, 1)} s to start): ${fmt2(rate.writes)} write commands/s ` +
            `(${rate.byName.map(([name, r]) => `${name} ${fmt2(r)}`).join(', ') || 'none'}); all commands ${fmt2(rate.all)}/s; ` +
            `${rate.renewals} renewals in ${fmt(rate.seconds, 1)} s`,
        );
      }
      await lease.stop();
      const [few, many] = rates;
      const ratio = few.writes > 0 ? many.writes / few.writes : Infinity;
      rows.push([
        `(c) lease writes/s, ${fmtInt(LEASE_TASKS)} ÷ ${LEASE_FEW} running`,
        `${ratio.toFixed(3)} (${fmt2(many.writes)} vs ${fmt2(few.writes)}/s)`,
        `≤ ${LEASE_TARGET}`,
        verdict(ratio <= LEASE_TARGET),
      ]);
    }
    if (rows.length > 0) printTargetTable(rows);
  } finally {
    await Promise.all(sides.map((side) => side.stop()));
    if (!redis.own) await removeRedisKeys(admin, prefix).catch(() => undefined);
    admin.disconnect();
    await redis.stop();
  }
  console.log(`(total ${(msSince(totalStart) / 1000).toFixed(1)} s; ${machineLine()})`);
  // A report, not a test: a missed target does not fail the run.
  process.exitCode = 0;
}

if (process.argv[2] === '--serve') {
  await serve(process.argv[3], process.argv[4], process.argv[5]);
} else {
  await main().catch((error) => {
    console.error(error);
    process.exit(1);
  });
}
