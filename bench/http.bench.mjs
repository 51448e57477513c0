// HTTP benchmark for nestjs-mcp-tasks: the MCP endpoint under load, next to baselines measured in
// the same run.
//
//   npm run bench         (builds dist/ and .demo-build/, then runs the store and HTTP benchmarks)
//   npm run bench:http    (runs this file against the dist/ and .demo-build/ already built)
//
// The servers run in child processes (this file with `--serve <app>`), Express adapter, on
// loopback; this process is the load generator: keep-alive node:http, 32 requests in flight.
// Three comparisons, each rotating the order of its contenders round by round:
//
//   (a) `tasks/get` of a completed task owned by the caller (the lean path) against a bare Nest
//       route in the same app answering the same JSON bytes to the same request.
//       Target: subject / baseline ≥ 0.5.
//       In the same rounds, a third contender: the 2025-11-25 `tasks/get` of the same task (no
//       per-request envelope, no Mcp-Method/Mcp-Name headers: LegacyTasksHandler).
//       Target: 2025 / 2026 `tasks/get` ≥ 0.8; its ratio to the bare route is printed too.
//   (b) `tools/call` of the plain `echo` tool (the official SDK handler, a McpServer per request)
//       against the same bare route answering echo's JSON. No target: the price of the SDK path.
//   (c) `tools/call` of a task tool that finishes at once, in an app with 1 registered task tool
//       and in an app with 50 (a provider class generated here, each method decorated with
//       `TaskTool` from dist/). Target: 50 tools ≥ 0.8 × 1 tool.
//
// It is a report, not a test: it exits 0 whether a target is met or missed, and non-zero only when
// it cannot run (nothing built, a server that does not start, wrong answers from a server).
//
// Environment knobs (all optional): BENCH_HTTP_ROUNDS (default 5), BENCH_HTTP_ROUND_MS (2000),
// BENCH_HTTP_WARMUP_MS (2500), BENCH_HTTP_ONLY (e.g. "a,c"), BENCH_HTTP_CPU_PROF (a directory:
// the servers run with --cpu-prof and write their profiles there on exit).

import 'reflect-metadata';
import {
  armHardDeadline,
  askChild,
  decorateMethod,
  exitOnStop,
  fmt,
  LEGACY_PROTOCOL_VERSION,
  machineLine,
  positiveEnv,
  PROTOCOL_VERSION,
  requestMeta,
  sleep,
  startChild,
  stopChild,
} from './common.mjs';
import { loadGenerator } from './load.mjs';

// ---------------------------------------------------------------------------------------------
// Parameters
// ---------------------------------------------------------------------------------------------

const CONCURRENCY = 32;
const ROUNDS = positiveEnv('BENCH_HTTP_ROUNDS', 5);
const ROUND_MS = positiveEnv('BENCH_HTTP_ROUND_MS', 2_000);
const WARMUP_MS = positiveEnv('BENCH_HTTP_WARMUP_MS', 2_500);
const ONLY = new Set((process.env.BENCH_HTTP_ONLY ?? 'a,b,c').split(',').map((s) => s.trim()));
const CPU_PROF_DIR = process.env.BENCH_HTTP_CPU_PROF;
/** Whatever happens, the whole run ends by then. */
const HARD_DEADLINE_MS = 170_000;
const REQUEST_TIMEOUT_MS = 10_000;

const GET_TARGET_RATIO = 0.5;
/** The 2025-11-25 `tasks/get` against the 2026 one, in (a). */
const LEGACY_GET_TARGET_RATIO = 0.8;
const TOOLS_TARGET_RATIO = 0.8;
/** The number of task tools in the larger app of (c). */
const MANY_TOOLS = 50;

const PRINCIPAL = 'bench';

// ---------------------------------------------------------------------------------------------
// The wire format: one MCP request as a 2026-07-28 client sends it
// ---------------------------------------------------------------------------------------------

