// Peers benchmark for nestjs-mcp-tasks (issue 13, target 6, and the figures of targets 3–5; issue 24,
// item 4: the hot path and a @rekog/mcp-nest app with tasks): the package next to what an app would
// otherwise use, measured in the same run.
//
//   npm run bench:peers   (builds dist/ and .demo-build/, then runs this file)
//
// Every server runs in a child process (this file run as `--serve <kind> <port>`), on loopback;
// this process is the client. Load is keep-alive node:http with 32 requests in flight, contenders
// measured in alternating rounds (the order rotates every round), medians of the rounds.
//
//   ours      a Nest app (Express adapter) on the built package (dist/): `TasksModule.forRoot({
//             principal: (request) => request.user?.principal, ... })`, an APP_GUARD that maps
//             `Authorization: Bearer <token>` to `request.user` through a token → principal map
//             and answers 401 otherwise, `@TaskTool`s `quick` (returns at once, TTL 5 s), `keep`
//             (the same, TTL 1 h: the task `tasks/get` reads) and `slow` (returns after
//             WORK_MS, pollIntervalMs POLL_MS), the plain tool `echo` registered through
//             `configure` (a zod input schema), and a bare Nest controller behind the SAME guard
//             whose `POST /bare/get` and `POST /bare/echo` answer exactly the bytes `tasks/get` and
//             `echo` answer (checked), and `POST /bare/create` the bytes of one answer of `quick`'s
//             creation (the same length and fields as every other, checked; only the id and the
//             times differ): the limit of a Nest route that does nothing.
//   sdk-v2    the official SDK v2 alone: an Express app whose `POST /mcp` is express.json() then
//             `toNodeHandler(createMcpHandler(factory))` (@modelcontextprotocol/node,
//             @modelcontextprotocol/server) given the parsed body, the factory building a McpServer
//             per request with the same `echo` tool; and a bare Express route `POST /bare/echo`
//             (express.json()) answering echo's bytes. No auth.
//   v1        the v1 SDK (@modelcontextprotocol/sdk 1.x) with its experimental tasks, STATELESS:
//             an Express app whose `POST /mcp` (express.json()) builds a McpServer and a
//             `StreamableHTTPServerTransport({ sessionIdGenerator: undefined,
//             enableJsonResponse: true })` per request, all of them sharing one InMemoryTaskStore
//             and one InMemoryTaskMessageQueue (a store without a session restricts nothing, so a
//             task made in one request is read by `tasks/get` in another: checked below). Task
//             tools `quick` and `slow` (`registerToolTask`; the work completes the task in the
//             shared store in the background) and the same plain `echo`. No auth. Requests are
//             2025-11-25 (`params.task` on task-augmented calls), no initialize (stateless).
//   rekog-tasks, rekog-plain
//             the rekog demo (examples/rekog, built by `tsc -p tsconfig.examples.json` into
//             .demo-build/): a @rekog/mcp-nest 2.x app whose `echo` is a rekog `@Tool`, behind the
//             demo's guard and rekog's Host allowlist, with tasks added (main.js: TaskHttpTransport
//             and attachTasks, the demo's task tools) and its twin without them (plain.js: rekog's
//             own StreamableHttpTransport, nothing of this package loaded). Each runs as its file
//             runs (`npm run demo:rekog`), on the port the bench gives it, its logs silenced.
//   bare-nest a minimal Nest app (Express adapter) with one controller: for startup only.
//   nest-sdk  bare-nest plus a `POST /mcp` route of the same controller handing the request to the
//             SDK v2's `createMcpHandler` (as sdk-v2, same `echo`): for startup only, the least any
//             Nest module on the SDK loads and does before its first answer.
//
// Measures (each printed with its baseline and the ratio):
//
//   (1) task creation, `tools/call` of `quick`: ours (2026-07-28, tasks extension declared) vs v1
//       (2025-11-25, task-augmented) vs ours' bare route behind the same guard answering a
//       creation's bytes (`/bare/create`: the fairer limit, since a creation's answer is longer
//       than `tasks/get`'s and `/bare/get` would be measured on other bytes). Issue 24: ours ÷ bare
//       ≥ 0.7 (0.62 measured in an independent run of 60447c0, against the bare route of (2)).
//   (2) `tasks/get` of a completed task owned by the caller: ours vs v1 vs ours' bare route behind
//       the same guard. Target 4 of issue 13 was ours ÷ bare ≥ 0.8; issue 24 raises it to 0.85.
//   (3) `tools/call` of the plain `echo`: ours vs sdk-v2 vs v1, with the bare routes of ours and of
//       sdk-v2 as context; server CPU µs per request of each. Target 3: ours ÷ sdk-v2 ≥ 1.0.
//   (4) heap and idle CPU per 10,000 running tasks: bench/idle.bench.mjs, run as it is (a child
//       process, `node --expose-gc`, BENCH_IDLE_WINDOW_MS=5000 unless set), its table and summary
//       printed again here.
//   (5) completion latency: `slow` completes WORK_MS after the call; the tool stamps
//       process.hrtime.bigint() (CLOCK_MONOTONIC, shared by the processes) as it returns, and the
//       client subtracts it from the moment it learns of the completion: ours over a
//       `subscriptions/listen` stream opened right after the call (push), ours polling `tasks/get`
//       at the task's pollInterval, v1 polling `tasks/get` at the task's pollInterval (both
//       POLL_MS). Median over LATENCY_TASKS tasks each, in rotating order. No target.
//   (6) startup to first served request: each of ours, bare-nest and sdk-v2 forked fresh STARTUPS
//       times (rotating order, after one start of each not counted): from the fork, a bare
//       `GET …/ping` route is polled every 5 ms until it answers (listening; ours' behind its
//       guard), then ours and sdk-v2 get their first MCP request, a `tools/call` of `echo` (served;
//       for bare-nest, served = listening). Medians. Issue 24: ours served ≤ 1.35 × bare-nest
//       (1.46 measured in an independent run of 60447c0; target 5 of issue 13 was 1.3). nest-sdk
//       is started the same way; its figure ÷ bare-nest is what loading and first using the SDK
//       costs a Nest app before any code of this project runs. Each server is then asked for its
//       process.cpuUsage(): the CPU from its first instruction to its first served request moves
//       far less with other load than the wall time (wall ratios of 1.12 to 1.48 were seen in
//       loaded runs). It counts V8's helper threads (compiling, collecting) too, which run beside
//       the main thread on two cores: it is above the wall time and its ratio has no target.
//   (7) `tools/call` of the rekog app's plain `echo` (a rekog `@Tool`, 2026-07-28, the tasks
//       extension declared as a client using tasks declares it on every request): rekog-tasks vs
//       rekog-plain, server CPU µs per request of each. Issue 24: with ÷ without ≥ 0.95.
//
// It is a report, not a test: it exits 0 whether a target is met or missed, and non-zero only when
// it cannot run (nothing built, a server that does not start or answers wrongly). A hard deadline
// ends it (and its children) at 600 s whatever happens.
//
// Environment knobs (all optional): BENCH_PEERS_ROUNDS (5), BENCH_PEERS_ROUND_MS (2000),
// BENCH_PEERS_WARMUP_MS (1000), BENCH_PEERS_ONLY (e.g. "1,2,7"; default all of 1–7),
// BENCH_PEERS_STARTUPS (5), BENCH_PEERS_LATENCY_TASKS (10), BENCH_PEERS_POLL_MS (500),
// BENCH_IDLE_CALLS / BENCH_IDLE_WINDOW_MS (passed on to the idle bench).
//
// -----------------------------------------------------------------------------------------------
// Method, in detail:
//
// `bench/peers.bench.mjs` is plain ESM JavaScript. It puts the package next to what an app would
// use without it: the official SDK v2 alone, the v1 SDK's experimental tasks, a bare Nest route, a
// bare Nest app, and a `@rekog/mcp-nest` app with tasks added next to the same app without them. It
// measures issue 13's target 6 and the figures of targets 3 to 5, and issue 24's hot-path targets
// (item 4: (1), (2) and (7) below). It takes about 4.5 to 5 minutes and stops by itself (a hard
// deadline ends it, and every child process it started, at 600 s whatever happens). It is a report,
// not a test: it exits 0 whether a target is met or missed. It exits non-zero only when it cannot
// run: nothing built, a server that does not start, or a wrong answer. Each contender's answer is
// parsed and checked once before its rounds and once after.
//
// **The servers**, each in a child process (the same file, run as `--serve <kind> <port>`), on
// loopback. The parent process is the client.
//
// - `ours`: a Nest app (Express adapter) importing `TasksModule.forRoot(...)` from `dist/` with
//   `principal: (request) => request.user?.principal`, `maxRows: null`,
//   `maxTasksPerOwner: 1_000_000`, `janitor: { intervalMs: 1000 }` and `configure`. An `APP_GUARD`
//   maps
//   `Authorization: Bearer <token>` to `request.user = { principal }` through a token → principal
//   map, and throws 401 for no token or an unknown one. The script checks the 401s on `/mcp` and on
//   the bare route, and checks that another principal cannot read the caller's task. The app has
//   three `@TaskTool`s: `quick` (returns at once, TTL 5 s, so the store stays small under load),
//   `keep` (the same with a 1 h TTL: the task that `tasks/get` reads) and `slow` (returns after
//   200 ms, `pollIntervalMs: 500`). It has the plain tool `echo`, registered through `configure`
//   with a zod input schema. And it has a bare `@Controller('bare')` behind the **same guard**:
//   `POST /bare/get` and `POST /bare/echo` answer **exactly the bytes** that `tasks/get` and `echo`
//   answer (the script checks this), `POST /bare/create` answers the bytes of one answer of `quick`'s
//   creation (every creation answers the same fields with the same lengths, only the task's id and
//   times differ: the script checks that against a fresh creation), and `GET /bare/ping` answers
//   `{"ok":true}`. The bare routes are the limit: a Nest route with the same guard, the same body
//   parsing, the same answer, and nothing else.
// - `sdk-v2`: the SDK v2 alone. An Express app whose `POST /mcp` runs `express.json()` and then
//   `toNodeHandler(createMcpHandler(factory))` (`@modelcontextprotocol/node`,
//   `@modelcontextprotocol/server`), given the parsed body. The factory builds a `McpServer` per
//   request with the same `echo` tool. The app also has a bare Express `POST /bare/echo`
//   (`express.json()`) answering echo's bytes (checked), and `GET /ping`. There is no auth. Passing
//   the parsed body is how an Express app has it (the SDK's `createMcpExpressApp` installs
//   `express.json()`). In a trial run, the handler reading the stream itself served about 1/1.4 of
//   the requests/s, so the parsed-body wiring is the stronger baseline.
// - `v1`: `@modelcontextprotocol/sdk` 1.x with its experimental tasks, **stateless**. An Express app
//   whose `POST /mcp` (`express.json()`) builds a `McpServer` and a
//   `StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true })` for
//   each request. All of them share one `InMemoryTaskStore` and one `InMemoryTaskMessageQueue`. A
//   task made without a session is visible to every caller, so a task made by one request's server is
//   read by `tasks/get` on later requests' servers (the script checks this before (2)). Task tools
//   `quick` and `slow` use `registerToolTask`; their work runs in the background and completes the
//   task in the shared store, with the same 200 ms and `pollInterval: 500` for `slow`. It has the same
//   plain `echo`. There is no auth. Requests are 2025-11-25, with `params.task` on task-augmented
//   calls and no `initialize`.
// - `rekog-tasks` and `rekog-plain`: the rekog demo as `npm run demo:rekog` builds it
//   (`tsc -p tsconfig.examples.json` into `.demo-build/`): a `@rekog/mcp-nest` 2.0.5 app whose
//   `echo` is a rekog `@Tool` on an `@McpController`, behind the demo's guard (`DemoAuthGuard`) and
//   rekog's Host allowlist. `rekog-tasks` is `examples/rekog/main.ts`, tasks added
//   (`TaskHttpTransport`, `attachTasks`, `TasksModule.forRoot({ path: false })`, the demo's four
//   task tools); `rekog-plain` is `examples/rekog/plain.ts`, the same app on rekog's own
//   `StreamableHttpTransport` with nothing of this package loaded. Each runs as its file runs, on
//   the port the bench gives it (`PORT`), Nest's logs and its banner silenced. The script checks that
//   `tools/list` shows `echo` and the task tools on the first and `echo` alone on the second.
// - `bare-nest`: a Nest app (Express adapter) with one controller, `GET /ping`. It is used for
//   startup only.
// - `nest-sdk`: bare-nest whose controller also has `POST /mcp`, handed to the SDK v2's
//   `createMcpHandler` with the same `echo` as sdk-v2. It is used for startup only: it is the least
//   that any Nest module built on the SDK loads and does before its first answer.
//
// **Load.** Keep-alive `node:http`, 32 requests in flight. For each comparison, every contender gets
// a 1 s warm-up, then 5 rounds of 2 s each. The order of the contenders rotates from round to round.
// Each contender gets the median requests/s and the median server CPU µs per request (the server
// process's `process.cpuUsage()` over the round ÷ the requests, asked over IPC). Each pair of
// contenders gets the median of its per-round ratios. The ratio is what a target checks.
//
// **What it measures.**
//
// - **(1) Task creation.** `tools/call` of `quick`. Ours gets a 2026-07-28 request with the tasks
//   extension declared, and so does ours' bare route `/bare/create` (the same request bytes, a
//   creation's answer); v1 gets a 2025-11-25 request with `params.task`. **Issue 24: ours ÷ bare
//   route ≥ 0.7.** `/bare/create` is the fairer limit: a creation's answer is longer than
//   `tasks/get`'s, so `/bare/get` would time other bytes (the issue's 0.62 was measured against the
//   bare route of (2)). It also prints the server CPU µs per request of both, and ours ÷ v1.
// - **(2) `tasks/get` of a completed task that the caller owns.** Ours (2026) vs ours' bare route
//   behind the same guard vs v1 (2025). **Target 4 (issue 13): ours ÷ bare route ≥ 0.8; issue 24
//   raises it to 0.85.** It also prints the server CPU µs per request of ours and of the bare route,
//   and ours ÷ v1.
// - **(3) The plain tool `echo`.** Ours vs sdk-v2 (the same 2026 request bytes) vs v1 (2025). The
//   bare routes of ours and of sdk-v2 are in the same rounds as context. Each gets its server CPU µs
//   per request. **Target 3: ours ÷ sdk-v2 ≥ 1.0.** It also prints ours ÷ v1, ours ÷ its bare
//   route, and sdk-v2 ÷ its bare route.
// - **(4) Heap and idle CPU per 10,000 running tasks.** The script runs `bench/idle.bench.mjs` as it
//   is: a child process, `node --expose-gc`, with `BENCH_IDLE_WINDOW_MS=5000` unless that is set. It
//   prints that bench's output indented, and copies its SUMMARY rows (issue 13's targets 1 and 2)
//   into its own. See _bench/idle_ for what they mean.
// - **(5) Completion latency.** `slow` returns 200 ms after the call. As it returns, the tool stamps
//   `process.hrtime.bigint()` into its result (`CLOCK_MONOTONIC`, which all processes on the machine
//   share). The client subtracts the stamp from the moment it learns that the task completed. There
//   are three ways to learn it:
//   - ours over a `subscriptions/listen` stream, opened right after the call and acknowledged
//     before the task completes (push);
//   - ours polling `tasks/get` at the task's `pollInterval` (500 ms);
//   - v1 polling `tasks/get` at the task's `pollInterval` (500 ms), then `tasks/result` for the
//     stamp, outside the measured time.
//
//   It prints the median, min and max over 10 tasks each, one task at a time, in rotating order,
//   after one task of each that is not counted. There is no target. A poller learns of the change
//   at its next poll, so the poll figures are about `pollInterval − 200 ms` plus one round trip.
//
// - **(6) Startup to first served request.** Each of ours, bare-nest, nest-sdk and sdk-v2 is forked
//   fresh 5 times, in rotating order, after one start of each that is not counted. From the fork,
//   the script polls a bare `GET …/ping` route every 5 ms until it answers (_listening_; ours' route
//   is behind its guard). Then all but bare-nest get their first MCP request, a `tools/call` of
//   `echo` (_served_). For bare-nest, served is the same as listening. The script reports medians.
//   **Issue 24: ours served ≤ 1.35 × bare-nest** (target 5 of issue 13 was 1.3). It also prints
//   ours ÷ bare-nest to listening, nest-sdk ÷ bare-nest (what loading and first using the SDK costs
//   a Nest app before any code of this project runs), ours ÷ nest-sdk (what this project adds to
//   that), and sdk-v2's figures. Loading the SDK (with zod and ajv) already costs a Nest app 1.24 to
//   1.32 × its bare startup, so ours can meet 1.35 only by adding almost nothing to nest-sdk.
//
//   Before and after the startup work of issue 24, three runs each with 9 starts of each server
//   (`BENCH_PEERS_STARTUPS=9 BENCH_PEERS_ONLY=6`), each figure the median of its run, then the
//   median of the three; the 2-vCPU VM with no other bench or test running, load average 0.4 to
//   2.9:
//
//   | commit           | ours   | bare-nest | nest-sdk | sdk-v2 | ours ÷ bare-nest          | nest-sdk ÷ bare-nest      | ours ÷ nest-sdk           |
//   | ---------------- | ------ | --------- | -------- | ------ | ------------------------- | ------------------------- | ------------------------- |
//   | 767bf1d (before) | 959 ms | 680       | 895      | 468    | 1.410 (1.410 1.322 1.445) | 1.288 (1.350 1.288 1.244) | 1.044 (1.044 1.027 1.161) |
//   | 5b89f7e (after)  | 670 ms | 495       | 642      | 334    | 1.347 (1.344 1.347 1.353) | 1.284 (1.282 1.324 1.284) | 1.048 (1.048 1.018 1.054) |
//
//   After: PASS in two runs of three, and by 0.003 only. Three earlier runs of the same build, just
//   after another bench had stopped, gave 1.393, 1.245 and 1.317 (ours ÷ nest-sdk 1.078 1.053
//   1.048). The raw times of the two rows are not comparable (other work moved the machine's speed
//   between them); a rotation of both builds' `ours` in one run (11 starts each, the same bench
//   server) gave 653 ms before and 622 after, nest-sdk 595 and bare-nest 458, and CPU time to the
//   first answer 811, 770, 737 and 597 ms.
//
//   What changed: the package is bundled (scripts/bundle.mjs in `npm run build`: its ~75 small ES
//   modules, which Node's loader paid for one by one, are now one file per entry plus shared
//   chunks; importing it after Nest and the SDK went from about 90 ms to about 25 ms in isolation,
//   less than the 50 ms of `@modelcontextprotocol/node` that nest-sdk loads); `@opentelemetry/api`
//   is no longer loaded at init when no SDK is registered and no providers are given (about 40
//   CommonJS modules, 16 ms in a profile); and the discovery of `@TaskTool` and `@OnTaskChange`
//   methods reads only the classes that have them.
//
//   What remains, ours over nest-sdk (about 30 to 45 ms, medians of alternating in-process starts):
//   Nest scanning and building this module's 25 providers and 2 controllers, 15 to 25 ms (per
//   class provider Nest reads every method for enhancers and every constructor parameter); the
//   init, about 8 ms, of which McpEndpoint.onModuleInit builds one whole McpServer only to read
//   its capabilities (3 to 4 ms in a profile) and the routes of the MCP controller; the first
//   request, about 4 ms. The first request's own cost (the SDK's envelope schemas built on first
//   use, Node loading undici for `Request`/`Response`, about 60 ms) is nest-sdk's too.
//
// - **(7) A rekog app's plain tool, with and without tasks.** `tools/call` of rekog-tasks' `echo`
//   vs the same request to rekog-plain (2026-07-28, the tasks extension declared, as a client that
//   uses tasks declares it on every request; the plain app ignores it), with the server CPU µs per
//   request of each. **Issue 24: with tasks ÷ without ≥ 0.95.** The two servers run alone (the
//   other load servers are stopped first).
//
// **Knobs** (environment, all optional): `BENCH_PEERS_ROUNDS` (5), `BENCH_PEERS_ROUND_MS` (2000),
// `BENCH_PEERS_WARMUP_MS` (1000), `BENCH_PEERS_ONLY` (e.g. `1,2,7`; default all of 1 to 7),
// `BENCH_PEERS_STARTUPS` (5), `BENCH_PEERS_LATENCY_TASKS` (10), `BENCH_PEERS_POLL_MS` (500: `slow`'s
// `pollInterval` on both servers), and `BENCH_IDLE_CALLS` / `BENCH_IDLE_WINDOW_MS`, which are passed
// on to the idle bench.
//
// **Reading the figures.** Servers and client share the 2 vCPUs, and any other work on the machine
// moves the raw rates by much more than the ratios. The per-round ratios show such moments: one
// round far from the others. The median ratio and the server µs per request are the figures to
// compare between runs. Startup times move with the machine's load too; the ratio to bare-nest, in
// the same run and in rotating order, is the figure to compare. Ours and v1 are compared across
// protocol revisions (2026-07-28 vs 2025-11-25), because each serves its own revision of tasks. The
// peers run without auth while ours pays its guard on every request, including the bare route.
//
// One run's summary, from the 2-vCPU development VM (Node 20; other work was running on the machine,
// load average about 2; the run took 3 min 36 s):
//
// ```
// ==================================== SUMMARY ====================================
// (1) task creation, ours ÷ v1                                      1,933 vs 859 req/s = 2.652               target none       —
// (2) tasks/get, ours ÷ bare route (target 4)                       3,222 vs 4,149 req/s = 0.823             target ≥ 0.8      PASS
// (2) tasks/get, ours ÷ v1                                          3,222 vs 1,192 req/s = 2.775             target none       —
// (3) echo, ours ÷ sdk-v2 (target 3)                                1,586 vs 1,286 req/s = 1.274             target ≥ 1.0      PASS
// (3) echo, ours ÷ v1                                               1,586 vs 1,079 req/s = 1.471             target none       —
// (3) echo, server CPU per request                                  ours 684 µs, sdk-v2 891 µs, v1 1,025 µs  target none       —
// (4) idle CPU, 10,000 running calls (target 1)                     0.215 % of a core                        target ≤ 0.5 %    PASS
// (4) idle CPU, ours ÷ v1 SDK (target 1)                            0.215 % ÷ 5.139 % = 0.042                target ≤ 2.5      PASS
// (4) heap per running call beyond the record (target 2)            3,316 B                                  target ≤ 2,048 B  MISS
// (4) heap per running call, ours vs v1 SDK (target 2)              3,316 B vs 7,592 B (0.437)               target < v1       PASS
// (5) completion latency, ours, push (listen stream)                0.8 ms                                   target none       —
// (5) completion latency, ours, polling tasks/get                   304.8 ms                                 target none       —
// (5) completion latency, v1, polling tasks/get                     305.3 ms                                 target none       —
// (6) startup to first served request, ours ÷ bare Nest (target 5)  1,051 vs 751 ms = 1.399                  target ≤ 1.3      MISS
// (6) startup to listening, ours ÷ bare Nest                        970 vs 751 ms = 1.291                    target none       —
// (6) startup to first served request, sdk-v2                       579 ms (listening 528 ms)                target none       —
// ```
//
// ### Issue 24, item 4: the hot path, before and after (2026-12-01)
//
// **What changed.** A CPU profile of the ours child under `tasks/get` load (`node --cpu-prof`)
// put the SDK's `classifyInboundRequest` first among the package's own costs: about 7.7 % of the
// server's CPU, three zod parses that fail (the two response schemas) or succeed (the request
// schema and the 2026-07-28 envelope) on every body, 17 µs per `tasks/get` body in a micro-run on
// this VM against a request of about 200 µs. Two changes, each with its spec:
//
// - `McpTasksFront` classifies through `classifyInbound` (src/mcp/inbound-classifier.ts): a plain
//   JSON-RPC request with a 2026-07-28 envelope (or none, 2025-11-25) and headers that agree is
//   recognised with plain checks that accept only what the SDK's schemas accept, and gets what the
//   SDK's classifier returns; everything else (responses, notifications, batches, `initialize`,
//   optional fields it does not check, disagreeing or padded headers) still goes to the SDK, which
//   words every refusal. 16.8 → 0.47 µs per body. test/mcp/inbound-classifier.spec.ts checks the
//   two agree on the common bodies, on those left to the SDK, and on 6,000 seeded mutations.
// - `McpHostGuard` keeps the verdict of its host and origin checks per (connection kind, host,
//   origin), 256 at most: each request parsed its host as a URL twice (`validateHostHeader`, then
//   `URL.canParse`). test/mcp/mcp-host.guard.spec.ts checks it answers as the checks do, repeated,
//   reordered and past the bound.
//
// **How it was measured.** 742c674 (before: McpTasksFront as issue 24 introduced it, without
// these two changes) and 041b564 (after), each built as `npm run bench:peers` builds it (tsc, then
// scripts/bundle.mjs, which 742c674 did not have yet and got from 041b564, so both run bundled;
// `.demo-build/` with 041b564's examples/rekog), each run with 041b564's bench/peers.bench.mjs,
// `BENCH_PEERS_ONLY=1,2,7`, default rounds (5 × 2 s after 1 s of warm-up), before and after
// alternating, 3 runs each. Other engineers' tests were running on the 2-vCPU VM (load average
// 1.2 to 2.5 at the runs' starts). Figures are the medians of the 3 runs; "CPU" is the server CPU
// µs per request of each side, as the runs' medians, and their ratio per run.
//
// | measure                                     | before                                           | after                             | target                               |
// | ------------------------------------------- | ------------------------------------------------ | --------------------------------- | ------------------------------------ |
// | (1) creation, ours ÷ bare route (runs)      | **0.757** (0.723 0.859 0.757)                    | **0.877** (0.812 0.877 0.913)     | ≥ 0.7: PASS, PASS                    |
// | (1) CPU µs per request, ours vs bare        | 343 vs 296; ours ÷ bare 1.35 (1.42 1.11 1.35)    | 268 vs 249; 1.08 (1.04 1.08 1.15) | —                                    |
// | (2) `tasks/get`, ours ÷ bare route (runs)   | **0.852** (0.852 0.814 0.868)                    | **1.026** (0.954 1.026 1.044)     | ≥ 0.85: PASS by 0.002, PASS          |
// | (2) CPU µs per request, ours vs bare        | 257 vs 220; ours ÷ bare 1.17 (1.18 1.17 1.16)    | 204 vs 209; 0.98 (0.99 0.98 0.96) | —                                    |
// | (7) rekog echo, with tasks ÷ without (runs) | **0.943** (0.943 0.922 0.957)                    | **0.926** (0.917 0.990 0.926)     | ≥ 0.95: MISS by 0.007, MISS by 0.024 |
// | (7) CPU µs per request, with vs without     | 741 vs 778; with ÷ without 0.95 (0.95 0.95 1.03) | 700 vs 663; 1.06 (1.00 1.08 1.06) | —                                    |
//
// On (1) and (2) ours now costs about what a Nest route that does nothing costs behind the same
// guard: the bare route pays Express's `res.json` (an ETag hash of every answer) and body-parser,
// ours its own body reader, the front and the task store. The independent run of 60447c0
// measured 0.62 and 0.77; the same bench in the same run is the figure to compare. Earlier,
// noisier runs (load average 4 to 13), three alternating runs each of tsc-only builds, gave the same
// picture: (1) 0.738 → 1.081, (2) 0.860 → 1.065.
//
// **(7) is at the noise floor and still misses.** Per-round ratios spread from 0.78 to 1.07 (the
// median of the 15 rounds after is 0.960, the median of the 3 runs' medians 0.926). A full
// `npm run bench:peers` of 041b564 afterwards (4 min 33 s, load average about 2) gave (1) 0.917,
// (2) 1.076 and (7) 0.915, its five rounds all between 0.82 and 0.95 (662 vs 582 µs of server CPU
// per request): within one run the rounds agree, between runs they do not, because each server
// process settles into its own compiled state. Profiled under the same load, the SDK's own result
// validation (`validateResult`: the same code on the same answer in both apps) cost 5 µs per
// request in the app with tasks and 32 µs in the app without them. Neither change
// above is on that path (rekog classifies and serves `echo` itself; the front only looks at the
// body). What a profile of the two rekog children (the same load, samples inside the load window
// only, per request) shows the app with tasks doing more, of about 570 µs of busy CPU per echo on
// this VM: `TaskHttpTransport.post` (an async wrapper with its own Host/Origin check before rekog
// checks the same, about 10 µs), `prepare` on every server rekog builds per request
// (`registerCapabilities`, a merge, and the `setRequestHandler` wrapper, about 5 µs), and about 5
// µs more of garbage collection. Two changes in src/rekog would take most of it: pass a body the front does not claim straight to rekog without awaiting it or checking
// headers rekog checks itself, and put the tasks capabilities into the strategy's `capabilities`
// once instead of registering them on every server.
//
// The first of those two is done (c796e2a: a parsed body the front does not claim goes to rekog at
// once, with no await and no second header check). The second is not: the strategy's
// `capabilities` are shared with its other transports, and STDIO, where no task can be made, must
// not advertise tasks (the rekog STDIO test checks it), so the capabilities stay on each server a
// TaskHttpTransport builds. After it, three runs of `BENCH_PEERS_ONLY=7` on a quiet VM (load
// average about 1.5): (7) 0.976, 0.936, 0.872 (PASS, MISS, MISS; median 0.936), with the server
// CPU per request at parity in all three (with ÷ without 1.02, 0.95, 1.00: 998 vs 979, 810 vs
// 857, 826 vs 828 µs). What is left of (7) is in the throughput rounds, not in the CPU either app
// spends on an `echo`.

