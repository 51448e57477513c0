// A private redis-server on loopback, for the tests (test/support/redis-server.ts) and the benches
// (bench/common.mjs): plain JavaScript, so that both run the same steps.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { URL } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort } from './free-port.mjs';
import { markProcess } from './run-mark.mjs';

function missingServer() {
  throw new Error(
    'redis-server not on PATH: install redis-server (apt-get install -y redis-server) or set REDIS_URL',
  );
}

/** Whether a Redis answers PING on the port (a raw socket: no client library needed). */
function ping(port) {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    const done = (ok) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(500, () => done(false));
    socket.once('error', () => done(false));
    socket.once('connect', () => socket.write('PING\r\n'));
    socket.once('data', (data) => done(data.toString().startsWith('+PONG')));
  });
}

async function waitForPort(port, ms) {
  const deadline = Date.now() + ms;
  while (!(await ping(port))) {
    if (Date.now() > deadline) throw new Error(`redis-server did not answer on port ${port}`);
    await sleep(50);
  }
}

/**
 * `REDIS_URL` when set (`own: false`, every method a no-op), else a private redis-server from PATH
 * on a free loopback port, in a temporary directory (`name` in its name), no RDB snapshots. With
 * `persistence` (default true) every command goes to an append-only file synced at once, so
 * `restart()` keeps the data; `false` for the tests and benches that write a lot and never restart
 * it. Resolves once it answers PING. `onMissing()` is called when redis-server is not on PATH (by
 * default it throws); `track(halt)` gets at once a synchronous `halt()` that kills the server and
 * removes its directory, for a hard deadline.
 */
export async function startRedis({
  name = 'redis',
  persistence = true,
  onMissing = missingServer,
  track = () => undefined,
} = {}) {
  const fromEnv = process.env.REDIS_URL;
  if (fromEnv) {
    const port = Number(new URL(fromEnv).port || 6379);
    const noop = async () => undefined;
    return { url: fromEnv, port, own: false, stop: noop, restart: noop, kill: noop, start: noop };
  }
  if (spawnSync('redis-server', ['--version']).status !== 0) onMissing();
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), `nestjs-mcp-tasks-${name}-`));
  let child;
  track(() => {
    child?.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });
  const start = async () => {
    const args = ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', ''];
    args.push(
      ...(persistence
        ? ['--appendonly', 'yes', '--appendfsync', 'always']
        : ['--appendonly', 'no']),
    );
    child = spawn('redis-server', args, { stdio: 'ignore' });
    markProcess(child.pid);
    await waitForPort(port, 10_000);
  };
  const kill = async () => {
    const running = child;
    child = undefined;
    if (!running || running.exitCode !== null || running.signalCode !== null) return;
    await new Promise((resolve) => {
      running.once('exit', () => resolve());
      running.kill('SIGTERM');
    });
  };
  const stop = async () => {
    await kill();
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await start();
  } catch (error) {
    await stop();
    throw error;
  }
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    own: true,
    start,
    kill,
    restart: async () => {
      await kill();
      await start();
    },
    stop,
  };
}