/** Path, headers and body of an MCP request (standard headers, per-request envelope, auth). */
function mcpRequest(method, params, { tasks = true, id = 1 } = {}) {
  const body = JSON.stringify({
    jsonrpc: '2.0',
    id,
    method,
    params: { ...params, _meta: requestMeta('http-bench', tasks) },
  });
  const name = params.name ?? params.taskId;
  return {
    path: '/mcp',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': PROTOCOL_VERSION,
      'mcp-method': method,
      ...(name !== undefined && { 'mcp-name': name }),
      authorization: `Bearer ${PRINCIPAL}`,
    },
    body,
  };
}

/**
 * The same request as a 2025-11-25 client sends it: no `_meta` envelope, no Mcp-Method/Mcp-Name
 * headers, the revision in MCP-Protocol-Version (and no session: the endpoint is stateless).
 */
function legacyRequest(method, params, { id = 1 } = {}) {
  return {
    path: '/mcp',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': LEGACY_PROTOCOL_VERSION,
      authorization: `Bearer ${PRINCIPAL}`,
    },
    body: JSON.stringify({ jsonrpc: '2.0', id, method, params }),
  };
}

const getRequest = (taskId) => mcpRequest('tasks/get', { taskId });
const legacyGetRequest = (taskId) => legacyRequest('tasks/get', { taskId });
const echoRequest = () =>
  mcpRequest('tools/call', { name: 'echo', arguments: { text: 'hello' } }, { tasks: false });
const instantRequest = () => mcpRequest('tools/call', { name: 'instant_0', arguments: {} });

// ---------------------------------------------------------------------------------------------
// Server side (child process): `node bench/http.bench.mjs --serve <demo|tools-N>`
// ---------------------------------------------------------------------------------------------

async function serve(kind) {
  const { Controller, HttpCode, Injectable, Module, Post } = await import('@nestjs/common');
  const { NestFactory } = await import('@nestjs/core');
  const { ExpressAdapter } = await import('@nestjs/platform-express');

  let module;
  /** The JSON the bare routes answer with, captured from the endpoint once it listens. */
  const bare = { get: null, echo: null };
  if (kind === 'demo') {
    const { DemoModule } = await import('../.demo-build/examples/demo.module.js');
    class BareController {
      get() {
        return bare.get;
      }
      echo() {
        return bare.echo;
      }
    }
    decorateMethod([Post('get'), HttpCode(200)], BareController.prototype, 'get');
    decorateMethod([Post('echo'), HttpCode(200)], BareController.prototype, 'echo');
    Reflect.decorate([Controller('bare')], BareController);
    class BenchModule {}
    Reflect.decorate(
      [Module({ imports: [DemoModule], controllers: [BareController] })],
      BenchModule,
    );
    module = BenchModule;
  } else {
    const count = Number(/^tools-(\d+)$/.exec(kind)?.[1]);
    if (!Number.isSafeInteger(count) || count < 1) throw new Error(`unknown server kind ${kind}`);
    const { TasksModule, TaskTool } = await import('nestjs-mcp-tasks');
    const z = await import('zod');
    // One provider with `count` task tools that finish at once, each with its own input schema.
    class InstantTools {}
    for (let i = 0; i < count; i++) {
      const key = `tool${i}`;
      InstantTools.prototype[key] = async function () {
        return { content: [{ type: 'text', text: 'done' }] };
      };
      decorateMethod(
        [
          TaskTool({
            name: `instant_${i}`,
            title: `Instant ${i}`,
            description: 'Finishes at once.',
            input: z.object({ note: z.string().max(100).optional() }),
          }),
        ],
        InstantTools.prototype,
        key,
      );
    }
    Reflect.decorate([Injectable()], InstantTools);
    class BenchModule {}
    Reflect.decorate(
      [
        Module({
          imports: [
            // Every call leaves a completed task behind: no row limit, and short-lived tasks
            // that the janitor removes every second, so the store stays small. The one caller
            // owns them all: its quota is above what 5 s of calls leave, so the count still runs
            // on every call but no call has to make room by deleting a finished task first.
            TasksModule.forRoot({
              maxRows: null,
              maxTasksPerOwner: 1_000_000,
              defaultTtlMs: 5_000,
              janitor: { intervalMs: 1_000 },
              serverInfo: { name: 'http-bench', version: '1.0.0' },
            }),
          ],
          providers: [InstantTools],
        }),
      ],
      BenchModule,
    );
    module = BenchModule;
  }

  const app = await NestFactory.create(module, new ExpressAdapter(), { logger: false });
  app.enableShutdownHooks();
  await app.listen(0, '127.0.0.1');
  const { port } = app.getHttpServer().address();
  const url = (path) => `http://127.0.0.1:${port}${path}`;
  const call = async ({ path, headers, body }) => {
    const response = await globalThis.fetch(url(path), { method: 'POST', headers, body });
    return { status: response.status, text: await response.text() };
  };

  const ready = { type: 'ready', port, kind };
  if (kind === 'demo') {
    // A completed task owned by the bench principal, for tasks/get.
    const created = await call(
      mcpRequest('tools/call', { name: 'add_slowly', arguments: { a: 1, b: 2, delayMs: 0 } }),
    );
    const taskId = JSON.parse(created.text).result?.taskId;
    if (typeof taskId !== 'string') throw new Error(`add_slowly answered ${created.text}`);
    let got;
    for (let i = 0; i < 100; i++) {
      got = await call(getRequest(taskId));
      if (JSON.parse(got.text).result?.status === 'completed') break;
      await sleep(20);
    }
    if (JSON.parse(got.text).result?.status !== 'completed') {
      throw new Error(`the task did not complete: ${got.text}`);
    }
    bare.get = JSON.parse(got.text);
    bare.echo = JSON.parse((await call(echoRequest())).text);
    ready.taskId = taskId;
  }

  process.on('message', (message) => {
    if (message?.type === 'cpu') process.send({ type: 'cpu', usage: process.cpuUsage() });
  });
  // On `stop`, closing the app ends the process normally, so --cpu-prof writes its profile.
  exitOnStop(app);
  process.send(ready);
}