import 'reflect-metadata';
import { Buffer } from 'node:buffer';
import { fork, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { connect } from 'node:net';
import { Agent, request } from 'node:http';
import { performance } from 'node:perf_hooks';
import { fileURLToPath, URL } from 'node:url';
import {
  armHardDeadline,
  askChild,
  decorateMethod,
  exitOnStop,
  fmt,
  freePort,
  LEGACY_PROTOCOL_VERSION,
  listenBody,
  machineLine,
  median,
  nowNs,
  positiveEnv,
  printTargetTable,
  PROTOCOL_VERSION,
  requestMeta,
  sleep,
  startChild,
  stopChild,
  verdict,
} from './common.mjs';
import { loadGenerator } from './load.mjs';

// ---------------------------------------------------------------------------------------------
// Parameters
// ---------------------------------------------------------------------------------------------

const CONCURRENCY = 32;
const ROUNDS = positiveEnv('BENCH_PEERS_ROUNDS', 5);
const ROUND_MS = positiveEnv('BENCH_PEERS_ROUND_MS', 2_000);
const WARMUP_MS = positiveEnv('BENCH_PEERS_WARMUP_MS', 1_000);
const ONLY = new Set(
  (process.env.BENCH_PEERS_ONLY ?? '1,2,3,4,5,6,7').split(',').map((s) => s.trim()),
);
const STARTUPS = positiveEnv('BENCH_PEERS_STARTUPS', 5);
const LATENCY_TASKS = positiveEnv('BENCH_PEERS_LATENCY_TASKS', 10);
/** The pollInterval of `slow`'s tasks, on both servers. */
const POLL_MS = positiveEnv('BENCH_PEERS_POLL_MS', 500);
/** How long `slow` works before it returns. */
const WORK_MS = 200;
/** Whatever happens, the whole run ends by then. */
const HARD_DEADLINE_MS = 600_000;
const REQUEST_TIMEOUT_MS = 10_000;
const STARTUP_TIMEOUT_MS = 30_000;
const STARTUP_POLL_MS = 5;
/** TTL of the tasks `quick` creates (both servers): the store stays small under load. */
const QUICK_TTL_MS = 5_000;
const KEEP_TTL_MS = 3_600_000;
const SLOW_TTL_MS = 60_000;

const CREATE_TARGET_RATIO = 0.7;
const GET_TARGET_RATIO = 0.85;
const REKOG_TARGET_RATIO = 0.95;
const ECHO_TARGET_RATIO = 1.0;
const STARTUP_TARGET_RATIO = 1.35;

/** The guard's token → principal map; the bench calls as `alice`. */
const TOKENS = new Map([
  ['token-alice', 'alice'],
  ['token-bob', 'bob'],
]);
const TOKEN = 'token-alice';

// ---------------------------------------------------------------------------------------------
// The wire
// ---------------------------------------------------------------------------------------------

/** A 2026-07-28 request (standard headers, per-request envelope, bearer token). */
function modernRequest(method, params, { tasks = true, id = 1, path = '/mcp' } = {}) {
  const name = params.name ?? params.taskId;
  return {
    path,
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': PROTOCOL_VERSION,
      'mcp-method': method,
      ...(name !== undefined && { 'mcp-name': name }),
      authorization: `Bearer ${TOKEN}`,
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id,
      method,
      params: { ...params, _meta: requestMeta('peers-bench', tasks) },
    }),
  };
}

