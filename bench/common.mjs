// Helpers every benchmark shares: reading knobs from the environment, medians, time, verdicts.

import { clearTimeout, setTimeout } from 'node:timers';

/** A positive integer from the environment, or `fallback`; anything else stops the bench. */
export function positiveEnv(name, fallback) {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isSafeInteger(value) || value <= 0) {
    console.error(`${name} must be a positive integer, got ${JSON.stringify(raw)}`);
    process.exit(1);
  }
  return value;
}

export const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
};

export const nowNs = () => process.hrtime.bigint();
export const msSince = (start) => Number(nowNs() - start) / 1e6;
export const fmtInt = (n) => Math.round(n).toLocaleString('en-US');
export const verdict = (ok) => (ok ? 'PASS' : 'MISS');

/** A full, settled collection: two passes so objects freed by the first are gone too. */
export function fullGc() {
  globalThis.gc();
  globalThis.gc();
}

/** The heap in use after a full collection. */
export function heapUsed() {
  fullGc();
  return process.memoryUsage().heapUsed;
}

/**
 * The built package (`npm run build`): its public entries and the internals the benchmarks drive
 * directly, in one object. Stops the bench with a hint when dist/ is missing.
 */
export async function loadBuiltPackage() {
  try {
    const parts = await Promise.all(
      [
        '../dist/index.js',
        '../dist/redis/index.js',
        '../dist/task.js',
        '../dist/tasks.constants.js',
        '../dist/tasks.options.js',
        '../dist/notify/task-events.js',
      ].map((path) => import(path)),
    );
    return Object.assign({}, ...parts);
  } catch (error) {
    console.error(
      'Cannot import ../dist/index.js; run `npm run build` first (or `npm run bench`).',
    );
    console.error(error);
    process.exit(1);
  }
}

/** Asks a child server process to stop (IPC `{ type: 'stop' }`); SIGKILL after 10 s. */
export function stopChild(child) {
  if (child.exitCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      resolve();
    }, 10_000);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    child.send({ type: 'stop' });
  });
}
