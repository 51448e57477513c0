// Bundles the compiled package; `npm run build` runs it after tsc has written dist/. Each entry of
// package.json "exports" becomes one ES module, and the code two entries share goes to chunks
// under dist/chunks/, so a class is one class whichever entries an app imports. The declarations
// tsc wrote stay as they are (the types of "exports" point at them); its .js files give way to the
// bundle.
//
// Why: an app that imports the package loaded some 75 small modules before, and Node's ES module
// loader pays for each one (resolving, reading, compiling, linking): about 90 ms of a Nest app's
// startup on the 2-vCPU development VM, against about 25 ms for the same code in one file
// (bench/peers, measure 6). The code itself is tsc's output, unchanged: esbuild only concatenates
// it (decorators and their metadata are tsc's), keeps the names of classes and functions, and
// leaves every package import, static or `import()`, to Node.
//
// keepNames is for classes: esbuild writes `var TasksService = class TasksService2 {…}`, and the
// name it keeps is what Nest's messages and logs show. It also wraps every named closure inside a
// function (`const done = __name(() => …, "done")`), which then runs Object.defineProperty each
// time that function runs: 2 to 3 times per task on the service's write path, 0.3 to 1.7 µs of a
// 6 µs create → get → complete cycle (bench/store (a)). Those inner wraps are taken out again
// (`unwrapInnerNames`); a closure then has the name its binding infers, which only a stack trace
// shows.
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, sep } from 'node:path';
import { fileURLToPath, URL } from 'node:url';
import { build } from 'esbuild';
import ts from 'typescript';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const DIST = join(ROOT, 'dist');
const OUT = join(ROOT, 'dist.bundle');

/** The JS files package.json "exports" names (every entry's `default`). */
function exportedFiles() {
  const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
  const files = [];
  for (const target of Object.values(manifest.exports)) {
    const file = typeof target === 'string' ? target : target.default;
    if (typeof file === 'string' && file.endsWith('.js')) files.push(join(ROOT, file));
  }
  if (files.length === 0) throw new Error('package.json "exports" names no .js entry');
  return files;
}

/** Every file under `dir`, as paths. */
function filesUnder(dir) {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => join(entry.parentPath ?? entry.path, entry.name));
}

rmSync(OUT, { recursive: true, force: true });
await build({
  entryPoints: exportedFiles(),
  outdir: OUT,
  outbase: DIST,
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  packages: 'external',
  keepNames: true,
  chunkNames: 'chunks/[name]-[hash]',
  logLevel: 'warning',
});

/**
 * `source` without the `__name(…)` esbuild's keepNames put inside functions: a call
 * `__name(fn, "x")` becomes `fn`, a statement `__name(fn, "x");` goes. Those at a module's top
 * level and in class static blocks (run once) stay.
 */
function unwrapInnerNames(file, source) {
  const tree = ts.createSourceFile(file, source, ts.ScriptTarget.Latest, true, ts.ScriptKind.JS);
  const edits = [];
  const isNameCall = (node) =>
    ts.isCallExpression(node) &&
    ts.isIdentifier(node.expression) &&
    node.expression.text === '__name' &&
    node.arguments.length === 2 &&
    ts.isStringLiteral(node.arguments[1]);
  const visit = (node, inFunction) => {
    if (inFunction && isNameCall(node)) {
      const [fn] = node.arguments;
      const statement = ts.isExpressionStatement(node.parent) ? node.parent : undefined;
      if (statement !== undefined && ts.isIdentifier(fn)) {
        edits.push([statement.getStart(tree), statement.end, '']);
        return;
      }
      if (ts.isArrowFunction(fn) || ts.isFunctionExpression(fn)) {
        // The call's `/* @__PURE__ */ __name(` before the function and `, "x")` after it go; the
        // function's own text stays, with the edits inside it.
        const call = node.getStart(tree);
        const pure = source.lastIndexOf('/* @__PURE__ */', call);
        const from = pure >= node.getFullStart() ? pure : call;
        edits.push([from, fn.getStart(tree), ''], [fn.end, node.end, '']);
        visit(fn, true);
        return;
      }
    }
    const entering =
      inFunction || (ts.isFunctionLike(node) && !ts.isClassStaticBlockDeclaration(node));
    ts.forEachChild(node, (child) => visit(child, entering));
  };
  visit(tree, false);
  // The edits never overlap; applied from the end, each one's offsets are still the source's.
  let out = source;
  for (const [start, end, text] of edits.sort((a, b) => b[0] - a[0])) {
    out = out.slice(0, start) + text + out.slice(end);
  }
  return out;
}

// The console reads its page files from `assets/` beside its module (console-assets.ts), a URL
// made from import.meta.url: in the bundle, the module is part of another file, so the URL is
// pointed at dist/console/assets/ from there. Exactly one file holds it, or the build fails.
const ASSETS_URL = 'new URL("./assets/", import.meta.url)';
// Each bundled file is read once; its text is mended here and written once, into dist/.
const texts = new Map(
  filesUnder(OUT)
    .filter((file) => file.endsWith('.js'))
    .map((file) => [file, unwrapInnerNames(file, readFileSync(file, 'utf8'))]),
);
const holders = [...texts].filter(([, text]) => text.includes(ASSETS_URL));
if (holders.length !== 1) {
  throw new Error(`expected one bundled file with ${ASSETS_URL}, found ${holders.length}`);
}
const [[holder, source]] = holders;
const assets = relative(dirname(holder), join(OUT, 'console', 'assets'))
  .split(sep)
  .join('/');
texts.set(
  holder,
  source.replace(ASSETS_URL, `new URL(${JSON.stringify(`./${assets}/`)}, import.meta.url)`),
);

// tsc's .js files give way to the bundle's; the declarations stay (and the console's page files,
// should they be copied already).
const pageFiles = join(DIST, 'console', 'assets') + sep;
for (const file of filesUnder(DIST)) {
  if (file.endsWith('.js') && !file.startsWith(pageFiles)) rmSync(file);
}
for (const [file, text] of texts) {
  const target = join(DIST, relative(OUT, file));
  mkdirSync(dirname(target), { recursive: true });
  writeFileSync(target, text);
}
rmSync(OUT, { recursive: true, force: true });