/** A 2025-11-25 request to the stateless v1 server: no envelope, no session. */
function legacyRequest(method, params, { id = 1 } = {}) {
  return {
    path: '/mcp',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': LEGACY_PROTOCOL_VERSION,
    },
    body: JSON.stringify({ jsonrpc: '2.0', id, method, params }),
  };
}

const ECHO_ARGS = { name: 'echo', arguments: { text: 'hello' } };
const oursEcho = () => modernRequest('tools/call', ECHO_ARGS, { tasks: false });
const oursEchoDeclaringTasks = () => modernRequest('tools/call', ECHO_ARGS);
const v1Echo = () => legacyRequest('tools/call', ECHO_ARGS);
const oursCall = (name) => modernRequest('tools/call', { name, arguments: {} });
const v1Call = (name, ttl) => legacyRequest('tools/call', { name, arguments: {}, task: { ttl } });
const oursGet = (taskId) => modernRequest('tasks/get', { taskId });
const v1Get = (taskId) => legacyRequest('tasks/get', { taskId });

// ---------------------------------------------------------------------------------------------
// Server side (child process): `node bench/peers.bench.mjs --serve <kind> <port>`
// ---------------------------------------------------------------------------------------------

/** What the bare routes answer: set by the parent (`{ type: 'bare' }`) once it has the bytes. */
const bare = { get: null, echo: null, create: null };

