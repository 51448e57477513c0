/**
 * What the rekog specs share: the one build of their apps and fixtures, and the helpers each of
 * them reads the apps' answers with.
 *
 * Nothing here imports rekog (Jest on Node 20 cannot load it, see rekog.e2e-spec.ts): `tsc -p
 * test/rekog/tsconfig.json` compiles the rekog example, its plain twin and the fixtures with the
 * sources they import into .demo-build/rekog-e2e, and the specs start them with `node`.
 */
import { execFile } from 'node:child_process';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { lock, newestSource, unlock } from '../support/build-once.js';
import { promisify } from 'node:util';
import { exchange, type RawRequest, type RawResponse } from '../support/raw.js';
import type { SseReader } from '../support/sse.js';
import { type JsonRpcMessage, legacyHeaders } from '../support/wire.js';
import { sleep } from '../support/helpers.js';

export const ROOT = resolve(process.cwd());
/** The tsconfig's outDir. */
const BUILD = join(ROOT, '.demo-build/rekog-e2e');
/** Where the compiled fixtures are (test/rekog/fixture/*.ts). */
export const FIXTURES = join(BUILD, 'test/rekog/fixture');
/**
 * The compiled rekog demo (examples/rekog/main.ts, as `npm run demo:rekog` runs it) and its plain
 * twin without tasks (examples/rekog/plain.ts, the bench's baseline).
 */
export const EXAMPLE_ENTRY = join(BUILD, 'examples/rekog/main.js');
export const PLAIN_ENTRY = join(BUILD, 'examples/rekog/plain.js');

/** tsc's incremental state: a build after a change recompiles what the change touched. */
const BUILD_INFO = join(BUILD, 'rekog-e2e.tsbuildinfo');
/** The newest source time the last build started from (see `newestSource`). */
const STAMP = join(BUILD, 'rekog-e2e.stamp');
/** Held while one spec builds, so that specs in parallel workers build once between them. */
const LOCK = join(ROOT, '.demo-build/rekog-e2e.lock');
/** What tsc reads: the tsconfig's `include` and the configs it extends. */
const SOURCE_DIRS = ['src', 'examples', 'test/rekog/fixture'];
const CONFIGS = ['tsconfig.json', 'tsconfig.examples.json', 'test/rekog/tsconfig.json'];

const run = promisify(execFile);

/**
 * Compiles the rekog apps and fixtures, once for all the specs of a Jest run: tsc runs only when a
 * source is newer than what the last build started from (the stamp), or when an entry a spec needs
 * is missing (then from scratch, as the incremental state would not write files it thinks are
 * there). A second spec in the same run finds the stamp current and only checks its entries.
 *
 * A type error elsewhere in the tree does not stop tsc from writing the files; only missing
 * entries fail here (the typecheck is another job's), and tsc's report is printed to say why.
 */
export async function buildRekogApps(entries: readonly string[]): Promise<void> {
  lock(LOCK);
  try {
    const missing = entries.some((entry) => !existsSync(entry));
    if (missing) rmSync(BUILD_INFO, { force: true });
    const sources = newestSource(ROOT, SOURCE_DIRS, CONFIGS);
    const built = existsSync(STAMP) ? readFileSync(STAMP, 'utf8') : undefined;
    if (missing || built !== sources) {
      const tsc = join(ROOT, 'node_modules/typescript/bin/tsc');
      const args = ['-p', 'test/rekog/tsconfig.json', '--incremental', '--tsBuildInfoFile'];
      try {
        await run(process.execPath, [tsc, ...args, BUILD_INFO], {
          cwd: ROOT,
          maxBuffer: 64 * 1024 * 1024,
        });
      } catch (error) {
        const output = (error as { stdout?: string }).stdout || String(error);
        process.stderr.write(`tsc -p test/rekog/tsconfig.json reported:\n${output}\n`);
      }
      // What the build started from: a source changed while tsc ran is newer, and builds again.
      writeFileSync(STAMP, sources);
    }
  } finally {
    unlock(LOCK);
  }
  for (const entry of entries) {
    if (!existsSync(entry)) throw new Error(`the rekog apps did not build: no ${entry}`);
  }
}

/** Polls `read` until it returns something other than `undefined` (fails after 10 s). */
export async function eventually<T>(
  read: () => T | undefined | Promise<T | undefined>,
  what: string,
): Promise<T> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const value = await read();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`Timed out waiting for ${what}`);
    await sleep(25);
  }
}

export const TERMINAL = new Set(['completed', 'failed', 'cancelled']);

/** The `notifications/tasks` of a listen stream until its task is terminal. */
export async function followTask(stream: SseReader): Promise<Record<string, unknown>[]> {
  const tasks: Record<string, unknown>[] = [];
  for (;;) {
    const message = await stream.next(15_000);
    if (message.method !== 'notifications/tasks') continue;
    tasks.push(message.params!);
    if (TERMINAL.has(String(message.params!.status))) return tasks;
  }
}

/** A raw 2025-11-25 request (no envelope, no standard headers); anonymous without `principal`. */
export function legacyRequest(
  method: string,
  params: Record<string, unknown>,
  principal?: string,
  id: number | string = 1,
): RawRequest {
  const headers = legacyHeaders(principal ?? '');
  if (principal === undefined) delete headers.authorization;
  return { headers, body: JSON.stringify({ jsonrpc: '2.0', id, method, params }) };
}

/** The JSON-RPC message of an answer, a JSON body or the first event of an SSE one. */
export function messageOf(answer: RawResponse): JsonRpcMessage | undefined {
  if (answer.json !== undefined) return answer.json;
  const data = /^data: ?(.*)$/m.exec(answer.text)?.[1];
  return data === undefined ? undefined : (JSON.parse(data) as JsonRpcMessage);
}

/**
 * POSTs `request` to the server's `/mcp` with the given `Host` header, byte for byte on its own
 * connection (`fetch` will not send a Host of the caller's choosing). An answer that does not end
 * within 5 s (a listen stream let through) is cut there and read as far as it came.
 */
export function postWithHost(
  port: number,
  host: string,
  request: RawRequest,
): Promise<RawResponse> {
  return exchange(
    port,
    {
      method: 'POST',
      target: '/mcp',
      headers: [['Host', host], ...Object.entries(request.headers)],
      body: request.body,
    },
    5_000,
  );
}
