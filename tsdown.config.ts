// `npm run build`: tsdown (Rolldown, with Oxc for TypeScript) writes dist/ from src/.
//
// Each entry of package.json "exports" becomes one ES module with its declarations, and the code
// two entries share goes to chunks under dist/chunks/, so a class is one class whichever entries
// an app imports. Bundled rather than compiled file by file (`tsc`, `nest build`): the root entry
// then loaded 13 modules instead of 80 (6 since the server chunk below), and Node's ES module
// loader pays for each one (resolving, reading, compiling, linking): on the 2-vCPU development
// VM, importing it (its peers loaded already) took 16 ms of CPU against 42 to 46 ms, and a
// bench/peers server reached its first answer after 860 ms of CPU against 890 (a bare Nest app:
// 730). bench/peers, measure 6, holds startup within 1.35 × a bare Nest app.
//
// Nest's dependency injection reads the constructor parameter types that `emitDecoratorMetadata`
// records: Oxc emits them, reading experimentalDecorators and emitDecoratorMetadata from the
// tsconfig. Every package import stays an import (dependencies and peers are never bundled).
import { defineConfig } from 'tsdown';

/**
 * Modules that read files shipped beside them (`new URL('./…', import.meta.url)`): each keeps its
 * place of src/ in dist/, as a chunk of its own, so the same relative URL finds the files there.
 */
const READS_FILES_BESIDE_IT = {
  'console/console-assets': /src[\\/]console[\\/]console-assets\.ts$/,
  'postgres/postgres-schema': /src[\\/]postgres[\\/]postgres-schema\.ts$/,
};

/**
 * The modules of src/ that `nestjs-mcp-tasks/client` imports: it serves Node clients without Nest,
 * so they keep a chunk apart from the server's below (test/architecture.spec.ts holds the client
 * to them).
 */
const CLIENT_SHARES = /src[\\/](tasks\.constants|object-shape)\.ts$/;

/**
 * The server: every module of src/ but the entry modules and the folders of the subpath entries
 * of their own (whose peers only they load). One chunk rather than one per set of entries that
 * import a module: the root, `/store` and `/front` entries share most of it. Without this group,
 * the root entry loaded 23 modules (15 before those two entries), and importing it took 56 ms of
 * CPU against 38 (medians of 15, peers loaded already); with it, 6 modules and 22 ms.
 */
const SERVER =
  /src[\\/](?!(client|redis|postgres|bullmq|pg-boss|health|rekog|testing|entries)[\\/]|index\.ts$)/;

/** The entries of package.json "exports", by their path under dist/ without the extension. */
const entry = {
  index: 'src/index.ts',
  // Entries that gather names from several folders of src/ (see src/entries/store.ts).
  'options/index': 'src/entries/options.ts',
  'store/index': 'src/entries/store.ts',
  'front/index': 'src/entries/front.ts',
  'redis/index': 'src/redis/index.ts',
  'bullmq/index': 'src/bullmq/index.ts',
  'pg-boss/index': 'src/pg-boss/index.ts',
  'client/index': 'src/client/index.ts',
  'testing/index': 'src/testing/index.ts',
  'health/index': 'src/health/index.ts',
  'rekog/index': 'src/rekog/index.ts',
  'postgres/index': 'src/postgres/index.ts',
};

const shared = {
  entry,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  tsconfig: 'tsconfig.build.json',
  // `.js` and `.d.ts` (the package is `"type": "module"`), as package.json "exports" names them.
  fixedExtension: false,
  // Once for both builds below, before either writes.
  clean: true,
  // Rolldown's note that plugins took most of the (3 s) build: true, and nothing to act on.
  checks: { pluginTimings: false },
} as const;

export default defineConfig([
  {
    ...shared,
    dts: false,
    outputOptions: {
      // Class names as written: Nest's messages and logs show them. Rolldown wraps a class or
      // function in `__name` only where bundling renamed it (two modules' top-level names met).
      keepNames: true,
      codeSplitting: {
        groups: [
          ...Object.entries(READS_FILES_BESIDE_IT).map(([name, test]) => ({ name, test })),
          // A group takes in what its module imports, unless a group of higher priority has it:
          // the errors every module imports keep a chunk of their own, not the console's file.
          { name: 'errors', test: /src[\\/]errors\.ts$/, priority: 1 },
          { name: 'client-shares', test: CLIENT_SHARES, priority: 1 },
          { name: 'server', test: SERVER },
        ],
      },
      chunkFileNames: (chunk) =>
        chunk.name in READS_FILES_BESIDE_IT ? '[name].js' : 'chunks/[name]-[hash].js',
    },
    copy: [
      { from: 'src/console/assets', to: 'dist/console' },
      { from: 'src/postgres/schema', to: 'dist/postgres' },
    ],
  },
  // The declarations, bundled per entry like the code, in a build of their own: keepNames above
  // would put its `__name` helper into them.
  {
    ...shared,
    dts: { emitDtsOnly: true },
    outputOptions: { chunkFileNames: 'chunks/[name]-[hash].js' },
  },
]);
