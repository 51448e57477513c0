import { describe, expect, it } from '@jest/globals';
import { SearchSource } from '@jest/core';
import type { Config } from '@jest/types';
import { normalize } from 'jest-config';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

/**
 * The test tiers of jest.config.js: every spec file runs in exactly one of them (so the three
 * together are `npm test`), and each is in the tier of what it starts, read from its source and
 * the test/ modules it imports, as Jest's own matching of the project config places it.
 */

const ROOT = resolve(import.meta.dirname, '..');
const TEST = join(ROOT, 'test');
type Tier = 'unit' | 'integration' | 'consumer';

/** The project config (plain JavaScript, so imported by its path rather than type-checked). */
const { PROJECTS, TIERS, LONG } = (await import(
  pathToFileURL(join(ROOT, 'jest.config.js')).href
)) as {
  PROJECTS: Config.InitialOptions[];
  TIERS: Record<Exclude<Tier, 'unit'>, string[]>;
  LONG: string[];
};

/** What puts a spec out of `unit` (any child process, a browser) or into `consumer`. */
const STARTS: { tier: Exclude<Tier, 'unit'>; what: string; pattern: RegExp }[] = [
  { tier: 'consumer', what: 'npm pack', pattern: /\[\s*['"]pack['"]/ },
  { tier: 'consumer', what: 'Node 22', pattern: /\bnode22\(/ },
  {
    tier: 'consumer',
    what: 'a client in another language',
    pattern: /\bspawn\(\s*(?:python\b|['"](?:sh|python3?|curl)['"])/,
  },
  {
    tier: 'integration',
    what: 'a child process',
    pattern: /(?:from\s+|import\(\s*)['"](?:node:)?child_process['"]/,
  },
  { tier: 'integration', what: 'Chromium', pattern: /(?:from\s+|import\(\s*)['"]puppeteer/ },
];

/** Every file under test/ Jest could take for a spec (the consumer apps run their own tests). */
const specFiles = readdirSync(TEST, { recursive: true, encoding: 'utf8' })
  .filter((path) => /\.(e2e-)?spec\.ts$/.test(path) && !path.startsWith('consumer/apps/'))
  .map((path) => join(TEST, path))
  .sort();

const IMPORT = /(?:from|import\(|import)\s*['"](\.{1,2}\/[^'"]+)['"]/g;

/** `file` and the test/ modules it imports, directly or not (src/ starts nothing of its own). */
function closure(file: string): string[] {
  const seen = new Set<string>();
  const pending = [file];
  while (pending.length > 0) {
    const next = pending.pop()!;
    if (seen.has(next)) continue;
    seen.add(next);
    for (const [, specifier] of readFileSync(next, 'utf8').matchAll(IMPORT)) {
      const target = resolve(dirname(next), specifier!);
      if (!target.startsWith(TEST + '/')) continue;
      const found = [target, target.replace(/\.js$/, '.ts')].find(
        (candidate) => existsSync(candidate) && !candidate.endsWith('.d.mts'),
      );
      if (found !== undefined) pending.push(found);
    }
  }
  return [...seen];
}

/** The tier a spec belongs in by what it starts, and why (empty for `unit`). */
function tierByStarts(spec: string): { tier: Tier; why: string[] } {
  const why: string[] = [];
  let tier: Tier = 'unit';
  for (const file of closure(spec)) {
    const text = readFileSync(file, 'utf8');
    for (const start of STARTS) {
      if (!start.pattern.test(text)) continue;
      why.push(`${start.what} (${relative(ROOT, file)})`);
      if (tier !== 'consumer') tier = start.tier;
    }
  }
  return { tier, why };
}

/** The tiers Jest puts `spec` in, by the normalized project configs and Jest's own matcher. */
async function tiersOf(): Promise<(spec: string) => Tier[]> {
  const projects = await Promise.all(
    PROJECTS.map(async (project, index) => {
      const { options } = await normalize(
        project,
        { $0: 'jest', _: [] } as Config.Argv,
        null,
        index,
        true,
      );
      const search = new SearchSource({ config: options } as never);
      return { tier: options.displayName!.name as Tier, search };
    }),
  );
  return (spec) =>
    projects.filter(({ search }) => search.isTestFilePath(spec)).map(({ tier }) => tier);
}

describe('test tiers (jest.config.js)', () => {
  it('finds the spec files', () => {
    // A wrong walk would pass everything below vacuously.
    expect(specFiles.length).toBeGreaterThan(100);
    expect(specFiles).toContain(join(TEST, 'tiers.spec.ts'));
  });

  it('runs every spec file in exactly one tier', async () => {
    const tiers = await tiersOf();
    const wrong = specFiles
      .map((spec) => ({ spec: relative(ROOT, spec), in: tiers(spec) }))
      .filter((entry) => entry.in.length !== 1);
    expect(wrong).toEqual([]);
  });

  it('lists each spec in the tier of what it starts', async () => {
    const tiers = await tiersOf();
    const misplaced = specFiles.flatMap((spec) => {
      const [configured] = tiers(spec);
      const { tier: starts, why } = tierByStarts(spec);
      // A long spec that starts nothing runs with integration (LONG in jest.config.js).
      const tier =
        starts === 'unit' && LONG.includes(relative(ROOT, spec)) ? 'integration' : starts;
      return configured === tier
        ? []
        : [
            `${relative(ROOT, spec)} runs in ${configured} but belongs in ${tier}` +
              (why.length > 0 ? `: it starts ${why.join(', ')}` : ': it starts nothing'),
          ];
    });
    expect(misplaced).toEqual([]);
  });

  it('names no path that holds no spec', () => {
    const stale = [...TIERS.integration, ...LONG, ...TIERS.consumer].filter(
      (path) => !specFiles.some((spec) => relative(ROOT, spec).startsWith(path)),
    );
    expect(stale).toEqual([]);
  });
});