/** `slow`'s result: the moment it returns, on the clock every process shares. */
const stamped = () => ({ content: [{ type: 'text', text: String(process.hrtime.bigint()) }] });

async function serveOurs(port) {
  const { Controller, Get, HttpCode, Injectable, Module, Post, UnauthorizedException } =
    await import('@nestjs/common');
  const { APP_GUARD, NestFactory } = await import('@nestjs/core');
  const { ExpressAdapter } = await import('@nestjs/platform-express');
  const { TasksModule, TaskTool } = await import('nestjs-mcp-tasks');
  const z = await import('zod');

  class TokenGuard {
    canActivate(context) {
      const req = context.switchToHttp().getRequest();
      const header = req.headers.authorization;
      const token = typeof header === 'string' ? /^Bearer (\S+)$/.exec(header)?.[1] : undefined;
      const principal = token === undefined ? undefined : TOKENS.get(token);
      if (principal === undefined) throw new UnauthorizedException();
      req.user = { principal };
      return true;
    }
  }
  Reflect.decorate([Injectable()], TokenGuard);

  class PeerTools {
    async quick() {
      return { content: [{ type: 'text', text: 'done' }] };
    }
    async keep() {
      return { content: [{ type: 'text', text: 'kept' }] };
    }
    async slow() {
      await sleep(WORK_MS);
      return stamped();
    }
  }
  decorateMethod(
    [TaskTool({ name: 'quick', description: 'Finishes at once.', ttlMs: QUICK_TTL_MS })],
    PeerTools.prototype,
    'quick',
  );
  decorateMethod(
    [TaskTool({ name: 'keep', description: 'Finishes at once.', ttlMs: KEEP_TTL_MS })],
    PeerTools.prototype,
    'keep',
  );
  decorateMethod(
    [
      TaskTool({
        name: 'slow',
        description: `Finishes after ${WORK_MS} ms.`,
        ttlMs: SLOW_TTL_MS,
        pollIntervalMs: POLL_MS,
      }),
    ],
    PeerTools.prototype,
    'slow',
  );
  Reflect.decorate([Injectable()], PeerTools);

  class BareController {
    get() {
      return bare.get;
    }
    echo() {
      return bare.echo;
    }
    create() {
      return bare.create;
    }
    ping() {
      return { ok: true };
    }
  }
  decorateMethod([Post('get'), HttpCode(200)], BareController.prototype, 'get');
  decorateMethod([Post('echo'), HttpCode(200)], BareController.prototype, 'echo');
  decorateMethod([Post('create'), HttpCode(200)], BareController.prototype, 'create');
  decorateMethod([Get('ping')], BareController.prototype, 'ping');
  Reflect.decorate([Controller('bare')], BareController);

  class PeersModule {}
  Reflect.decorate(
    [
      Module({
        imports: [
          TasksModule.forRoot({
            principal: (req) => req.user?.principal,
            maxRows: null,
            // One principal makes every task: a quota above what the 5 s TTL of `quick` leaves
            // under load, so the count still runs on every call but none has to make room.
            maxTasksPerOwner: 1_000_000,
            janitor: { intervalMs: 1_000 },
            serverInfo: { name: 'peers-bench', version: '1.0.0' },
            configure: (server) => {
              server.registerTool(
                'echo',
                { description: 'Returns the text.', inputSchema: z.object({ text: z.string() }) },
                ({ text }) => ({ content: [{ type: 'text', text }] }),
              );
            },
          }),
        ],
        controllers: [BareController],
        providers: [PeerTools, { provide: APP_GUARD, useClass: TokenGuard }],
      }),
    ],
    PeersModule,
  );
  const app = await NestFactory.create(PeersModule, new ExpressAdapter(), {
    logger: false,
    forceCloseConnections: true,
  });
  await app.listen(port, '127.0.0.1');
  return { port: app.getHttpServer().address().port, close: () => app.close() };
}

/**
 * The rekog demo's `entry` (examples/rekog/main.ts with tasks, plain.ts without), run as its file
 * runs: it reads PORT and HOST, builds its app and listens, and the import does not wait for it,
 * so the port is polled until it accepts. Its logs (Nest's and its banner) are silenced: this
 * process's output is the bench's.
 */
async function serveRekog(entry, port) {
  const file = new URL(`../.demo-build/examples/rekog/${entry}.js`, import.meta.url);
  if (!existsSync(file)) {
    throw new Error(`${fileURLToPath(file)} is missing: run \`npx tsc -p tsconfig.examples.json\``);
  }
  const { Logger } = await import('@nestjs/common');
  Logger.overrideLogger(false);
  console.log = () => undefined;
  const chosen = port === 0 ? await freePort() : port;
  process.env.PORT = String(chosen);
  process.env.HOST = '127.0.0.1';
  await import(file.href);
  const start = performance.now();
  while (!(await accepts(chosen))) {
    if (performance.now() - start > STARTUP_TIMEOUT_MS) {
      throw new Error(`${entry}: not listening after ${STARTUP_TIMEOUT_MS} ms`);
    }
    await sleep(STARTUP_POLL_MS);
  }
  // The example's app is its own; the process ends with it.
  return { port: chosen, close: async () => undefined };
}

