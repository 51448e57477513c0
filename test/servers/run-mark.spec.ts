import { afterEach, beforeEach, expect, it } from '@jest/globals';
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { endRun, leftovers, markProcess, RUN_MARK } from '../support/servers/run-mark.mjs';

/**
 * What a test run leaves running is killed at its end (Jest's globalTeardown), found by the mark
 * every process the tests start inherits, or, for a server that writes its process title over
 * its environment (redis-server), by the pid it was recorded under. This file swaps in a mark of
 * its own, so that it kills only what it starts.
 */
let runMark: string | undefined;
const children: ChildProcess[] = [];
beforeEach(() => {
  runMark = process.env[RUN_MARK];
  process.env[RUN_MARK] = mkdtempSync(join(tmpdir(), 'nestjs-mcp-tasks-run-mark-spec-'));
});
afterEach(() => {
  for (const child of children.splice(0)) child.kill('SIGKILL');
  process.env[RUN_MARK] = runMark;
});

/** Starts a child with this file's mark (the fixtures pass `{ ...process.env }` too). */
function start(args: string[], command = process.execPath, mark = process.env[RUN_MARK]) {
  const child = spawn(command, args, {
    env: { ...process.env, [RUN_MARK]: mark },
    stdio: 'ignore',
  });
  children.push(child);
  return child;
}

const exited = (child: ChildProcess): Promise<unknown> =>
  new Promise((resolve) =>
    child.exitCode !== null || child.signalCode !== null
      ? resolve(child.signalCode)
      : child.once('exit', (_code, signal) => resolve(signal)),
  );

const forever = ['-e', 'setInterval(() => undefined, 1000)'];
const linux = process.platform === 'linux' ? it : it.skip;

linux('kills a fixture by its mark and a redis-server by its recorded pid', async () => {
  const dir = process.env[RUN_MARK]!;
  const fixture = start(forever);
  // A unix socket, no TCP port to pick (with neither, Redis exits at once).
  const redis = start(
    ['--port', '0', '--unixsocket', join(dir, 'redis.sock'), '--save', ''],
    'redis-server',
  );
  markProcess(redis.pid);
  await new Promise((resolve) => setTimeout(resolve, 300)); // it has rewritten its title by now

  expect(leftovers().map(({ pid }) => pid)).toEqual(
    expect.arrayContaining([fixture.pid, redis.pid]),
  );
  endRun();

  expect(await exited(fixture)).toBe('SIGKILL');
  expect(await exited(redis)).toBe('SIGKILL');
  expect(existsSync(dir)).toBe(false);
});

linux('leaves a recorded process that has exited, and one of another run', async () => {
  const done = start(['-e', '']);
  markProcess(done.pid);
  await exited(done);
  const other = start(forever, process.execPath, '/another/run');

  expect(leftovers()).toEqual([]);
  endRun();
  await new Promise((resolve) => setTimeout(resolve, 100));
  expect(other.exitCode).toBeNull();
  expect(other.signalCode).toBeNull();
});
