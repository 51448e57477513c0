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
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, sep } from 'node:path';
import { fileURLToPath, URL } from 'node:url';
import { build } from 'esbuild';

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

// The console reads its page files from `assets/` beside its module (console-assets.ts), a URL
// made from import.meta.url: in the bundle, the module is part of another file, so the URL is
// pointed at dist/console/assets/ from there. Exactly one file holds it, or the build fails.
const ASSETS_URL = 'new URL("./assets/", import.meta.url)';
const bundled = filesUnder(OUT).filter((file) => file.endsWith('.js'));
const holders = bundled.filter((file) => readFileSync(file, 'utf8').includes(ASSETS_URL));
if (holders.length !== 1) {
  throw new Error(`expected one bundled file with ${ASSETS_URL}, found ${holders.length}`);
}
const [holder] = holders;
const assets = relative(dirname(holder), join(OUT, 'console', 'assets'))
  .split(sep)
  .join('/');
const source = readFileSync(holder, 'utf8');
writeFileSync(
  holder,
  source.replace(ASSETS_URL, `new URL(${JSON.stringify(`./${assets}/`)}, import.meta.url)`),
);

// tsc's .js files give way to the bundle's; the declarations stay (and the console's page files,
// should they be copied already).
const pageFiles = join(DIST, 'console', 'assets') + sep;
for (const file of filesUnder(DIST)) {
  if (file.endsWith('.js') && !file.startsWith(pageFiles)) rmSync(file);
}
for (const file of bundled) {
  const target = join(DIST, relative(OUT, file));
  mkdirSync(dirname(target), { recursive: true });
  renameSync(file, target);
}
rmSync(OUT, { recursive: true, force: true });