/** Whether a TCP connection to the loopback port succeeds. */
function accepts(port) {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

async function serveBareNest(port) {
  const { Controller, Get, Module } = await import('@nestjs/common');
  const { NestFactory } = await import('@nestjs/core');
  const { ExpressAdapter } = await import('@nestjs/platform-express');
  class PingController {
    ping() {
      return { ok: true };
    }
  }
  decorateMethod([Get('ping')], PingController.prototype, 'ping');
  Reflect.decorate([Controller()], PingController);
  class BareModule {}
  Reflect.decorate([Module({ controllers: [PingController] })], BareModule);
  const app = await NestFactory.create(BareModule, new ExpressAdapter(), {
    logger: false,
    forceCloseConnections: true,
  });
  await app.listen(port, '127.0.0.1');
  return { port: app.getHttpServer().address().port, close: () => app.close() };
}

/** Starts an Express app on loopback; `close` ends it and its connections. */
async function listenExpress(app, port) {
  const server = await new Promise((resolve, reject) => {
    const s = app.listen(port, '127.0.0.1', () => resolve(s));
    s.once('error', reject);
  });
  return {
    port: server.address().port,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/**
 * The SDK v2 serving `echo` on its own (`createMcpHandler`, a McpServer per request) and its
 * Node handler, which takes the parsed body.
 */
async function sdkEcho(name) {
  const { createMcpHandler, McpServer } = await import('@modelcontextprotocol/server');
  const { toNodeHandler } = await import('@modelcontextprotocol/node');
  const z = await import('zod');
  const handler = createMcpHandler(() => {
    const server = new McpServer({ name, version: '1.0.0' });
    server.registerTool(
      'echo',
      { description: 'Returns the text.', inputSchema: z.object({ text: z.string() }) },
      ({ text }) => ({ content: [{ type: 'text', text }] }),
    );
    return server;
  });
  return { handler, nodeHandler: toNodeHandler(handler) };
}

async function serveNestSdk(port) {
  const { Controller, Get, Module, Post, Req, Res } = await import('@nestjs/common');
  const { NestFactory } = await import('@nestjs/core');
  const { ExpressAdapter } = await import('@nestjs/platform-express');
  const { handler, nodeHandler } = await sdkEcho('peers-bench-nest-sdk');
  class PingController {
    ping() {
      return { ok: true };
    }
    mcp(req, res) {
      return nodeHandler(req, res, req.body);
    }
  }
  decorateMethod([Get('ping')], PingController.prototype, 'ping');
  decorateMethod([Post('mcp')], PingController.prototype, 'mcp');
  Req()(PingController.prototype, 'mcp', 0);
  Res()(PingController.prototype, 'mcp', 1);
  Reflect.decorate([Controller()], PingController);
  class NestSdkModule {}
  Reflect.decorate([Module({ controllers: [PingController] })], NestSdkModule);
  const app = await NestFactory.create(NestSdkModule, new ExpressAdapter(), {
    logger: false,
    forceCloseConnections: true,
  });
  await app.listen(port, '127.0.0.1');
  return {
    port: app.getHttpServer().address().port,
    close: async () => {
      await handler.close();
      await app.close();
    },
  };
}

async function serveSdkV2(port) {
  const { default: express } = await import('express');
  const { handler, nodeHandler } = await sdkEcho('peers-bench-sdk-v2');
  const app = express();
  // As an Express app has it (the SDK's createMcpExpressApp installs express.json()): the parsed
  // body handed on, so the handler reads nothing again. In trial runs this wiring served about
  // 1.4× the requests/s of the handler reading the stream itself: the stronger baseline.
  app.post('/mcp', express.json(), (req, res) => nodeHandler(req, res, req.body));
  app.post('/bare/echo', express.json(), (_req, res) => res.json(bare.echo));
  app.get('/ping', (_req, res) => res.json({ ok: true }));
  const server = await listenExpress(app, port);
  return {
    port: server.port,
    close: async () => {
      await handler.close();
      await server.close();
    },
  };
}

async function serveV1(port) {
  const { default: express } = await import('express');
  const { McpServer } = await import('@modelcontextprotocol/sdk/server/mcp.js');
  const { StreamableHTTPServerTransport } =
    await import('@modelcontextprotocol/sdk/server/streamableHttp.js');
  const { InMemoryTaskStore, InMemoryTaskMessageQueue } =
    await import('@modelcontextprotocol/sdk/experimental/tasks');
  const z = await import('zod');

  // Shared by every request's server: the tasks outlive the request that made them.
  const taskStore = new InMemoryTaskStore();
  const taskMessageQueue = new InMemoryTaskMessageQueue();
  /** A task tool whose work runs in the background and completes the task in the shared store. */
  const taskTool = (work, pollInterval) => ({
    async createTask({ taskStore: requestStore, taskRequestedTtl }) {
      const task = await requestStore.createTask({
        ttl: taskRequestedTtl,
        ...(pollInterval !== undefined && { pollInterval }),
      });
      (async () => {
        const result = await work();
        await taskStore.storeTaskResult(task.taskId, 'completed', result);
      })().catch(() => undefined);
      return { task };
    },
    async getTask(extra) {
      return await extra.taskStore.getTask(extra.taskId);
    },
    async getTaskResult(extra) {
      return await extra.taskStore.getTaskResult(extra.taskId);
    },
  });
  const build = () => {
    const server = new McpServer(
      { name: 'peers-bench-v1', version: '1.0.0' },
      {
        capabilities: { tasks: { requests: { tools: { call: {} } }, cancel: {}, list: {} } },
        taskStore,
        taskMessageQueue,
      },
    );
    server.experimental.tasks.registerToolTask(
      'quick',
      { description: 'Finishes at once.' },
      taskTool(async () => ({ content: [{ type: 'text', text: 'done' }] })),
    );
    server.experimental.tasks.registerToolTask(
      'slow',
      { description: `Finishes after ${WORK_MS} ms.` },
      taskTool(async () => {
        await sleep(WORK_MS);
        return stamped();
      }, POLL_MS),
    );
    server.registerTool(
      'echo',
      { description: 'Returns the text.', inputSchema: { text: z.string() } },
      ({ text }) => ({ content: [{ type: 'text', text }] }),
    );
    return server;
  };
  const app = express();
  app.post('/mcp', express.json(), async (req, res) => {
    const server = build();
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: undefined,
      enableJsonResponse: true,
    });
    res.on('close', () => {
      transport.close().catch(() => undefined);
      server.close().catch(() => undefined);
    });
    try {
      await server.connect(transport);
      await transport.handleRequest(req, res, req.body);
    } catch {
      if (!res.headersSent) res.status(500);
      res.end();
    }
  });
  const server = await listenExpress(app, port);
  return {
    port: server.port,
    close: async () => {
      taskStore.cleanup();
      await server.close();
    },
  };
}

async function serve(kind, port) {
  const starters = {
    ours: serveOurs,
    'bare-nest': serveBareNest,
    'nest-sdk': serveNestSdk,
    'sdk-v2': serveSdkV2,
    v1: serveV1,
    'rekog-tasks': (port) => serveRekog('main', port),
    'rekog-plain': (port) => serveRekog('plain', port),
  };
  const start = starters[kind];
  if (!start) throw new Error(`unknown server kind ${kind}`);
  const server = await start(port);
  process.on('message', (message) => {
    switch (message?.type) {
      case 'cpu':
        process.send({ type: 'cpu', usage: process.cpuUsage() });
        break;
      case 'bare':
        if (message.get !== undefined) bare.get = message.get;
        if (message.echo !== undefined) bare.echo = message.echo;
        if (message.create !== undefined) bare.create = message.create;
        process.send({ type: 'bare' });
        break;
    }
  });
  exitOnStop(server);
  process.send({ type: 'ready', kind, port: server.port });
}

// ---------------------------------------------------------------------------------------------
// Client side (this process): servers, requests, load
// ---------------------------------------------------------------------------------------------

/** Every child this process started, for the hard deadline. */
const children = new Set();

/** A server in a child process: its port, its CPU time on request. */
class ServerProcess {
  static async start(kind) {
    const { child, ready } = await startChild(import.meta.url, ['--serve', kind, '0'], {
      label: kind,
    });
    children.add(child);
    return new ServerProcess(child, ready);
  }

  constructor(child, ready) {
    this.child = child;
    this.kind = ready.kind;
    this.port = ready.port;
  }

  /** The child's user+system CPU time so far, in µs. */
  async cpu() {
    const { usage } = await askChild(this.child, 'cpu');
    return usage.user + usage.system;
  }

  /** Tells the child what its bare routes answer. */
  setBare(answers) {
    return new Promise((resolve) => {
      const onMessage = (message) => {
        if (message?.type !== 'bare') return;
        this.child.off('message', onMessage);
        resolve();
      };
      this.child.on('message', onMessage);
      this.child.send({ type: 'bare', ...answers });
    });
  }

  async stop() {
    await stopChild(this.child);
    children.delete(this.child);
  }
}

/** One request sent once, with a fresh connection or the given agent: status, headers, text. */
function once(port, { path, headers, body }, agent = false) {
  return new Promise((resolve, reject) => {
    const payload = Buffer.from(body ?? '');
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path,
        method: body === undefined ? 'GET' : 'POST',
        agent,
        headers: { ...headers, 'content-length': String(payload.length) },
        timeout: REQUEST_TIMEOUT_MS,
      },
      (res) => {
        const chunks = [];
        res.on('data', (chunk) => chunks.push(chunk));
        res.on('end', () =>
          resolve({
            status: res.statusCode,
            headers: res.headers,
            text: Buffer.concat(chunks).toString('utf8'),
          }),
        );
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no answer in ${REQUEST_TIMEOUT_MS} ms`)));
    req.on('error', reject);
    req.end(payload);
  });
}

/** The JSON-RPC answer of one request, checked: HTTP 200, a `result`; returns it. */
async function rpc(label, port, req, agent) {
  const { status, text } = await once(port, req, agent);
  let json;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  if (status !== 200 || json?.jsonrpc !== '2.0' || json.result === undefined) {
    throw new Error(`${label} answered HTTP ${status}: ${String(text).slice(0, 300)}`);
  }
  return json.result;
}

/** Polls `tasks/get` every `everyMs` until the task is completed; resolves the last result. */
async function pollCompleted(label, port, makeGet, everyMs, agent, timeoutMs = 10_000) {
  const start = performance.now();
  for (;;) {
    const result = await rpc(label, port, makeGet(), agent);
    if (result.status === 'completed') return result;
    if (result.status !== 'working') throw new Error(`${label}: task ${result.status}`);
    if (performance.now() - start > timeoutMs) throw new Error(`${label}: not completed`);
    await sleep(everyMs);
  }
}

const { targets, target, verify, ...generator } = loadGenerator({
  concurrency: CONCURRENCY,
  rounds: ROUNDS,
  roundMs: ROUND_MS,
  warmupMs: WARMUP_MS,
  requestTimeoutMs: REQUEST_TIMEOUT_MS,
});

const pad = (s, n) => String(s).padStart(n);

/** bench/load.mjs's comparison, with its medians one contender and one ratio a line. */
async function compareAll(title, contenders, pairs) {
  const summary = await generator.compareAll(title, contenders, pairs);
  console.log('  median:');
  summary.labels.forEach((label, i) =>
    console.log(
      `    ${label.padEnd(summary.width)}: ${pad(fmt(summary.rps[i]), 7)} req/s, ` +
        `${pad(fmt(summary.us[i]), 5)} µs of server CPU per request` +
        (summary.errors[i] ? ` (${summary.errors[i]} non-200 answers)` : ''),
    ),
  );
  for (const r of summary.pairs) {
    console.log(
      `    ratio ${r.label}: ${fmt(r.ratio, 3)} (rounds ${r.rounds.map((x) => fmt(x, 2)).join(' ')})`,
    );
  }
  return summary;
}

const isResult = (check) => (json) =>
  json?.jsonrpc === '2.0' && json.error === undefined && check(json.result);

/**
 * The bare creation route must answer what a creation answers: the same bytes but for the task's
 * id and times, which are new on every call (and of the same length).
 */
async function sameCreation(baseline, subject) {
  const mask = (text) =>
    text
      .replace(/"taskId":"[^"]*"/, '"taskId":"…"')
      .replace(/"(createdAt|lastUpdatedAt)":"[^"]*"/g, '"$1":"…"');
  const ours = await verify(subject, () => true);
  const theirs = await verify(baseline, () => true);
  if (ours.length !== theirs.length || mask(ours) !== mask(theirs)) {
    throw new Error(
      `${baseline.label} does not answer a creation's bytes as ${subject.label}:\n  ${theirs}\n  ${ours}`,
    );
  }
}

/** The bare route must answer exactly the bytes the endpoint answers. */
async function sameBytes(baseline, subject) {
  const ours = await verify(subject, () => true);
  const theirs = await verify(baseline, () => true);
  if (ours !== theirs) {
    throw new Error(
      `${baseline.label} does not answer the same bytes as ${subject.label}:\n  ${theirs}\n  ${ours}`,
    );
  }
}

// ---------------------------------------------------------------------------------------------
// (5) completion latency
// ---------------------------------------------------------------------------------------------

/**
 * Opens a `subscriptions/listen` stream for `taskId` on our server; resolves once acknowledged
 * with `{ completed }`, a promise of the receipt time and the stamp of the completion.
 */
function listenFor(port, taskId) {
  return new Promise((resolveAck, rejectAck) => {
    let onCompleted;
    let onFailed;
    const completed = new Promise((resolve, reject) => {
      onCompleted = resolve;
      onFailed = reject;
    });
    completed.catch(() => undefined);
    const body = listenBody('peers-listen', taskId, 'peers-bench');
    const req = request({
      host: '127.0.0.1',
      port,
      path: '/mcp',
      method: 'POST',
      agent: false,
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': PROTOCOL_VERSION,
        'mcp-method': 'subscriptions/listen',
        authorization: `Bearer ${TOKEN}`,
        'content-length': String(Buffer.byteLength(body)),
      },
    });
    let acked = false;
    const fail = (error) => (acked ? onFailed(error) : rejectAck(error));
    req.on('error', fail);
    req.on('response', (res) => {
      if (res.statusCode !== 200 || !/text\/event-stream/.test(res.headers['content-type'])) {
        fail(new Error(`listen answered HTTP ${res.statusCode} ${res.headers['content-type']}`));
        res.resume();
        return;
      }
      res.setEncoding('utf8');
      let buffer = '';
      res.on('data', (chunk) => {
        const at = nowNs();
        buffer += chunk;
        for (let end = buffer.indexOf('\n\n'); end !== -1; end = buffer.indexOf('\n\n')) {
          const frame = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const data = frame.split('\n').find((line) => line.startsWith('data: '));
          if (data === undefined) continue;
          const message = JSON.parse(data.slice(6));
          if (!acked) {
            if (message.method !== 'notifications/subscriptions/acknowledged') {
              fail(new Error(`listen: unexpected first message ${data}`));
              return;
            }
            acked = true;
            resolveAck({ completed, close: () => req.destroy() });
            continue;
          }
          const params = message.params ?? {};
          if (message.method === 'notifications/tasks' && params.taskId === taskId) {
            if (params.status === 'completed') {
              onCompleted({ at, stamp: BigInt(params.result.content[0].text) });
            } else if (params.status !== 'working') {
              fail(new Error(`listen: task ${params.status}`));
            }
          }
        }
      });
      res.on('error', fail);
      res.on('end', () => fail(new Error('listen: the stream ended before the completion')));
    });
    req.end(body);
  });
}

