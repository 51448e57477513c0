import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { lock, newestSource, unlock } from '../support/build-once.js';
import { freePort } from '../support/redis-server.js';

/**
 * The servers of the hostile-tenant suite, as real processes: the demo
 * (`.demo-build/examples/main.js`, as `npm start` runs it) and the suite's fixture
 * (`.demo-build/test/hostile/fixture/main.js`), both compiled by one `tsc -p
 * test/hostile/tsconfig.json` and started as `node --max-old-space-size=1024 <entry>` with `PORT`
 * (and `REDIS_URL` for the Redis store, `POSTGRES_URL` for the PostgreSQL store). Their output is drained (a full pipe would stall them)
 * and its tail kept, to say why a server died.
 */

const ROOT = resolve(process.cwd());
export const DEMO_ENTRY = join(ROOT, '.demo-build/examples/main.js');
export const FIXTURE_ENTRY = join(ROOT, '.demo-build/test/hostile/fixture/main.js');
/** The heap the out-of-memory run had: the server must live within it. */
export const SERVER_HEAP_MIB = 1024;

const TAIL_CHARS = 16_384;

/** The newest source time the last build started from (see `newestSource`). */
const STAMP = join(ROOT, '.demo-build/hostile.stamp');
/** Held while one spec builds, so that specs in parallel Jest workers build once between them. */
const LOCK = join(ROOT, '.demo-build/hostile.lock');
/** What tsc reads from the tree: the tsconfig's `include` and the configs it extends. */
const SOURCE_DIRS = ['src', 'examples', 'test/hostile/fixture'];
const CONFIGS = ['tsconfig.json', 'tsconfig.examples.json', 'test/hostile/tsconfig.json'];

/**
 * Compiles the demo and the fixture with the sources they import (tens of seconds), once for all
 * the spec files of a Jest run: tsc runs only when a source is newer than what the last build
 * started from (the stamp) or an entry is missing. Spec files in parallel workers take a lock
 * first, so the second one waits for the first one's build and then finds it current.
 *
 * A type error elsewhere does not stop tsc from writing the files; only missing entries fail the
 * build here (the typecheck is another job's).
 */
export function buildServers(): void {
  lock(LOCK);
  try {
    const sources = newestSource(ROOT, SOURCE_DIRS, CONFIGS);
    const built = existsSync(STAMP) ? readFileSync(STAMP, 'utf8') : undefined;
    const missing = [DEMO_ENTRY, FIXTURE_ENTRY].some((entry) => !existsSync(entry));
    if (missing || built !== sources) {
      try {
        execFileSync(
          process.execPath,
          // Emit only (--noCheck): the same files in half the time; npm run typecheck checks types.
          [
            join(ROOT, 'node_modules/typescript/bin/tsc'),
            '-p',
            'test/hostile/tsconfig.json',
            '--noCheck',
          ],
          { cwd: ROOT, stdio: 'pipe' },
        );
      } catch (error) {
        const output = (error as { stdout?: Buffer }).stdout?.toString() ?? String(error);
        process.stderr.write(`tsc -p test/hostile/tsconfig.json reported:\n${output}\n`);
      }
      // What the build started from: a source changed while tsc ran is newer, and builds again.
      writeFileSync(STAMP, sources);
    }
  } finally {
    unlock(LOCK);
  }
  for (const entry of [DEMO_ENTRY, FIXTURE_ENTRY]) {
    if (!existsSync(entry))
      throw new Error(`the hostile suite's servers did not build: no ${entry}`);
  }
}

export interface ServerProcess {
  readonly port: number;
  /** The MCP endpoint, `http://127.0.0.1:<port>/mcp`. */
  readonly url: string;
  readonly child: ChildProcess;
  /** Whether the process still runs. */
  alive(): boolean;
  /** The last of what it printed (stdout and stderr, interleaved as they came). */
  output(): string;
  /** SIGTERM (the app's shutdown hooks run), SIGKILL after 15 s; resolves at its exit. */
  stop(): Promise<void>;
}

/** Starts `entry` on a free port and resolves once it prints its endpoint; `env` adds variables. */
export async function startServer(
  entry: string,
  {
    redisUrl,
    postgresUrl,
    env: extra,
  }: { redisUrl?: string; postgresUrl?: string; env?: NodeJS.ProcessEnv } = {},
): Promise<ServerProcess> {
  const port = await freePort();
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    ...extra,
    PORT: String(port),
    HOST: '127.0.0.1',
  };
  delete env.REDIS_URL;
  delete env.POSTGRES_URL;
  if (redisUrl !== undefined) env.REDIS_URL = redisUrl;
  if (postgresUrl !== undefined) env.POSTGRES_URL = postgresUrl;
  const child = spawn(process.execPath, [`--max-old-space-size=${SERVER_HEAP_MIB}`, entry], {
    cwd: ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let tail = '';
  const keep = (chunk: Buffer): void => {
    tail = (tail + chunk.toString('utf8')).slice(-TAIL_CHARS);
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  const exited = new Promise<void>((done) => child.once('exit', () => done()));
  const alive = (): boolean => child.exitCode === null && child.signalCode === null;

  await new Promise<void>((ready, fail) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      fail(new Error(`${entry} did not start in 60 s:\n${tail}`));
    }, 60_000);
    const onData = (): void => {
      if (!tail.includes('MCP endpoint: ')) return;
      clearTimeout(timer);
      child.stdout!.off('data', onData);
      ready();
    };
    child.stdout!.on('data', onData);
    void exited.then(() => {
      clearTimeout(timer);
      fail(new Error(`${entry} exited at start:\n${tail}`));
    });
  });

  return {
    port,
    url: `http://127.0.0.1:${port}/mcp`,
    child,
    alive,
    output: () => tail,
    stop: async () => {
      if (!alive()) return;
      const killer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      child.kill('SIGTERM');
      await exited;
      clearTimeout(killer);
    },
  };
}