// ---------------------------------------------------------------------------------------------
// Load side (this process)
// ---------------------------------------------------------------------------------------------

/** A server in a child process: its port, and its CPU time on request. */
class ServerProcess {
  static async start(kind) {
    const execArgv = CPU_PROF_DIR
      ? ['--cpu-prof', `--cpu-prof-dir=${CPU_PROF_DIR}`, `--cpu-prof-name=${kind}.cpuprofile`]
      : [];
    const { child, ready } = await startChild(import.meta.url, ['--serve', kind], {
      execArgv,
      label: kind,
    });
    return new ServerProcess(child, ready);
  }

  constructor(child, ready) {
    this.child = child;
    this.kind = ready.kind;
    this.port = ready.port;
    this.taskId = ready.taskId;
  }

  /** The child's user+system CPU time so far, in µs. */
  async cpu() {
    const { usage } = await askChild(this.child, 'cpu');
    return usage.user + usage.system;
  }

  stop() {
    return stopChild(this.child);
  }
}

const { targets, target, verify, ...generator } = loadGenerator({
  concurrency: CONCURRENCY,
  rounds: ROUNDS,
  roundMs: ROUND_MS,
  warmupMs: WARMUP_MS,
  requestTimeoutMs: REQUEST_TIMEOUT_MS,
});

/** bench/load.mjs's comparison, with its medians on one line. */
async function compareAll(title, contenders, pairs) {
  const summary = await generator.compareAll(title, contenders, pairs);
  const contenderLine = summary.labels
    .map((label, i) => `${label} ${fmt(summary.rps[i])} req/s (${fmt(summary.us[i])} µs/req)`)
    .join(', ');
  const ratioLine = summary.pairs
    .map(({ label, ratio }) => `${pairs.length > 1 ? `${label} ` : ''}${fmt(ratio, 3)}`)
    .join(', ');
  console.log(`  median: ${contenderLine}, ratio ${ratioLine}`);
  return summary;
}