/** The three ways a client learns of `slow`'s completion; each resolves the latency in ms. */
function latencyContenders(ours, v1) {
  const agent = new Agent({ keepAlive: true });
  return {
    agent,
    list: [
      {
        label: 'ours, push (listen stream)',
        async run() {
          const { taskId } = await rpc('ours slow', ours.port, oursCall('slow'), agent);
          const stream = await listenFor(ours.port, taskId);
          try {
            const { at, stamp } = await stream.completed;
            return Number(at - stamp) / 1e6;
          } finally {
            stream.close();
          }
        },
      },
      {
        label: `ours, polling tasks/get`,
        async run() {
          const created = await rpc('ours slow', ours.port, oursCall('slow'), agent);
          if (created.pollIntervalMs !== POLL_MS) {
            throw new Error(`ours: slow's task polls at ${created.pollIntervalMs}, not ${POLL_MS}`);
          }
          await sleep(created.pollIntervalMs);
          const done = await pollCompleted(
            'ours tasks/get',
            ours.port,
            () => oursGet(created.taskId),
            created.pollIntervalMs,
            agent,
          );
          const at = nowNs();
          return Number(at - BigInt(done.result.content[0].text)) / 1e6;
        },
      },
      {
        label: `v1, polling tasks/get`,
        async run() {
          const { task } = await rpc('v1 slow', v1.port, v1Call('slow', SLOW_TTL_MS), agent);
          if (task.pollInterval !== POLL_MS) {
            throw new Error(`v1: slow's task polls at ${task.pollInterval}, not ${POLL_MS}`);
          }
          await sleep(task.pollInterval);
          await pollCompleted(
            'v1 tasks/get',
            v1.port,
            () => v1Get(task.taskId),
            task.pollInterval,
            agent,
          );
          const at = nowNs();
          // The result, for its stamp, once the client knows (outside the measured time).
          const result = await rpc(
            'v1 tasks/result',
            v1.port,
            legacyRequest('tasks/result', { taskId: task.taskId }),
            agent,
          );
          return Number(at - BigInt(result.content[0].text)) / 1e6;
        },
      },
    ],
  };
}

async function measureLatency(ours, v1) {
  console.log(
    `\n(5) completion latency: \`slow\` returns ${WORK_MS} ms after the call (pollInterval ` +
      `${POLL_MS} ms on both servers); from its return (stamped by the tool) to the moment the ` +
      `client knows, ${LATENCY_TASKS} tasks per contender, one at a time, rotating order`,
  );
  const { agent, list } = latencyContenders(ours, v1);
  const samples = list.map(() => []);
  try {
    // One of each first (not counted): lazy paths, JIT.
    for (const c of list) await c.run();
    for (let i = 0; i < LATENCY_TASKS; i++) {
      const shift = i % list.length;
      for (let k = 0; k < list.length; k++) {
        const index = (k + shift) % list.length;
        samples[index].push(await list[index].run());
      }
    }
  } finally {
    agent.destroy();
  }
  const results = list.map((c, i) => {
    const sorted = [...samples[i]].sort((a, b) => a - b);
    return { label: c.label, median: median(sorted), min: sorted[0], max: sorted.at(-1) };
  });
  const width = Math.max(...results.map((r) => r.label.length));
  for (const r of results) {
    console.log(
      `  ${r.label.padEnd(width)}: median ${pad(fmt(r.median, 1), 6)} ms ` +
        `(min ${fmt(r.min, 1)}, max ${fmt(r.max, 1)})`,
    );
  }
  return results;
}

// ---------------------------------------------------------------------------------------------
// (6) startup to first served request
// ---------------------------------------------------------------------------------------------

const pingOk = (r) => r.status === 200 && r.text === '{"ok":true}';
const echoOk = (r) => r.status === 200 && /"text":"hello"/.test(r.text);
const ping = (path, headers = {}) => ({ path, headers });

/**
 * The requests of each kind's startup: the first is polled until it is answered (the app
 * listens: `GET …/ping`, a bare route, ours' behind its guard), the next one sent once then (ours
 * and sdk-v2: the first MCP request, a `tools/call` of `echo`). The last answer is the first
 * served request.
 */
const startupSteps = {
  ours: [
    { request: ping('/bare/ping', { authorization: `Bearer ${TOKEN}` }), ok: pingOk },
    { request: oursEcho(), ok: echoOk },
  ],
  'bare-nest': [{ request: ping('/ping'), ok: pingOk }],
  'nest-sdk': [
    { request: ping('/ping'), ok: pingOk },
    { request: oursEcho(), ok: echoOk },
  ],
  'sdk-v2': [
    { request: ping('/ping'), ok: pingOk },
    { request: oursEcho(), ok: echoOk },
  ],
};

/**
 * Forks a fresh server of `kind`; times the fork → the first answer (listening) and → the answer
 * of its last step (served). Stops it.
 */
