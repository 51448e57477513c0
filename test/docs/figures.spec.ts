import { describe, expect, it } from '@jest/globals';
import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { DEFAULT_IN_MEMORY_MAX_BYTES } from '../../src/store/in-memory.task-store.js';
import { resolveTasksConfig } from '../../src/tasks.config.js';
import { docFigures } from './figures.js';

/**
 * The figures of the docs cannot go stale:
 *
 * - a table of benchmark figures (`<!-- bench:NAME -->` … `<!-- /bench:NAME -->`) is exactly what
 *   scripts/bench-docs.mjs writes from the run recorded in bench/results/NAME.json;
 * - a figure marked `<!-- figure:KEY -->` is compared, by the test named below, with the value
 *   that test itself runs with (and each key is named by some test);
 * - the defaults written out at the head of docs/limits.md are the defaults.
 */

const ROOT = resolve(import.meta.dirname, '../..');
const SCRIPT = join(ROOT, 'scripts/bench-docs.mjs');

const check = (root: string) =>
  spawnSync(process.execPath, [SCRIPT, '--check', '--root', root], {
    encoding: 'utf8',
  });

const pages = (): string[] => [
  'README.md',
  ...readdirSync(join(ROOT, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .map((name) => `docs/${name}`),
];

/** Every file under `dir` whose name ends in `.ts`. */
function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith('.ts'))
    .map((entry) => join(entry.parentPath, entry.name));
}

/** A copy of the README, docs/ and bench/results/ to spoil. */
function copy(): string {
  const dir = mkdtempSync(join(tmpdir(), 'docs-figures-'));
  cpSync(join(ROOT, 'README.md'), join(dir, 'README.md'));
  cpSync(join(ROOT, 'docs'), join(dir, 'docs'), { recursive: true });
  cpSync(join(ROOT, 'bench/results'), join(dir, 'bench/results'), { recursive: true });
  return dir;
}

describe('benchmark figures in the docs', () => {
  it('every table is what the recorded run gives', () => {
    const ran = check(ROOT);
    expect(ran.stderr).toBe('');
    expect(ran.status).toBe(0);
  });

  it('the performance and reliability pages take their measured figures from recorded runs', () => {
    for (const page of ['docs/performance.md', 'docs/reliability.md', 'bench/README.md']) {
      expect(readFileSync(join(ROOT, page), 'utf8')).toMatch(/<!-- bench:[a-z0-9-]+( |-->)/);
    }
  });

  it('bench/README.md stays one page: the method notes live in each bench file', () => {
    const lines = readFileSync(join(ROOT, 'bench/README.md'), 'utf8').split('\n').length;
    expect(lines).toBeLessThanOrEqual(300);
  });

  it('a figure edited by hand, or a bench with no recorded run, is refused', () => {
    const dir = copy();
    try {
      const page = join(dir, 'docs/performance.md');
      const text = readFileSync(page, 'utf8');
      const spoiled = text.replace(/(<!-- bench:[\s\S]*?\| )(\d)/, (_, before, digit) => {
        return `${before}${(Number(digit) + 1) % 10}`;
      });
      expect(spoiled).not.toBe(text);
      writeFileSync(page, spoiled);
      const edited = check(dir);
      expect(edited.status).toBe(1);
      expect(edited.stderr).toMatch(/^docs\/performance\.md: the bench:[a-z0-9-]+ block differs/m);

      writeFileSync(page, text);
      expect(check(dir).status).toBe(0);
      const bench = /<!-- bench:([a-z0-9-]+)/.exec(text)![1]!;
      rmSync(join(dir, 'bench/results', `${bench}.json`));
      const missing = check(dir);
      expect(missing.status).toBe(1);
      expect(missing.stderr).toContain(`no recorded results for bench:${bench}`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('figures checked by the tests that make them', () => {
  it('every marked figure is named by a test, which compares it with its own value', () => {
    const tests = sources(join(ROOT, 'test'))
      .filter((file) => !file.endsWith('figures.spec.ts'))
      .map((file) => readFileSync(file, 'utf8'))
      .join('\n');
    const marked = pages().flatMap((page) => [...docFigures(page).keys()]);
    expect(marked.length).toBeGreaterThan(0);
    const unchecked = marked.filter((key) => !tests.includes(`'${key}'`));
    expect(unchecked).toEqual([]);
  });

  it('the defaults written out in docs/limits.md are the defaults', () => {
    const text = readFileSync(join(ROOT, 'docs/limits.md'), 'utf8');
    const block = /\/\/ The defaults, written out:\n([\s\S]*?)\n {4}\}\),/.exec(text)?.[1];
    expect(block).toBeDefined();
    const written = new Map<string, number>();
    for (const m of block!.matchAll(/(\w+): ([\d_]+(?: \* [\d_]+)?)/g)) {
      const value = m[2]!
        .split(' * ')
        .map((factor) => Number(factor.replace(/_/g, '')))
        .reduce((a, b) => a * b, 1);
      written.set(m[1]!, value);
    }
    const config = resolveTasksConfig({});
    expect(Object.fromEntries(written)).toEqual({
      maxTaskBytes: config.maxTaskBytes,
      maxTasksPerOwner: config.maxTasksPerOwner,
      maxRows: config.maxRows,
      maxTtlMs: config.maxTtlMs,
      maxBodyBytes: config.maxBodyBytes,
      maxBytesInFlight: config.bodies.maxBytesInFlight,
      maxBytesInFlightPerAddress: config.bodies.maxBytesInFlightPerAddress,
      timeoutMs: config.bodies.timeoutMs,
      headersTimeoutMs: config.bodies.headersTimeoutMs,
      maxStreams: config.listen.maxStreams,
      maxStreamsPerPrincipal: config.listen.maxStreamsPerPrincipal,
      maxTaskIds: config.listen.maxTaskIds,
      max: config.resultWaits.max,
      maxPerPrincipal: config.resultWaits.maxPerPrincipal,
      maxBytes: DEFAULT_IN_MEMORY_MAX_BYTES,
    });
  });
});
