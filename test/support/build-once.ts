import { mkdirSync, readdirSync, rmSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';

/**
 * What the specs that compile fixtures with tsc share, so that a Jest run compiles each fixture
 * once: the newest source time (kept in a stamp beside the build), and a lock that makes the spec
 * files of parallel workers build one after another.
 */

/** A lock older than this was left by a killed run. */
const STALE_LOCK_MS = 5 * 60_000;

/**
 * The newest modification time among the files tsc reads from the tree (a stat walk, a few ms):
 * every file under `dirs` and the `configs`, relative to `root`, as a string to keep in a stamp.
 * Type definitions under node_modules are not looked at: they change only with an install.
 */
export function newestSource(
  root: string,
  dirs: readonly string[],
  configs: readonly string[],
): string {
  let newest = 0;
  for (const config of configs) newest = Math.max(newest, statSync(join(root, config)).mtimeMs);
  for (const dir of dirs) {
    for (const entry of readdirSync(join(root, dir), { recursive: true, withFileTypes: true })) {
      if (entry.isFile())
        newest = Math.max(newest, statSync(join(entry.parentPath, entry.name)).mtimeMs);
    }
  }
  return String(newest);
}

/** Blocks this thread for `ms` (a Jest worker runs one spec file at a time: nothing else waits). */
function sleepSync(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/**
 * Takes the build lock `path` (an atomic mkdir), waiting while another Jest worker holds it; a
 * lock older than STALE_LOCK_MS is taken over. Give it back with `unlock`.
 */
export function lock(path: string): void {
  mkdirSync(dirname(path), { recursive: true });
  for (;;) {
    try {
      mkdirSync(path);
      return;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    let age: number;
    try {
      age = Date.now() - statSync(path).mtimeMs;
    } catch {
      continue; // Released in between: try again at once.
    }
    if (age > STALE_LOCK_MS) rmSync(path, { recursive: true, force: true });
    else sleepSync(200);
  }
}

export function unlock(path: string): void {
  rmSync(path, { recursive: true, force: true });
}