async function startupOnce(kind) {
  const port = await freePort();
  const [first, ...rest] = startupSteps[kind];
  const start = nowNs();
  const child = fork(fileURLToPath(import.meta.url), ['--serve', kind, String(port)], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  children.add(child);
  let exited = false;
  child.once('exit', () => (exited = true));
  const check = (step, answer) => {
    if (!step.ok(answer)) {
      throw new Error(
        `${kind}: ${step.request.path} answered HTTP ${answer.status} ${answer.text}`,
      );
    }
  };
  try {
    let answer;
    for (;;) {
      if (exited) throw new Error(`${kind}: exited during startup`);
      answer = await once(port, first.request).catch(() => null);
      if (answer !== null) break;
      if (Number(nowNs() - start) / 1e6 > STARTUP_TIMEOUT_MS) {
        throw new Error(`${kind}: no answer in ${STARTUP_TIMEOUT_MS} ms`);
      }
      await sleep(STARTUP_POLL_MS);
    }
    check(first, answer);
    const listening = Number(nowNs() - start) / 1e6;
    for (const step of rest) check(step, await once(port, step.request));
    const served = Number(nowNs() - start) / 1e6;
    // The CPU the server spent from its first instruction to its first served request: what the
    // wall time is made of on an idle machine, and far less moved by other load than it.
    const { usage } = await askChild(child, 'cpu');
    return { listening, served, cpu: (usage.user + usage.system) / 1000 };
  } finally {
    await stopChild(child);
    children.delete(child);
  }
}

async function measureStartup() {
  const kinds = ['ours', 'bare-nest', 'nest-sdk', 'sdk-v2'];
  console.log(
    `\n(6) startup: fork → first answer of a bare GET /ping route (polled every ` +
      `${STARTUP_POLL_MS} ms) → first served MCP request (tools/call echo, all but bare-nest); ` +
      `each server ${STARTUPS} times, rotating order, after one start of each not counted`,
  );
  const samples = Object.fromEntries(kinds.map((kind) => [kind, []]));
  // One of each first (not counted): the file system cache.
  for (const kind of kinds) await startupOnce(kind);
  for (let i = 0; i < STARTUPS; i++) {
    const shift = i % kinds.length;
    const order = [...kinds.slice(shift), ...kinds.slice(0, shift)];
    for (const kind of order) samples[kind].push(await startupOnce(kind));
  }
  const result = {};
  for (const kind of kinds) {
    const listening = median(samples[kind].map((s) => s.listening));
    const served = median(samples[kind].map((s) => s.served));
    const cpu = median(samples[kind].map((s) => s.cpu));
    result[kind] = { listening, served, cpu };
    const runs = (key) => samples[kind].map((s) => fmt(s[key])).join(' ');
    console.log(
      `  ${kind.padEnd(9)}: first served request median ${pad(fmt(served), 5)} ms ` +
        `(runs ${runs('served')}); listening ${pad(fmt(listening), 5)} ms (runs ${runs('listening')}); ` +
        `CPU to first served request ${pad(fmt(cpu), 5)} ms (runs ${runs('cpu')})`,
    );
  }
  return result;
}

// ---------------------------------------------------------------------------------------------
// (4) idle: bench/idle.bench.mjs, as it is
// ---------------------------------------------------------------------------------------------

/** Runs the idle bench in a child process; returns its output lines and exit code. */
function runIdleBench() {
  const env = { ...process.env };
  env.BENCH_IDLE_WINDOW_MS ??= '5000';
  // Its rows are peers' measure (4), recorded with peers' own; a run with a 5 s window is not a
  // record of bench:idle.
  delete env.BENCH_RECORD;
  console.log(
    `\n(4) heap and idle CPU of ${env.BENCH_IDLE_CALLS ?? '10,000'} running task-tool calls: ` +
      `bench/idle.bench.mjs (BENCH_IDLE_WINDOW_MS=${env.BENCH_IDLE_WINDOW_MS}), its output:`,
  );
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      ['--expose-gc', fileURLToPath(new URL('./idle.bench.mjs', import.meta.url))],
      { env, stdio: ['ignore', 'pipe', 'inherit'] },
    );
    children.add(child);
    let out = '';
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (chunk) => {
      out += chunk;
      // Passed on as it comes, indented.
      process.stdout.write(chunk.replace(/^(?=.)/gm, '  | '));
    });
    child.once('error', reject);
    child.once('exit', (code) => {
      children.delete(child);
      resolve({ code, lines: out.split('\n') });
    });
  });
}

/** The idle bench's SUMMARY rows, as `[what, figure, target, verdict]`. */
function idleRows(lines) {
  const start = lines.findIndex((line) => line.includes(' SUMMARY '));
  if (start === -1) return [];
  const rows = [];
  for (const line of lines.slice(start + 1)) {
    // The idle bench numbers its own rows (1), (2): here they are part of measure (4).
    const match = /^\((\d+)\) (.+?)\s{2,}(.+?)\s{2,}target (.+?)\s{2,}(\S.*)$/.exec(line);
    if (match) rows.push([`(4) ${match[2]}`, match[3], match[4], match[5]]);
  }
  return rows;
}

// ---------------------------------------------------------------------------------------------
// The run
// ---------------------------------------------------------------------------------------------

