// `npm run docs:figures`: puts the figures the benchmarks recorded into the docs pages that quote
// them, so that a page never shows a figure no run produced.
//
// A page marks a block of figures with
//
//   <!-- bench:peers rows="^\((1|2)\)" -->
//   (generated; any text here is replaced)
//   <!-- /bench:peers -->
//
// and this script replaces what is between the two comments with a table of the summary rows that
// `BENCH_RECORD=1 npm run bench:peers` wrote to bench/results/peers.json (only the rows whose
// measure matches the optional `rows` pattern), followed by the date, the commit and the machine
// of that run. `--check` changes nothing and exits 1 when a block differs from what the recorded
// results give, or names a bench with no recorded results. `--root DIR` works on another copy.
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath, URL } from 'node:url';

const BLOCK = /<!-- bench:([a-z0-9-]+)(?: rows="([^"]*)")? -->\n([\s\S]*?)<!-- \/bench:\1 -->/g;

/** The markdown files that may hold blocks: the README, bench/README.md and every page under docs/. */
export function pages(root) {
  const docs = join(root, 'docs');
  const found = ['README.md', 'bench/README.md']
    .map((page) => join(root, page))
    .filter((page) => existsSync(page));
  if (existsSync(docs)) {
    for (const name of readdirSync(docs).sort()) {
      if (name.endsWith('.md')) found.push(join(docs, name));
    }
  }
  return found;
}

const cell = (text) => String(text).replace(/\|/g, '\\|').replace(/\n/g, ' ');

/** The text of one block, from the recorded results of `bench` (or an error naming what lacks). */
export function renderBlock(root, bench, pattern) {
  const file = join(root, 'bench/results', `${bench}.json`);
  if (!existsSync(file)) {
    return { error: `no recorded results for bench:${bench} (bench/results/${bench}.json)` };
  }
  const record = JSON.parse(readFileSync(file, 'utf8'));
  const match = pattern ? new RegExp(pattern) : null;
  const rows = record.rows.filter((row) => !match || match.test(row.measure));
  if (rows.length === 0) {
    return { error: `bench:${bench} recorded no row matching ${JSON.stringify(pattern)}` };
  }
  const lines = [
    '| measure | result | target | |',
    '| --- | --- | --- | --- |',
    ...rows.map(
      (row) =>
        `| ${cell(row.measure)} | ${cell(row.result)} | ${cell(row.target)} | ${cell(row.verdict)} |`,
    ),
    '',
    `Recorded by \`${record.command}\` on ${record.measuredAt.slice(0, 10)} at commit ` +
      `${record.commit}: ${record.machine}.`,
    '',
  ];
  return { text: lines.join('\n') };
}

/** Every block of every page: its page, bench, current text and the text it should have. */
export function blocks(root) {
  const found = [];
  for (const page of pages(root)) {
    const source = readFileSync(page, 'utf8');
    for (const m of source.matchAll(BLOCK)) {
      found.push({
        page: relative(root, page),
        bench: m[1],
        pattern: m[2],
        current: m[3],
        ...renderBlock(root, m[1], m[2]),
      });
    }
  }
  return found;
}

/** Rewrites every page's blocks from the recorded results; returns the problems it met. */
export function writeAll(root) {
  const problems = [];
  for (const page of pages(root)) {
    const source = readFileSync(page, 'utf8');
    const next = source.replace(BLOCK, (whole, bench, pattern) => {
      const { text, error } = renderBlock(root, bench, pattern);
      if (error) {
        problems.push(`${relative(root, page)}: ${error}`);
        return whole;
      }
      const open =
        pattern === undefined
          ? `<!-- bench:${bench} -->`
          : `<!-- bench:${bench} rows="${pattern}" -->`;
      return `${open}\n${text}<!-- /bench:${bench} -->`;
    });
    if (next !== source) writeFileSync(page, next);
  }
  return problems;
}

/** What differs between the pages and the recorded results (empty when all is in step). */
export function checkAll(root) {
  return blocks(root)
    .filter((block) => block.error || block.current !== block.text)
    .map((block) =>
      block.error
        ? `${block.page}: ${block.error}`
        : `${block.page}: the bench:${block.bench} block differs from bench/results/${block.bench}.json ` +
          '(run `npm run docs:figures`)',
    );
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const at = args.indexOf('--root');
  const root = at >= 0 ? args[at + 1] : fileURLToPath(new URL('..', import.meta.url));
  const check = args.includes('--check');
  const problems = check ? checkAll(root) : writeAll(root);
  for (const problem of problems) console.error(problem);
  if (!check && problems.length === 0)
    console.log(`docs figures: ${blocks(root).length} blocks in step`);
  process.exitCode = problems.length > 0 ? 1 : 0;
}
