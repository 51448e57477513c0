// Request-scoped task tools benchmark for nestjs-mcp-tasks: does a DI sub-tree per call leave
// anything behind?
//
//   npm run bench:scoped    (builds dist/, then runs this file with --expose-gc)
//
// One process: a Nest application context (no HTTP) importing `TasksModule.forRoot({ path: false,
// janitor: false, maxRows: null, maxTasksPerOwner: null })` from dist/, with two task tools that do
// the same work: `plain` on a singleton provider (the baseline) and `scoped` on a provider that is
// request-scoped through its dependency, a `Scope.REQUEST` repository that injects REQUEST and has
// an `onModuleDestroy`. Each `scoped` call gets a sub-tree of its own (the tool's provider and its
// repository), ended when its method returns. The calls are made as the endpoint makes them,
// through the package's TaskToolRunner (found by class name, `providerNamed` in common.mjs: no
// public entry exports it), 50 in flight, each with a few request headers, an owner and a tenant.
// Each call waits for its task to complete (heard through an `@OnTaskChange` listener), then
// deletes the task from the store, so the store holds nothing between measures and only what the
// calls leave behind can grow.
//
// For each tool: 200 calls of warm-up, then the heap after a full GC (`gc()` twice) at 1,000 calls
// and at 10,000 calls. It prints the ratio of the two, the bytes per call between them, how many
// repositories were made and destroyed (their onModuleDestroy), and how many of the first 1,000
// calls' repositories and REQUEST objects are still reachable after a full GC (WeakRefs).
// Targets: heap at 10,000 ÷ at 1,000 ≤ 1.05 for `scoped`, its bytes per call ≤ 100 (a leaked
// sub-tree is a few KiB per call), every repository destroyed, none reachable.
//
// It is a report, not a test: it exits 0 whether a target is met or missed, and non-zero only when
// it cannot run (nothing built, no --expose-gc, a call that does not complete). A hard deadline
// ends it at 170 s. Knobs: BENCH_SCOPED_CALLS (default 10000), BENCH_SCOPED_FIRST (default 1000).

import 'reflect-metadata';
import {
  armHardDeadline,
  decorateMethod,
  fmt,
  fmtInt,
  fmtMiB,
  fullGc,
  heapUsed,
  loadBuiltPackage,
  machineLine,
  pool,
  positiveEnv,
  printTargetTable,
  providerNamed,
  requireGc,
  sleep,
  verdict,
} from './common.mjs';

requireGc();
armHardDeadline(170_000);
const CALLS = positiveEnv('BENCH_SCOPED_CALLS', 10_000);
const FIRST = positiveEnv('BENCH_SCOPED_FIRST', 1_000);
const WARM_UP = 200;
const IN_FLIGHT = 50;

const lib = await loadBuiltPackage();
const { Inject, Injectable, Module, Scope } = await import('@nestjs/common');
const { DiscoveryModule, NestFactory, REQUEST } = await import('@nestjs/core');

/** What the calls leave behind, watched without holding it. */
const made = { repositories: 0, destroyed: 0 };
const watched = { repositories: [], requests: [] };
let watching = false;

class Repository {
  constructor(request) {
    this.request = request;
    made.repositories++;
    if (watching) {
      watched.repositories.push(new WeakRef(this));
      watched.requests.push(new WeakRef(request));
    }
  }
  find() {
    return `${this.request.principal}@${this.request.tenant}:${this.request.headers['x-correlation-id']}`;
  }
  onModuleDestroy() {
    made.destroyed++;
  }
}
Reflect.decorate([Injectable({ scope: Scope.REQUEST })], Repository);
Inject(REQUEST)(Repository, undefined, 0);

class ScopedTools {
  constructor(repository) {
    this.repository = repository;
  }
  async scoped() {
    await Promise.resolve();
    return { content: [{ type: 'text', text: this.repository.find() }] };
  }
}
decorateMethod([lib.TaskTool({ name: 'scoped' })], ScopedTools.prototype, 'scoped');
Reflect.decorate([Injectable()], ScopedTools);
Inject(Repository)(ScopedTools, undefined, 0);

class PlainTools {
  async plain() {
    await Promise.resolve();
    return { content: [{ type: 'text', text: 'alice@acme:corr' }] };
  }
}
decorateMethod([lib.TaskTool({ name: 'plain' })], PlainTools.prototype, 'plain');
Reflect.decorate([Injectable()], PlainTools);

/** Resolves each call's wait as its task ends. */
const ends = new Map();
class Ends {
  heard(record) {
    if (record.status !== 'completed' && record.status !== 'failed') return;
    ends.get(record.taskId)?.(record.status);
  }
}
decorateMethod([lib.OnTaskChange()], Ends.prototype, 'heard');
Reflect.decorate([Injectable()], Ends);