async function main() {
  armHardDeadline(
    HARD_DEADLINE_MS,
    `\nThe peers benchmark ran past ${HARD_DEADLINE_MS / 1000} s; stopping.`,
    () => {
      for (const child of children) child.kill('SIGKILL');
    },
  );
  try {
    await import('nestjs-mcp-tasks');
  } catch (error) {
    console.error('Cannot import nestjs-mcp-tasks; run `npm run build` first.');
    console.error(error);
    process.exit(1);
  }

  console.log(
    `Peers benchmark: Express, loopback, keep-alive, ${CONCURRENCY} requests in flight; ` +
      `${ROUNDS} rounds of ${ROUND_MS} ms per contender after a ${WARMUP_MS} ms warm-up.`,
  );
  console.log(`${machineLine()}. Servers in child processes; this process is the client.`);

  const rows = [];
  const servers = {};
  let exitCode = 0;
  try {
    const needLoad = ['1', '2', '3', '5'].some((m) => ONLY.has(m));
    if (needLoad) {
      const kinds = ['ours', 'v1', ...(ONLY.has('3') ? ['sdk-v2'] : [])];
      const started = await Promise.allSettled(kinds.map((kind) => ServerProcess.start(kind)));
      for (const [i, outcome] of started.entries()) {
        if (outcome.status === 'fulfilled') servers[kinds[i]] = outcome.value;
      }
      const failed = started.find((outcome) => outcome.status === 'rejected');
      if (failed) throw failed.reason;
    }
    const { ours, v1 } = servers;

    if (needLoad) {
      // The guard: no token, or an unknown one, is refused on the endpoint and on the bare routes.
      for (const path of ['/mcp', '/bare/get']) {
        for (const authorization of [undefined, 'Bearer nobody']) {
          const req = oursEcho();
          req.path = path;
          if (authorization === undefined) delete req.headers.authorization;
          else req.headers.authorization = authorization;
          const { status } = await once(ours.port, req);
          if (status !== 401) {
            throw new Error(`ours: ${path} with ${authorization ?? 'no token'} answered ${status}`);
          }
        }
      }
    }

    if (ONLY.has('1')) {
      const subject = target('ours tools/call (2026)', ours, oursCall('quick'));
      const limit = target('ours bare route, same guard', ours, {
        ...oursCall('quick'),
        path: '/bare/create',
      });
      const baseline = target('v1 tools/call (2025)', v1, v1Call('quick', QUICK_TTL_MS));
      const created = isResult((r) => r?.resultType === 'task' && typeof r.taskId === 'string');
      await ours.setBare({ create: JSON.parse(await verify(subject, created)) });
      await sameCreation(limit, subject);
      const summary = await compareAll(
        '(1) task creation: tools/call of `quick` (finishes at once) — ours, tasks extension ' +
          "declared, vs its bare Nest route behind the same guard (a creation's bytes) vs the v1 " +
          'SDK, task-augmented (params.task)',
        [
          { target: subject, check: created },
          { target: limit, check: created },
          {
            target: baseline,
            check: isResult(
              // The store hands back its own record, which the work may complete before it is
              // sent: `working` or `completed`.
              (r) =>
                typeof r?.task?.taskId === 'string' && /^(working|completed)$/.test(r.task.status),
            ),
          },
        ],
        [
          [0, 1],
          [0, 2],
        ],
      );
      const toBare = summary.pairs[0].ratio;
      rows.push([
        '(1) task creation, ours ÷ bare route',
        `${fmt(summary.rps[0])} vs ${fmt(summary.rps[1])} req/s = ${fmt(toBare, 3)}`,
        `≥ ${CREATE_TARGET_RATIO}`,
        verdict(toBare >= CREATE_TARGET_RATIO),
      ]);
      rows.push([
        '(1) task creation, server CPU per request',
        `ours ${fmt(summary.us[0])} µs, bare route ${fmt(summary.us[1])} µs`,
        'none',
        '—',
      ]);
      rows.push([
        '(1) task creation, ours ÷ v1',
        `${fmt(summary.rps[0])} vs ${fmt(summary.rps[2])} req/s = ${fmt(summary.pairs[1].ratio, 3)}`,
        'none',
        '—',
      ]);
    }

    if (ONLY.has('2')) {
      // A completed task owned by the caller on each server; v1's read by another request's
      // server than the one that created it (stateless): the shared store must make that work.
      const agent = new Agent({ keepAlive: false });
      const oursTask = await rpc('ours keep', ours.port, oursCall('keep'), agent);
      const oursDone = await pollCompleted(
        'ours tasks/get',
        ours.port,
        () => oursGet(oursTask.taskId),
        20,
        agent,
      );
      const { task: v1Task } = await rpc('v1 quick', v1.port, v1Call('quick', KEEP_TTL_MS), agent);
      await pollCompleted('v1 tasks/get', v1.port, () => v1Get(v1Task.taskId), 20, agent);
      console.log(
        "\nv1 is stateless: its task, created by one request's McpServer, completed and read by " +
          "tasks/get on later requests' servers (one shared InMemoryTaskStore): checked.",
      );
      // Another principal does not see ours.
      const other = oursGet(oursTask.taskId);
      other.headers.authorization = 'Bearer token-bob';
      const { text: otherText } = await once(ours.port, other);
      if (!/"error"/.test(otherText)) throw new Error(`bob read alice's task: ${otherText}`);
      const subject = target('ours tasks/get (2026)', ours, oursGet(oursTask.taskId));
      const limit = target('ours bare route, same guard', ours, {
        ...oursGet(oursTask.taskId),
        path: '/bare/get',
      });
      const v1Target = target('v1 tasks/get (2025)', v1, v1Get(v1Task.taskId));
      const oursCompleted = isResult(
        (r) => r?.status === 'completed' && r.taskId === oursTask.taskId,
      );
      if (oursDone.result?.content?.[0]?.text !== 'kept') {
        throw new Error(`ours: tasks/get carries no result inline: ${JSON.stringify(oursDone)}`);
      }
      await ours.setBare({ get: JSON.parse(await verify(subject, oursCompleted)) });
      await sameBytes(limit, subject);
      const summary = await compareAll(
        '(2) tasks/get of a completed task owned by the caller — ours vs its bare Nest route ' +
          'behind the same guard (same JSON bytes) vs the v1 SDK',
        [
          { target: subject, check: oursCompleted },
          { target: limit, check: oursCompleted },
          {
            target: v1Target,
            check: isResult((r) => r?.status === 'completed' && r.taskId === v1Task.taskId),
          },
        ],
        [
          [0, 1],
          [0, 2],
        ],
      );
      const toBare = summary.pairs[0].ratio;
      rows.push([
        '(2) tasks/get, ours ÷ bare route',
        `${fmt(summary.rps[0])} vs ${fmt(summary.rps[1])} req/s = ${fmt(toBare, 3)}`,
        `≥ ${GET_TARGET_RATIO}`,
        verdict(toBare >= GET_TARGET_RATIO),
      ]);
      rows.push([
        '(2) tasks/get, server CPU per request',
        `ours ${fmt(summary.us[0])} µs, bare route ${fmt(summary.us[1])} µs`,
        'none',
        '—',
      ]);
      rows.push([
        '(2) tasks/get, ours ÷ v1',
        `${fmt(summary.rps[0])} vs ${fmt(summary.rps[2])} req/s = ${fmt(summary.pairs[1].ratio, 3)}`,
        'none',
        '—',
      ]);
    }

    if (ONLY.has('3')) {
      const sdk = servers['sdk-v2'];
      const echoed = isResult((r) => r?.content?.[0]?.text === 'hello');
      const subject = target('ours echo (2026)', ours, oursEcho());
      const sdkTarget = target('sdk-v2 echo (2026)', sdk, oursEcho());
      const v1Target = target('v1 echo (2025)', v1, v1Echo());
      const oursBare = target('ours bare route', ours, { ...oursEcho(), path: '/bare/echo' });
      const sdkBare = target('sdk-v2 bare route', sdk, { ...oursEcho(), path: '/bare/echo' });
      await verify(subject, echoed);
      await verify(sdkTarget, echoed);
      await ours.setBare({ echo: JSON.parse(await verify(subject, echoed)) });
      await sdk.setBare({ echo: JSON.parse(await verify(sdkTarget, echoed)) });
      await sameBytes(oursBare, subject);
      await sameBytes(sdkBare, sdkTarget);
      const summary = await compareAll(
        '(3) tools/call of the plain `echo` — ours (configure) vs the SDK v2 alone ' +
          '(createMcpHandler) vs the v1 SDK (stateless); the bare routes of ours and sdk-v2 as ' +
          'context (same JSON bytes)',
        [
          { target: subject, check: echoed },
          { target: sdkTarget, check: echoed },
          { target: v1Target, check: echoed },
          { target: oursBare, check: echoed },
          { target: sdkBare, check: echoed },
        ],
        [
          [0, 1],
          [0, 2],
          [0, 3],
          [1, 4],
        ],
      );
      const toSdk = summary.pairs[0].ratio;
      rows.push([
        '(3) echo, ours ÷ sdk-v2',
        `${fmt(summary.rps[0])} vs ${fmt(summary.rps[1])} req/s = ${fmt(toSdk, 3)}`,
        `≥ ${fmt(ECHO_TARGET_RATIO, 1)}`,
        verdict(toSdk >= ECHO_TARGET_RATIO),
      ]);
      rows.push([
        '(3) echo, ours ÷ v1',
        `${fmt(summary.rps[0])} vs ${fmt(summary.rps[2])} req/s = ${fmt(summary.pairs[1].ratio, 3)}`,
        'none',
        '—',
      ]);
      rows.push([
        '(3) echo, server CPU per request',
        `ours ${fmt(summary.us[0])} µs, sdk-v2 ${fmt(summary.us[1])} µs, v1 ${fmt(summary.us[2])} µs`,
        'none',
        '—',
      ]);
    }

    if (ONLY.has('5')) {
      const results = await measureLatency(ours, v1);
      for (const r of results) {
        rows.push([`(5) completion latency, ${r.label}`, `${fmt(r.median, 1)} ms`, 'none', '—']);
      }
    }

    for (const t of targets) t.agent.destroy();
    await Promise.all(Object.values(servers).map((server) => server.stop()));
    for (const kind of Object.keys(servers)) delete servers[kind];

    if (ONLY.has('7')) {
      // Alone on the machine: the other servers are stopped.
      const kinds = ['rekog-tasks', 'rekog-plain'];
      for (const kind of kinds) servers[kind] = await ServerProcess.start(kind);
      const withTasks = servers['rekog-tasks'];
      const without = servers['rekog-plain'];
      // The same request to both: the plain app ignores the extension it does not serve.
      const echoed = isResult((r) => r?.content?.[0]?.text === 'hello');
      const subject = target('rekog + tasks echo (2026)', withTasks, oursEchoDeclaringTasks());
      const baseline = target('rekog alone echo (2026)', without, oursEchoDeclaringTasks());
      // Tasks added show on that app alone: its tools/list carries the task tools.
      const listed = (server) =>
        rpc('rekog tools/list', server.port, modernRequest('tools/list', {}), false);
      const names = (result) => (result.tools ?? []).map((tool) => tool.name).sort();
      const [withTools, withoutTools] = [
        names(await listed(withTasks)),
        names(await listed(without)),
      ];
      if (!withTools.includes('echo') || !withTools.includes('add_slowly')) {
        throw new Error(`rekog-tasks lists ${withTools.join(', ')}`);
      }
      if (withoutTools.join() !== 'echo') throw new Error(`rekog-plain lists ${withoutTools}`);
      const summary = await compareAll(
        "(7) tools/call of a @rekog/mcp-nest app's plain `echo` (a rekog @Tool) — the app with " +
          'tasks added (TaskHttpTransport + attachTasks) vs the same app without them',
        [
          { target: subject, check: echoed },
          { target: baseline, check: echoed },
        ],
        [[0, 1]],
      );
      const ratio = summary.pairs[0].ratio;
      rows.push([
        '(7) rekog echo, with tasks ÷ without',
        `${fmt(summary.rps[0])} vs ${fmt(summary.rps[1])} req/s = ${fmt(ratio, 3)}`,
        `≥ ${REKOG_TARGET_RATIO}`,
        verdict(ratio >= REKOG_TARGET_RATIO),
      ]);
      rows.push([
        '(7) rekog echo, server CPU per request',
        `with tasks ${fmt(summary.us[0])} µs, without ${fmt(summary.us[1])} µs`,
        'none',
        '—',
      ]);
      for (const t of targets) t.agent.destroy();
      await Promise.all(kinds.map((kind) => servers[kind].stop()));
      for (const kind of kinds) delete servers[kind];
    }

    if (ONLY.has('4')) {
      const idle = await runIdleBench();
      if (idle.code !== 0) throw new Error(`bench/idle.bench.mjs exited with ${idle.code}`);
      const parsed = idleRows(idle.lines);
      if (parsed.length === 0) throw new Error('bench/idle.bench.mjs printed no SUMMARY rows');
      rows.push(...parsed);
    }

    if (ONLY.has('6')) {
      const startup = await measureStartup();
      const { ours: o, 'bare-nest': b, 'sdk-v2': v2 } = startup;
      const ratio = o.served / b.served;
      rows.push([
        '(6) startup to first served request, ours ÷ bare Nest',
        `${fmt(o.served)} vs ${fmt(b.served)} ms = ${fmt(ratio, 3)}`,
        `≤ ${STARTUP_TARGET_RATIO}`,
        verdict(ratio <= STARTUP_TARGET_RATIO),
      ]);
      rows.push([
        '(6) startup CPU to first served request, ours ÷ bare Nest',
        `${fmt(o.cpu)} vs ${fmt(b.cpu)} ms = ${fmt(o.cpu / b.cpu, 3)}`,
        'none',
        '—',
      ]);
      rows.push([
        '(6) startup to listening, ours ÷ bare Nest',
        `${fmt(o.listening)} vs ${fmt(b.listening)} ms = ${fmt(o.listening / b.listening, 3)}`,
        'none',
        '—',
      ]);
      const ns = startup['nest-sdk'];
      rows.push([
        '(6) startup to first served request, Nest + SDK alone ÷ bare Nest',
        `${fmt(ns.served)} vs ${fmt(b.served)} ms = ${fmt(ns.served / b.served, 3)}`,
        'none',
        '—',
      ]);
      rows.push([
        '(6) startup to first served request, ours ÷ Nest + SDK alone',
        `${fmt(o.served)} vs ${fmt(ns.served)} ms = ${fmt(o.served / ns.served, 3)}`,
        'none',
        '—',
      ]);
      rows.push([
        '(6) startup to first served request, sdk-v2',
        `${fmt(v2.served)} ms (listening ${fmt(v2.listening)} ms)`,
        'none',
        '—',
      ]);
    }
  } catch (error) {
    console.error('\nThe benchmark could not run:', error);
    exitCode = 1;
  } finally {
    for (const t of targets) t.agent.destroy();
    await Promise.all(Object.values(servers).map((server) => server.stop()));
  }

  // In the order of the measures (the run takes them in another).
  const measure = (row) => Number(/^\((\d+)\)/.exec(row[0])?.[1] ?? 0);
  rows.sort((a, b) => measure(a) - measure(b));
  if (rows.length > 0) printTargetTable(rows);
  // No process.exit(): stdout may be a pipe, and the last lines must get out.
  process.exitCode = exitCode;
}

if (process.argv[2] === '--serve') {
  serve(process.argv[3], Number(process.argv[4] ?? 0)).catch((error) => {
    console.error(`server ${process.argv[3]} failed:`, error);
    process.exit(1);
  });
} else {
  await main();
}
