import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

const ROOT = resolve(import.meta.dirname, '../..');

/** `<!-- figure:key -->` right after a number on a docs page: the test that makes it checks it. */
const MARKER = /(\d[\d,.]*)(\s*[^\s<]*)?<!-- figure:([a-zA-Z0-9_.-]+) -->/g;

/** Every marked figure of a page (path relative to the repository), by key. */
export function docFigures(page: string): Map<string, number> {
  const text = readFileSync(join(ROOT, page), 'utf8');
  const found = new Map<string, number>();
  for (const m of text.matchAll(MARKER)) found.set(m[3]!, Number(m[1]!.replace(/,/g, '')));
  return found;
}

/**
 * The figure a docs page states under `key` (the number written just before
 * `<!-- figure:key -->`, thousands separated by commas). A test that produces the figure compares
 * its own value with it, so the page cannot go stale without a red test.
 */
export function docFigure(page: string, key: string): number {
  const value = docFigures(page).get(key);
  if (value === undefined) throw new Error(`${page} states no figure "${key}"`);
  return value;
}
