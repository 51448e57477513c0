import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A real Redis for the tests: `REDIS_URL` when set, else a private redis-server from PATH. */
export interface TestRedis {
  url: string;
  port: number;
  /** Stops a private server (a no-op with REDIS_URL). */
  stop(): Promise<void>;
  /** Stops and starts a private server on the same port and data directory (fault tests). */
  restart(): Promise<void>;
  /** Stops a private server without forgetting it; `start()` brings it back on the same port. */
  kill(): Promise<void>;
  start(): Promise<void>;
}

import { freePort } from './servers/free-port.mjs';
import { markProcess } from './servers/run-mark.mjs';

export { freePort };

/** Whether a Redis answers PING on the port. */
function ping(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    const done = (ok: boolean): void => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(500, () => done(false));
    socket.once('error', () => done(false));
    socket.once('connect', () => socket.write('PING\r\n'));
    socket.once('data', (data) => done(data.toString().startsWith('+PONG')));
  });
}

async function waitForPort(port: number, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await ping(port))) {
    if (Date.now() > deadline) throw new Error(`redis-server did not answer on port ${port}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

export interface TestRedisOptions {
  /**
   * Write every command to an append-only file, synced at once (default true), so `restart()`
   * keeps the data. `false` for tests that write a lot and never restart Redis.
   */
  persistence?: boolean;
}

export async function startTestRedis({
  persistence = true,
}: TestRedisOptions = {}): Promise<TestRedis> {
  const fromEnv = process.env.REDIS_URL;
  if (fromEnv) {
    const port = Number(new URL(fromEnv).port || 6379);
    const noop = async (): Promise<void> => undefined;
    return { url: fromEnv, port, stop: noop, restart: noop, kill: noop, start: noop };
  }
  if (spawnSync('redis-server', ['--version']).status !== 0) {
    throw new Error(
      'These tests need Redis: run `npm test` (it installs redis-server when it can, or says how), install redis-server (apt-get install -y redis-server) or set REDIS_URL',
    );
  }
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'nestjs-mcp-tasks-redis-'));
  let child: ChildProcess | undefined;
  const start = async (): Promise<void> => {
    child = spawn(
      'redis-server',
      [
        '--port',
        String(port),
        '--bind',
        '127.0.0.1',
        '--dir',
        dir,
        '--save',
        '',
        ...(persistence
          ? ['--appendonly', 'yes', '--appendfsync', 'always']
          : ['--appendonly', 'no']),
      ],
      { stdio: 'ignore' },
    );
    markProcess(child.pid);
    await waitForPort(port, 10_000);
  };
  const kill = async (): Promise<void> => {
    const running = child;
    child = undefined;
    if (!running || running.exitCode !== null) return;
    await new Promise<void>((resolve) => {
      running.once('exit', () => resolve());
      running.kill('SIGTERM');
    });
  };
  await start();
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    start,
    kill,
    restart: async () => {
      await kill();
      await start();
    },
    stop: async () => {
      await kill();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