/** One pair of a `compareAll` summary, as a summary row's figures. */
function pairSummary(summary, k) {
  const { pair, ratio, rounds: ratios } = summary.pairs[k];
  const [i, j] = pair;
  return {
    subject: summary.rps[i],
    baseline: summary.rps[j],
    subjectUs: summary.us[i],
    baselineUs: summary.us[j],
    ratio,
    ratios,
    errors: summary.errors[i] + summary.errors[j],
  };
}

/** Subject against baseline: a `compareAll` of two, as a summary row's figures. */
async function compare(title, subject, baseline, checks) {
  const summary = await compareAll(
    title,
    [
      { target: subject, check: checks[0] },
      { target: baseline, check: checks[1] },
    ],
    [[0, 1]],
  );
  return pairSummary(summary, 0);
}

async function main() {
  armHardDeadline(HARD_DEADLINE_MS);

  try {
    await import('nestjs-mcp-tasks');
    await import('../.demo-build/examples/demo.module.js');
  } catch (error) {
    console.error(
      'Cannot import nestjs-mcp-tasks or ../.demo-build/examples/demo.module.js; run ' +
        '`npm run build && npx tsc -p tsconfig.examples.json` first (or `npm run bench`).',
    );
    console.error(error);
    process.exit(1);
  }

  console.log(
    `HTTP benchmark: Express, loopback, keep-alive, ${CONCURRENCY} requests in flight; ` +
      `${ROUNDS} rounds of ${ROUND_MS} ms per contender after a ${WARMUP_MS} ms warm-up.`,
  );
  console.log(`${machineLine()}. Servers in child processes; this process is the client.`);

  const kinds = [
    ...(ONLY.has('a') || ONLY.has('b') ? ['demo'] : []),
    ...(ONLY.has('c') ? ['tools-1', `tools-${MANY_TOOLS}`] : []),
  ];
  const servers = {};
  const started = await Promise.allSettled(kinds.map((kind) => ServerProcess.start(kind)));
  for (const [i, outcome] of started.entries()) {
    if (outcome.status === 'fulfilled') servers[kinds[i]] = outcome.value;
  }
  const failed = started.find((outcome) => outcome.status === 'rejected');

  const results = [];
  let exitCode = 0;
  try {
    if (failed) throw failed.reason;
    const isResult = (check) => (json) => json?.jsonrpc === '2.0' && check(json.result);
    if (servers.demo) {
      const demo = servers.demo;
      /** The bare route must answer exactly the bytes the endpoint answers. */
      const sameBytes = async (baseline, subject) => {
        const ours = await verify(subject, () => true);
        const bare = await verify(baseline, () => true);
        if (ours !== bare) {
          throw new Error(`${baseline.label} does not answer the same bytes as ${subject.label}`);
        }
      };
      if (ONLY.has('a')) {
        const subject = target('tasks/get 2026', demo, getRequest(demo.taskId));
        const baseline = target('bare route', demo, {
          ...getRequest(demo.taskId),
          path: '/bare/get',
        });
        // The same task, read by the same owner over the 2025-11-25 era.
        const legacy = target('tasks/get 2025', demo, legacyGetRequest(demo.taskId));
        await sameBytes(baseline, subject);
        const modernText = await verify(subject, () => true);
        const legacyText = await verify(legacy, () => true);
        const keys = (text) => Object.keys(JSON.parse(text).result ?? {}).join(', ');
        console.log(`\n2026 tasks/get answers: ${keys(modernText)}`);
        console.log(`2025 tasks/get answers: ${keys(legacyText)}`);
        const completed = isResult((r) => r?.status === 'completed' && r.taskId === demo.taskId);
        // A 2025 task (SEP-1686): `ttl` is there (null for unlimited), and no error.
        const legacyCompleted = (json) =>
          json?.error === undefined &&
          isResult(
            (r) => r?.status === 'completed' && r.taskId === demo.taskId && r.ttl !== undefined,
          )(json);
        const summary = await compareAll(
          '(a) tasks/get of a completed task (lean path) vs a bare Nest route, same JSON; ' +
            'and the 2025-11-25 tasks/get of the same task',
          [
            { target: subject, check: completed },
            { target: baseline, check: completed },
            { target: legacy, check: legacyCompleted },
          ],
          [
            [0, 1],
            [2, 0],
            [2, 1],
          ],
        );
        const modern = pairSummary(summary, 0);
        results.push({
          what: '(a) tasks/get ÷ bare route',
          ...modern,
          target: `≥ ${GET_TARGET_RATIO}`,
          pass: modern.ratio >= GET_TARGET_RATIO,
        });
        const legacyToModern = pairSummary(summary, 1);
        results.push({
          what: '(a) tasks/get 2025 ÷ tasks/get 2026',
          ...legacyToModern,
          target: `≥ ${LEGACY_GET_TARGET_RATIO}`,
          pass: legacyToModern.ratio >= LEGACY_GET_TARGET_RATIO,
        });
        results.push({
          what: '(a) tasks/get 2025 ÷ bare route',
          ...pairSummary(summary, 2),
          target: null,
        });
      }
      if (ONLY.has('b')) {
        const subject = target('echo (SDK)', demo, echoRequest());
        const baseline = target('bare route', demo, { ...echoRequest(), path: '/bare/echo' });
        await sameBytes(baseline, subject);
        const echoed = isResult((r) => r?.content?.[0]?.text === 'hello');
        const summary = await compare(
          '(b) tools/call echo through the SDK handler vs a bare Nest route, same JSON',
          subject,
          baseline,
          [echoed, echoed],
        );
        results.push({ what: '(b) echo (SDK path) ÷ bare route', ...summary, target: null });
      }
    }
    if (ONLY.has('c')) {
      // Each app publishes the task tools it was built with.
      for (const count of [1, MANY_TOOLS]) {
        const list = target('tools/list', servers[`tools-${count}`], mcpRequest('tools/list', {}));
        await verify(
          list,
          isResult((r) => r?.tools?.length === count),
        );
      }
      const subject = target(
        `${MANY_TOOLS} tools`,
        servers[`tools-${MANY_TOOLS}`],
        instantRequest(),
      );
      const baseline = target('1 tool', servers['tools-1'], instantRequest());
      const task = isResult((r) => r?.resultType === 'task' && typeof r.taskId === 'string');
      const summary = await compare(
        `(c) tools/call of a task tool: app with ${MANY_TOOLS} task tools vs app with 1`,
        subject,
        baseline,
        [task, task],
      );
      results.push({
        what: `(c) ${MANY_TOOLS} task tools ÷ 1 task tool`,
        ...summary,
        target: `≥ ${TOOLS_TARGET_RATIO}`,
        pass: summary.ratio >= TOOLS_TARGET_RATIO,
      });
    }
  } catch (error) {
    console.error('\nThe benchmark could not run:', error);
    exitCode = 1;
  } finally {
    for (const t of targets) t.agent.destroy();
    await Promise.all(Object.values(servers).map((server) => server.stop()));
  }

  if (results.length > 0) {
    console.log('\nSummary');
    for (const r of results) {
      const verdict =
        r.target === null ? 'no target' : `target ${r.target}: ${r.pass ? 'PASS' : 'MISS'}`;
      console.log(
        `  ${r.what}: ${fmt(r.subject)} vs ${fmt(r.baseline)} req/s, ratio ${fmt(r.ratio, 3)} ` +
          `(rounds ${r.ratios.map((x) => fmt(x, 2)).join(' ')}), ` +
          `server ${fmt(r.subjectUs)} vs ${fmt(r.baselineUs)} µs/req — ${verdict}` +
          (r.errors ? ` — ${r.errors} non-200 answers` : ''),
      );
    }
  }
  if (CPU_PROF_DIR) console.log(`\nServer CPU profiles written to ${CPU_PROF_DIR}`);
  // No process.exit(): stdout may be a pipe, and the last lines must get out.
  process.exitCode = exitCode;
}

if (process.argv[2] === '--serve') {
  serve(process.argv[3]).catch((error) => {
    console.error(`server ${process.argv[3]} failed:`, error);
    process.exit(1);
  });
} else {
  await main();
}
