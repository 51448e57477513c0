import { expect } from '@jest/globals';
import { Injectable, type LoggerService, Module, type Type } from '@nestjs/common';
import * as z from 'zod/v4';
import { type TaskContext, TaskTool, TasksModule } from '../../src/index.js';
import type { PartProvider } from '../../src/entries/options.js';
import type { TaskNotifier, TaskStore } from '../../src/entries/store.js';
import { type RunningApp, startApp } from '../support/app.js';
import { openListen, rpc, type SseReader } from '../support/sse.js';
import type { JsonRpcMessage } from '../support/wire.js';

/**
 * The fault suite's app and its measures: instances of one Nest app sharing a store, each with a
 * short lease, running `steady` calls (progress every 100 ms for a set time, then a result that
 * names the call) while the test breaks the store under them; a listen stream per task; and the
 * outcome of every call, read back over HTTP.
 */

/** How often a steady call reports progress. */
export const PROGRESS_MS = 100;
/**
 * The instances' lease: shorter than the shortest outage, so that the outage lets it run out (and
 * the instances must renew before judging each other), but long enough that a busy test process
 * renews in time.
 */
export const FAULT_LEASE_MS = 3_000;

const sleep = (ms: number): Promise<void> => new Promise((done) => setTimeout(done, ms));

@Injectable()
export class SteadyTools {
  /** Reports progress every PROGRESS_MS for `runMs`, then answers with its id and step count. */
  @TaskTool({
    name: 'steady',
    input: z.object({ id: z.string(), runMs: z.number().int().positive() }),
  })
  async steady(input: { id: string; runMs: number }, task: TaskContext) {
    const end = Date.now() + input.runMs;
    let steps = 0;
    while (Date.now() < end) {
      // A call that gave up on its store (past storeOutageMs) stops here.
      task.signal.throwIfAborted();
      await task.progress(`step ${++steps}`);
      await sleep(PROGRESS_MS);
    }
    return {
      content: [{ type: 'text' as const, text: `finished ${input.id}` }],
      structuredContent: { id: input.id, steps },
    };
  }
}

/** Releases a gated call; calls wait on them by id. */
const gates = new Map<string, { released: Promise<void>; release: () => void }>();

/** The gate of call `id` (made on first use). */
export function gate(id: string): { released: Promise<void>; release: () => void } {
  let found = gates.get(id);
  if (found === undefined) {
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    gates.set(id, (found = { released, release }));
  }
  return found;
}

@Injectable()
export class GatedTools {
  /** Reports `steps` progress messages 200 ms apart, then waits for its gate and answers. */
  @TaskTool({ name: 'gated', input: z.object({ id: z.string(), steps: z.number().int() }) })
  async gated(input: { id: string; steps: number }, task: TaskContext) {
    for (let step = 1; step <= input.steps; step++) {
      await task.progress(`step ${step}`);
      await sleep(200);
    }
    await gate(input.id).released;
    return {
      content: [{ type: 'text' as const, text: `finished ${input.id}` }],
      structuredContent: { id: input.id },
    };
  }
}

/**
 * Counts what the instances log at ERROR level (the fault suite reports it). Nest's Logger is one
 * per process, so the instances of a test file share it.
 */
class CountingLogger implements LoggerService {
  errors: string[] = [];
  warnings: string[] = [];
  log(): void {}
  warn(message: unknown): void {
    this.warnings.push(String(message));
  }
  debug(): void {}
  verbose(): void {}
  error(message: unknown): void {
    this.errors.push(String(message));
  }
}

export const faultLog = new CountingLogger();

const principal = (request: unknown): string | undefined => {
  const header = (request as { headers: Record<string, string | undefined> }).headers.authorization;
  return header === undefined ? undefined : /^Bearer\s+(\S+)$/i.exec(header)?.[1];
};

export interface FaultInstance {
  running: RunningApp;
  url: string;
  close(): Promise<void>;
}

/** One instance on the store and notifier `parts` makes (each instance its own clients). */
export async function startInstance(
  parts: () => { store: TaskStore; notifier?: PartProvider<TaskNotifier> },
  options: { storeOutageMs?: number } = {},
): Promise<FaultInstance> {
  const { store, notifier } = parts();
  @Module({
    imports: [
      TasksModule.forRoot({
        principal,
        janitor: false,
        lease: { ttlMs: FAULT_LEASE_MS },
        store,
        ...(notifier !== undefined && { notifier }),
        ...(options.storeOutageMs !== undefined && { storeOutageMs: options.storeOutageMs }),
      }),
    ],
    providers: [SteadyTools, GatedTools],
  })
  class FaultModule {}
  const running = await startApp(FaultModule as Type<unknown>, 'express', '/mcp', (app) =>
    app.useLogger(faultLog),
  );
  return { running, url: running.url, close: () => running.close() };
}

/** A steady call: its id (what its result names), how long it runs, and its task. */
export interface SteadyCall {
  id: string;
  runMs: number;
  taskId: string;
  /** The listen stream that follows it (on one instance or another). */
  stream: SseReader;
}

/** Starts `steady` on `url` as alice; the task id. */
export async function startSteady(url: string, id: string, runMs: number): Promise<string> {
  return await startTool(url, 'steady', { id, runMs });
}

/** Starts task tool `name` on `url` as alice; the task id. */
export async function startTool(
  url: string,
  name: string,
  args: Record<string, unknown>,
): Promise<string> {
  const { body } = await rpc(url, 'tools/call', { name, arguments: args }, { principal: 'alice' });
  if (body.result?.resultType !== 'task') throw new Error(`tools/call: ${JSON.stringify(body)}`);
  return body.result.taskId as string;
}