class BenchModule {}
Reflect.decorate(
  [
    Module({
      imports: [
        DiscoveryModule,
        lib.TasksModule.forRoot({
          path: false,
          janitor: false,
          maxRows: null,
          maxTasksPerOwner: null,
        }),
      ],
      providers: [Repository, ScopedTools, PlainTools, Ends],
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
const store = app.get(lib.TaskStore);
const owner = { principal: 'alice', tenant: 'acme' };
const headers = {
  'content-type': 'application/json',
  authorization: 'Bearer alice',
  'x-correlation-id': 'corr',
};

/** One call as the endpoint makes it, to its task's end; the task is then deleted. */
async function call(tool) {
  let ended;
  const end = new Promise((resolve) => (ended = resolve));
  const record = await runner.start(tool, {}, owner, { headers: { ...headers } });
  ends.set(record.taskId, ended);
  // A task that ended before its wait was set is read back.
  const now = await store.get(record.taskId);
  const status = now?.status === 'completed' || now?.status === 'failed' ? now.status : await end;
  ends.delete(record.taskId);
  if (status !== 'completed') throw new Error(`A ${tool.name} call ended ${status}`);
  await store.delete(record.taskId);
}

async function calls(tool, count) {
  await pool(
    Array.from({ length: count }, () => tool),
    IN_FLIGHT,
    call,
  );
}

/** Heap after GC at FIRST and at CALLS calls of `name`, after a warm-up. */
async function measure(name, watch) {
  const tool = registry.get(name);
  if (tool === undefined) throw new Error(`No task tool ${name}`);
  await calls(tool, WARM_UP);
  watching = watch;
  const started = Date.now();
  await calls(tool, FIRST);
  watching = false;
  await sleep(20);
  const first = heapUsed();
  await calls(tool, CALLS - FIRST);
  const seconds = (Date.now() - started) / 1000;
  await sleep(20);
  const last = heapUsed();
  return { first, last, ratio: last / first, perCall: (last - first) / (CALLS - FIRST), seconds };
}

console.log(`scoped bench: ${machineLine()}`);
console.log(
  `${fmtInt(CALLS)} calls per tool, ${IN_FLIGHT} in flight; heap after GC at ${fmtInt(FIRST)} and ${fmtInt(CALLS)}`,
);
const plain = await measure('plain', false);
const scoped = await measure('scoped', true);
// A WeakRef's target is kept until the task that made it has ended: one turn of the event loop.
await sleep(20);
fullGc();
const liveRepositories = watched.repositories.filter((ref) => ref.deref() !== undefined).length;
const liveRequests = watched.requests.filter((ref) => ref.deref() !== undefined).length;
await app.close();

for (const [name, run] of [
  ['plain (singleton, baseline)', plain],
  ['scoped (sub-tree per call)', scoped],
]) {
  console.log(
    `${name}: ${fmtInt(CALLS)} calls in ${fmt(run.seconds, 1)} s (${fmtInt(CALLS / run.seconds)} /s); ` +
      `heap ${fmtMiB(run.first)} at ${fmtInt(FIRST)} → ${fmtMiB(run.last)} at ${fmtInt(CALLS)}: ` +
      `×${fmt(run.ratio, 3)}, ${fmt(run.perCall, 1)} bytes per call`,
  );
}
const calledScoped = WARM_UP + CALLS;
console.log(
  `repositories made ${fmtInt(made.repositories)}, destroyed ${fmtInt(made.destroyed)}; of the ` +
    `${fmtInt(watched.repositories.length)} watched, ${liveRepositories} repositories and ` +
    `${liveRequests} REQUEST objects reachable after GC`,
);

printTargetTable([
  [
    `scoped: heap at ${fmtInt(CALLS)} ÷ at ${fmtInt(FIRST)}`,
    `×${fmt(scoped.ratio, 3)} (plain ×${fmt(plain.ratio, 3)})`,
    '≤ 1.05',
    verdict(scoped.ratio <= 1.05),
  ],
  [
    'scoped: heap growth per call',
    `${fmt(scoped.perCall, 1)} B (plain ${fmt(plain.perCall, 1)} B)`,
    '≤ 100 B',
    verdict(scoped.perCall <= 100),
  ],
  [
    'scoped: repositories destroyed',
    `${fmtInt(made.destroyed)} of ${fmtInt(made.repositories)}`,
    `all ${fmtInt(calledScoped)}`,
    verdict(made.destroyed === made.repositories && made.repositories === calledScoped),
  ],
  [
    'scoped: sub-trees reachable after GC',
    `${liveRepositories} repositories, ${liveRequests} REQUESTs`,
    '0',
    verdict(liveRepositories === 0 && liveRequests === 0),
  ],
]);
process.exit(0);
