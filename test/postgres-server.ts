import { type SpawnSyncReturns, spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { freePort } from './redis-server.js';

/** Whether the tests may stop and start the server (a private one: not with POSTGRES_URL). */
export const canStopServer = !process.env.POSTGRES_URL;

let databases = 0;

/** A fresh database on the server of `url`, so that test files never see each other's schemas. */
async function databaseOn(url: string): Promise<TestPostgres> {
  const name = `nestjs_mcp_tasks_test_${process.pid}_${Date.now()}_${++databases}`;
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const own = new URL(url);
  own.pathname = `/${name}`;
  const noop = async (): Promise<void> => undefined;
  return {
    url: own.toString(),
    port: Number(own.port || 5432),
    kill: noop,
    start: noop,
    stop: async () => {
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      try {
        await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await client.end();
      }
    },
  };
}

/**
 * A real PostgreSQL for the tests: a private server, or with `POSTGRES_URL` a database of its own
 * on that server (made for the test file, dropped by `stop`; `kill` and `start` do nothing there,
 * so the tests that stop the server skip: see `canStopServer`).
 */
export interface TestPostgres {
  url: string;
  port: number;
  /** Stops a private server and removes its data directory (a no-op with POSTGRES_URL). */
  stop(): Promise<void>;
  /**
   * Stops a private server at once, as a crash would (`pg_ctl stop -m immediate`: no checkpoint,
   * the next start replays the WAL), keeping its data directory; `start()` brings it back.
   */
  kill(): Promise<void>;
  /** Starts a private server stopped by `kill()`, on the same port and data directory. */
  start(): Promise<void>;
}

export interface TestPostgresOptions {
  /**
   * Sync the WAL to disk at every commit (default false: the tests never lose the machine, and
   * `kill()` stops the server, not the kernel, so what a commit wrote survives it either way).
   */
  fsync?: boolean;
}

/** The directory of PostgreSQL's server programs: `PG_BIN`, else Debian's newest. */
function binDir(): string {
  const fromEnv = process.env.PG_BIN;
  if (fromEnv) return fromEnv;
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root)
    ? readdirSync(root)
        .filter((version) => existsSync(join(root, version, 'bin', 'initdb')))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  if (versions.length === 0) {
    throw new Error(
      'These tests need PostgreSQL: install it (apt-get install -y postgresql), set PG_BIN to its bin directory, or set POSTGRES_URL',
    );
  }
  return join(root, versions[0]!, 'bin');
}

/**
 * Runs a server program. PostgreSQL refuses to run as root: as root, it runs as the `postgres`
 * user (Debian's package makes it), which owns the data directory.
 */
function run(program: string, args: string[]): SpawnSyncReturns<string> {
  const asRoot = process.getuid?.() === 0;
  const [command, argv] = asRoot
    ? ['runuser', ['-u', 'postgres', '--', program, ...args]]
    : [program, args];
  return spawnSync(command, argv, { encoding: 'utf8' });
}

function check(result: SpawnSyncReturns<string>, what: string): void {
  if (result.status !== 0) {
    throw new Error(`${what} failed (${result.status}): ${result.stderr || result.stdout}`);
  }
}

/** Servers this process started and has not stopped: stopped should the process exit first. */
const running = new Set<() => void>();
process.once('exit', () => {
  for (const stop of running) stop();
});

export async function startTestPostgres({
  fsync = false,
}: TestPostgresOptions = {}): Promise<TestPostgres> {
  const fromEnv = process.env.POSTGRES_URL;
  if (fromEnv) return databaseOn(fromEnv);
  const bin = binDir();
  const port = await freePort();
  // The data directory and the unix socket both live in one temp dir, owned by the server's user.
  const dir = mkdtempSync(join(tmpdir(), 'nestjs-mcp-tasks-pg-'));
  const data = join(dir, 'data');
  if (process.getuid?.() === 0) {
    const user = spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' });
    const group = spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' });
    check(user, 'id -u postgres');
    chownSync(dir, Number(user.stdout.trim()), Number(group.stdout.trim()));
  }
  check(
    run(join(bin, 'initdb'), [
      '-D',
      data,
      '-U',
      'postgres',
      '--auth=trust',
      '--encoding=UTF8',
      '--no-locale',
      '--no-sync',
    ]),
    'initdb',
  );
  const options = [
    `-p ${port}`,
    `-k ${dir}`,
    '-c listen_addresses=127.0.0.1',
    `-c fsync=${fsync ? 'on' : 'off'}`,
    // A few clients per test file, and a small box: small buffers start fast.
    '-c shared_buffers=32MB',
    '-c max_connections=100',
  ].join(' ');
  const ctl = (args: string[]): SpawnSyncReturns<string> =>
    run(join(bin, 'pg_ctl'), ['-D', data, ...args]);
  const halt = (): void => void ctl(['-m', 'immediate', '-w', 'stop']);
  const start = async (): Promise<void> => {
    check(
      ctl(['-o', options, '-l', join(dir, 'server.log'), '-w', '-t', '30', 'start']),
      'pg_ctl start',
    );
    running.add(halt);
  };
  const stopWith = (mode: 'fast' | 'immediate'): void => {
    running.delete(halt);
    const result = ctl(['-m', mode, '-w', '-t', '30', 'stop']);
    // A server already stopped is fine: pg_ctl says so with status 1 and "Is server running?".
    if (result.status !== 0 && !/Is server running\?/.test(result.stderr)) {
      check(result, `pg_ctl stop -m ${mode}`);
    }
  };
  await start();
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    port,
    start,
    kill: async () => stopWith('immediate'),
    stop: async () => {
      stopWith('fast');
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