/** Opens a listen stream on `url` for one task, acknowledged. */
export async function follow(url: string, taskId: string): Promise<SseReader> {
  const listen = await openListen(url, { taskIds: [taskId], principal: 'alice', id: taskId });
  if (listen.stream === undefined) throw new Error(`listen: HTTP ${listen.status} ${listen.text}`);
  await listen.stream.next(5_000);
  return listen.stream;
}

const TERMINAL = new Set(['completed', 'failed', 'cancelled']);

/** The terminal notification a stream carried for its task, if any. */
export function heardEnd(stream: SseReader): JsonRpcMessage | undefined {
  return stream.messages.find(
    (message) =>
      message.method === 'notifications/tasks' &&
      TERMINAL.has(String(message.params?.status ?? '')),
  );
}

/** What each call ended as, read with tasks/get on `url`, and what its stream heard. */
export interface CallOutcome {
  id: string;
  status: string;
  /** The `id` the tool put in its result (the real result), when completed. */
  resultId: unknown;
  error: unknown;
  /** Whether its listen stream heard its terminal state. */
  heard: boolean;
}

/**
 * Waits until every call's task is terminal (read on `url`) and its stream heard the end, or
 * `timeoutMs` passes; then the outcomes.
 */
export async function outcomes(
  url: string,
  calls: readonly SteadyCall[],
  timeoutMs: number,
): Promise<CallOutcome[]> {
  const deadline = Date.now() + timeoutMs;
  const read = async (call: SteadyCall): Promise<CallOutcome> => {
    let status = 'unknown';
    let result: JsonRpcMessage['result'];
    try {
      ({
        body: { result },
      } = await rpc(url, 'tasks/get', { taskId: call.taskId }, { principal: 'alice' }));
      status = String(result?.status ?? 'unknown');
    } catch {
      // The server may be away for a moment; the next round reads again.
    }
    const structured = (result?.result as { structuredContent?: { id?: unknown } } | undefined)
      ?.structuredContent;
    return {
      id: call.id,
      status,
      resultId: structured?.id,
      error: result?.error,
      heard: heardEnd(call.stream) !== undefined,
    };
  };
  for (;;) {
    const all = await Promise.all(calls.map(read));
    const done = all.every((outcome) => TERMINAL.has(outcome.status) && outcome.heard);
    if (done || Date.now() > deadline) return all;
    await sleep(250);
  }
}

/** A summary for a failing expectation: each call's outcome other than a completed and heard one. */
export function misses(all: readonly CallOutcome[]): CallOutcome[] {
  return all.filter(
    (outcome) =>
      outcome.status !== 'completed' || outcome.resultId !== outcome.id || !outcome.heard,
  );
}

/**
 * The fault suite's run: 20 steady calls on instance `a`, each followed by a listen stream on `a`
 * or `b` in turn; `fault` runs a second after they start (it breaks the store and brings it back,
 * resolving when it is back). Half the calls end while the store is away, half after it is back.
 * Returns every outcome, read on `b`, and how long the fault took.
 */
export async function runThroughFault(
  a: FaultInstance,
  b: FaultInstance,
  faultMs: number,
  fault: () => Promise<void>,
  { calls = 20, settleMs = 30_000 }: { calls?: number; settleMs?: number } = {},
): Promise<{ all: CallOutcome[]; faultTookMs: number }> {
  const started: SteadyCall[] = [];
  for (let i = 0; i < calls; i++) {
    const id = `call-${i}`;
    // Even calls end in the middle of the fault, odd ones two seconds after it.
    const runMs = i % 2 === 0 ? 1_000 + faultMs / 2 : 1_000 + faultMs + 2_000;
    const taskId = await startSteady(a.url, id, runMs);
    const stream = await follow(i % 2 === 0 ? a.url : b.url, taskId);
    started.push({ id, runMs, taskId, stream });
  }
  await sleep(1_000);
  const faultStart = Date.now();
  await fault();
  const faultTookMs = Date.now() - faultStart;
  try {
    const all = await outcomes(b.url, started, settleMs + faultMs);
    return { all, faultTookMs };
  } finally {
    await Promise.all(started.map((call) => call.stream.close()));
  }
}

/** How many ERROR lines of each kind (their first 40 characters). */
function errorKinds(lines: readonly string[]): Record<string, number> {
  const kinds: Record<string, number> = {};
  for (const line of lines) kinds[line.slice(0, 40)] = (kinds[line.slice(0, 40)] ?? 0) + 1;
  return kinds;
}

/**
 * The fault suite's case: two instances on the store `parts` makes, 20 steady calls through
 * `fault` (see runThroughFault); every call completes with its own result and every stream hears
 * it. Prints what the fault took and the ERROR lines the process logged meanwhile, by kind (those
 * of cases running at once included).
 */
export async function expectRideThrough(
  label: string,
  parts: Parameters<typeof startInstance>[0],
  faultMs: number,
  fault: () => Promise<void>,
): Promise<void> {
  const a = await startInstance(parts);
  const b = await startInstance(parts);
  try {
    const errorsBefore = faultLog.errors.length;
    const warningsBefore = faultLog.warnings.length;
    const { all, faultTookMs } = await runThroughFault(a, b, faultMs, fault);
    if (misses(all).length > 0) {
      console.log(
        `${label}: warnings meanwhile`,
        errorKinds(faultLog.warnings.slice(warningsBefore)),
      );
    }
    expect(misses(all)).toEqual([]);
    expect(all).toHaveLength(20);
    const errors = faultLog.errors.slice(errorsBefore);
    console.log(
      `${label}: the fault took ${faultTookMs} ms; ${all.length} completed; ${errors.length} ERROR lines`,
      errorKinds(errors),
    );
  } finally {
    await a.close();
    await b.close();
  }
}
