import { readdirSync, readFileSync } from 'node:fs';
import { join, posix, relative, resolve } from 'node:path';
import ts from 'typescript';
import * as frontEntry from '../src/entries/front.js';
import * as storeEntry from '../src/entries/store.js';
import * as publicApi from '../src/index.js';
import { EXPORTED_TOKENS } from '../src/tasks.registration.js';

/**
 * The shape of src/: no import cycle between its files, and none between its folders (a folder is
 * the directory of a file; the top-level files form the folder `src`). Every relative `import` and
 * `export ... from` counts, type-only ones included: a cycle of types is still a cycle to read.
 *
 * The top-level files are, today, both the shared kernel every folder imports (task.ts, errors.ts,
 * tasks.constants.ts, tasks.config.ts, tasks.service.ts) and the composition root that imports
 * every folder (index.ts, tasks.module-definition.ts), so the folder `src` meets every other folder
 * in a cycle by construction. The folder rule is therefore asserted between the folders under
 * src/; the file rule holds everywhere.
 */

const ROOT = resolve(process.cwd(), 'src');

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts') ? [path] : [];
  });
}

/** `src`-relative POSIX path of a file: `mcp/json-rpc.ts`, `errors.ts`. */
const id = (path: string): string => relative(ROOT, path).split('\\').join('/');

/** The folder of a file: `mcp`, `store`, or `src` for a top-level file. */
const folderOf = (file: string): string =>
  posix.dirname(file) === '.' ? 'src' : posix.dirname(file);

/** Every relative `from '…'` of an import or export statement, and every bare `import '…'`. */
const SPECIFIER =
  /(?:^|[\s;}])(?:import|export)\s+(?:type\s+)?(?:[\w*{}\s,$]+?\s+from\s+)?['"](\.{1,2}\/[^'"]+)['"]/gm;

/** Comments are dropped first, so an import shown in a doc comment does not count. */
function stripComments(text: string): string {
  return text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*\/\/.*$/gm, '');
}

/** The relative specifiers a module's text imports or re-exports from. */
function specifiersOf(source: string): string[] {
  return [...stripComments(source).matchAll(SPECIFIER)].map((match) => match[1]!);
}

function importsOf(file: string): string[] {
  const found = new Set<string>();
  for (const specifier of specifiersOf(readFileSync(join(ROOT, file), 'utf8'))) {
    const target = posix.normalize(posix.join(posix.dirname(file), specifier));
    found.add(target.replace(/\.js$/, '.ts'));
  }
  return [...found];
}

/** The cycles of a graph: its strongly connected components of two nodes or more, and self-loops. */
function cycles(graph: ReadonlyMap<string, ReadonlySet<string>>): string[][] {
  let index = 0;
  const order = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (node: string): void => {
    order.set(node, index);
    low.set(node, index++);
    stack.push(node);
    onStack.add(node);
    for (const next of graph.get(node) ?? []) {
      if (!order.has(next)) {
        visit(next);
        low.set(node, Math.min(low.get(node)!, low.get(next)!));
      } else if (onStack.has(next)) {
        low.set(node, Math.min(low.get(node)!, order.get(next)!));
      }
    }
    if (low.get(node) === order.get(node)) {
      const component: string[] = [];
      let member: string;
      do {
        member = stack.pop()!;
        onStack.delete(member);
        component.push(member);
      } while (member !== node);
      if (component.length > 1 || graph.get(node)?.has(node)) found.push(component.sort());
    }
  };
  for (const node of [...graph.keys()].sort()) if (!order.has(node)) visit(node);
  return found;
}

const files = sourceFiles(ROOT).map(id).sort();
const fileGraph = new Map(files.map((file) => [file, new Set(importsOf(file))]));
const folderGraph = new Map<string, Set<string>>();
for (const [file, targets] of fileGraph) {
  const from = folderOf(file);
  const edges = folderGraph.get(from) ?? new Set<string>();
  folderGraph.set(from, edges);
  for (const target of targets) if (folderOf(target) !== from) edges.add(folderOf(target));
}

/** The folder graph without the top-level folder `src` (see the header). */
const subfolderGraph = new Map(
  [...folderGraph]
    .filter(([folder]) => folder !== 'src')
    .map(([folder, edges]) => [folder, new Set([...edges].filter((to) => to !== 'src'))]),
);

describe('architecture of src/', () => {
  it('finds the source files and their relative imports', () => {
    expect(files).toContain('index.ts');
    expect(files).toContain('mcp/mcp-endpoint.ts');
    expect(fileGraph.get('mcp/mcp.controller.ts')).toContain('mcp/mcp-endpoint.ts');
    // Every import names a file that exists.
    for (const [file, targets] of fileGraph) {
      for (const target of targets)
        expect(`${file} -> ${files.includes(target) ? 'ok' : target}`).toBe(`${file} -> ok`);
    }
  });

  it('has no import cycle between the folders under src/', () => {
    expect(subfolderGraph.size).toBeGreaterThan(5);
    expect(cycles(subfolderGraph)).toEqual([]);
  });

  it('has no import cycle between files', () => {
    expect(cycles(fileGraph)).toEqual([]);
  });

  it('reads every kind of relative import and re-export, type-only ones too', () => {
    const source = [
      "import { a } from './a.js';",
      "import type { B } from '../b.js';",
      'import {',
      '  type C,',
      '  d,',
      "} from './c.js';",
      "import e, { f } from './e.js';",
      "import * as g from './g.js';",
      "import './side-effect.js';",
      "export { h } from './h.js';",
      "export type { I } from './i.js';",
      "export * from './j.js';",
      "export * as k from './k.js';",
      "import { Injectable } from '@nestjs/common';",
      "// import { no } from './commented.js';",
      "/* import { no } from './block.js'; */",
      "const text = 'not an import from ./x.js';",
    ].join('\n');
    expect(specifiersOf(source)).toEqual([
      './a.js',
      '../b.js',
      './c.js',
      './e.js',
      './g.js',
      './side-effect.js',
      './h.js',
      './i.js',
      './j.js',
      './k.js',
    ]);
  });

  it('the helpers see a cycle where there is one', () => {
    const graph = new Map([
      ['a', new Set(['b'])],
      ['b', new Set(['c'])],
      ['c', new Set(['a'])],
      ['d', new Set(['a'])],
    ]);
    expect(cycles(graph)).toEqual([['a', 'b', 'c']]);
    expect(cycles(new Map([['a', new Set(['a'])]]))).toEqual([['a']]);
    expect(
      cycles(
        new Map([
          ['a', new Set(['b'])],
          ['b', new Set<string>()],
        ]),
      ),
    ).toEqual([]);
    expect(folderOf('errors.ts')).toBe('src');
    expect(folderOf('mcp/json-rpc.ts')).toBe('mcp');
  });

  it('loads class-validator, class-transformer and @nestjs/schedule only when the app uses them', () => {
    // A value import would load them with the package. dto-libraries.ts loads the first two when a
    // tool takes a DTO class; the janitor imports @nestjs/schedule when the app has its registry.
    const LAZY = '(class-validator|class-transformer|@nestjs/schedule)';
    const VALUE_IMPORT = new RegExp(
      `(?:^|[\\s;])import\\s+(?!type\\s)[^'";]*?from\\s+['"]${LAZY}['"]`,
      'm',
    );
    const BARE_IMPORT = new RegExp(`(?:^|[\\s;])import\\s+['"]${LAZY}['"]`, 'm');
    const offenders = files.filter((file) => {
      const text = stripComments(readFileSync(join(ROOT, file), 'utf8'));
      return VALUE_IMPORT.test(text) || BARE_IMPORT.test(text);
    });
    expect(offenders).toEqual([]);
    expect(VALUE_IMPORT.test("import { validate } from 'class-validator';")).toBe(true);
    expect(VALUE_IMPORT.test("import { SchedulerRegistry } from '@nestjs/schedule';")).toBe(true);
    expect(VALUE_IMPORT.test("import type { ValidationError } from 'class-validator';")).toBe(
      false,
    );
    const read = (file: string) => readFileSync(join(ROOT, file), 'utf8');
    expect(read('tools/dto-libraries.ts')).toContain("import('class-validator')");
    expect(read('janitor/tasks.janitor.ts')).toContain("import('@nestjs/schedule')");
  });

  it('imports bullmq, @nestjs/bullmq, pg-boss, ioredis, pg, @nestjs/terminus and @rekog/mcp-nest only under their own entries', () => {
    // The main entry (and every folder it loads) must not load an optional peer it does not need:
    // the queue's peers live under bullmq/ (and pg-boss under pg-boss/), ioredis under redis/, pg
    // under postgres/,
    // @nestjs/terminus under health/ and @rekog/mcp-nest under rekog/ (reached through their
    // subpaths).
    const PEERS: Record<string, RegExp> = {
      bullmq: /from\s+['"](bullmq|@nestjs\/bullmq)['"]/,
      'pg-boss': /from\s+['"]pg-boss['"]/,
      redis: /from\s+['"]ioredis['"]/,
      postgres: /from\s+['"]pg['"]/,
      health: /from\s+['"]@nestjs\/terminus['"]/,
      rekog: /from\s+['"]@rekog\/mcp-nest['"]/,
    };
    const VALUE = (pattern: RegExp) =>
      new RegExp(`(?:^|[\\s;])import\\s+(?!type\\s)[^'";]*?${pattern.source}`, 'm');
    const offenders: string[] = [];
    for (const file of files) {
      const text = stripComments(readFileSync(join(ROOT, file), 'utf8'));
      for (const [folder, pattern] of Object.entries(PEERS)) {
        if (folderOf(file) !== folder && VALUE(pattern).test(text)) offenders.push(file);
      }
    }
    expect(offenders).toEqual([]);
    expect(VALUE(PEERS.bullmq!).test("import { Worker } from 'bullmq';")).toBe(true);
    expect(VALUE(PEERS.bullmq!).test("import type { Job } from 'bullmq';")).toBe(false);
    expect(VALUE(PEERS.bullmq!).test("import { getQueueToken } from '@nestjs/bullmq';")).toBe(true);
    expect(readFileSync(join(ROOT, 'bullmq/task-queue.workers.ts'), 'utf8')).toMatch(
      VALUE(PEERS.bullmq!),
    );
    expect(readFileSync(join(ROOT, 'pg-boss/pg-boss-task-queue.ts'), 'utf8')).toMatch(
      VALUE(PEERS['pg-boss']!),
    );
    expect(VALUE(PEERS.health!).test("import { TerminusModule } from '@nestjs/terminus';")).toBe(
      true,
    );
    expect(readFileSync(join(ROOT, 'health/tasks-health.module.ts'), 'utf8')).toMatch(
      VALUE(PEERS.health!),
    );
    expect(readFileSync(join(ROOT, 'rekog/task-http.transport.ts'), 'utf8')).toMatch(
      VALUE(PEERS.rekog!),
    );
  });

  it('loads @opentelemetry/api only under telemetry/, and only with import() or import type', () => {
    // An app without the optional peer must boot: no file may import it as a value, and only
    // telemetry/ may name it at all (its types stay in that folder's private declarations).
    const NAMED = /['"]@opentelemetry\/api['"]/;
    const VALUE_IMPORT =
      /(?:^|[\s;])(?:import|export)\s+(?!type\s)[^'";()]*?from\s+['"]@opentelemetry\/api['"]/m;
    const BARE_IMPORT = /(?:^|[\s;])import\s+['"]@opentelemetry\/api['"]/m;
    const offenders: string[] = [];
    for (const file of files) {
      const text = stripComments(readFileSync(join(ROOT, file), 'utf8'));
      if (!NAMED.test(text)) continue;
      if (folderOf(file) !== 'telemetry') offenders.push(`${file}: outside telemetry/`);
      if (VALUE_IMPORT.test(text) || BARE_IMPORT.test(text))
        offenders.push(`${file}: value import`);
    }
    expect(offenders).toEqual([]);
    expect(VALUE_IMPORT.test("import { metrics } from '@opentelemetry/api';")).toBe(true);
    expect(VALUE_IMPORT.test("import * as api from '@opentelemetry/api';")).toBe(true);
    expect(VALUE_IMPORT.test("export { trace } from '@opentelemetry/api';")).toBe(true);
    expect(BARE_IMPORT.test("import '@opentelemetry/api';")).toBe(true);
    expect(VALUE_IMPORT.test("import type * as Otel from '@opentelemetry/api';")).toBe(false);
    expect(VALUE_IMPORT.test("const api = await import('@opentelemetry/api');")).toBe(false);
    const telemetry = readFileSync(join(ROOT, 'telemetry/tasks.telemetry.ts'), 'utf8');
    expect(telemetry).toContain("import('@opentelemetry/api')");
  });

  it('keeps the client entry off the server: outside client/ it loads only what tsdown.config.ts keeps apart', () => {
    // `nestjs-mcp-tasks/client` serves Node clients without Nest. The build puts the rest of src/
    // in one server chunk that loads Nest; what the client imports from outside its folder must be
    // in the chunk of its own that tsdown.config.ts's CLIENT_SHARES names, or the client loads it.
    const config = readFileSync(join(ROOT, '..', 'tsdown.config.ts'), 'utf8');
    const shares = new RegExp(/const CLIENT_SHARES = \/(.+)\/;/.exec(config)![1]!);
    const VALUE =
      /(?:^|[\s;])(?:import|export)\s+(?!type\s)(?:[^'";]*?\s+from\s+)?['"](\.{1,2}\/[^'"]+)['"]/gm;
    const reached = new Set<string>();
    const visit = (file: string): void => {
      const text = stripComments(readFileSync(join(ROOT, file), 'utf8'));
      for (const [, specifier] of text.matchAll(VALUE)) {
        const target = posix
          .normalize(posix.join(posix.dirname(file), specifier!))
          .replace(/\.js$/, '.ts');
        if (reached.has(target)) continue;
        reached.add(target);
        visit(target);
      }
    };
    visit('client/index.ts');
    const outside = [...reached].filter((file) => folderOf(file) !== 'client').sort();
    expect(outside.filter((file) => !shares.test(`src/${file}`))).toEqual([]);
    expect(outside).toEqual(['object-shape.ts', 'tasks.constants.ts']);
    expect(shares.test('src/tasks.service.ts')).toBe(false);
  });

  it('exports from the module only what the public entries name', () => {
    const named = new Set<unknown>(
      [publicApi, storeEntry, frontEntry].flatMap((entry) => Object.values(entry)),
    );
    for (const token of EXPORTED_TOKENS) {
      expect([String((token as { name?: string }).name ?? token), named.has(token)]).toEqual([
        String((token as { name?: string }).name ?? token),
        true,
      ]);
    }
    expect(EXPORTED_TOKENS.length).toBeGreaterThan(0);
  });
});

/**
 * The names a user imports from this package next to the SDK's. A name both export must be the
 * SDK's own declaration passed through (CallToolResult, InputRequest…), never a type of ours that
 * shadows it: an app importing both would otherwise meet two different `Task`s.
 */
describe('public names beside the SDK', () => {
  const ENTRIES = [
    'index.ts',
    'entries/options.ts',
    'entries/store.ts',
    'entries/front.ts',
    'redis/index.ts',
    'postgres/index.ts',
    'bullmq/index.ts',
    'pg-boss/index.ts',
    'health/index.ts',
    'client/index.ts',
    'testing/index.ts',
  ];
  const SDK = ['@modelcontextprotocol/server', '@modelcontextprotocol/client'];

  function exportsOf(
    program: ts.Program,
    file: ts.SourceFile,
  ): Map<string, { fromSdk: boolean; where: string }> {
    const checker = program.getTypeChecker();
    const symbol = checker.getSymbolAtLocation(file);
    const out = new Map<string, { fromSdk: boolean; where: string }>();
    for (const exported of symbol ? checker.getExportsOfModule(symbol) : []) {
      const target =
        exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported;
      const where = target.declarations?.[0]?.getSourceFile().fileName ?? '';
      out.set(exported.name, { fromSdk: where.includes('/@modelcontextprotocol/'), where });
    }
    return out;
  }

  const probe = join(ROOT, '..', 'test', '.sdk-names.probe.ts');
  let built: ts.Program | undefined;
  /** One program over the entries and the SDK's (through a probe module), for the tests below. */
  function program(): ts.Program {
    if (built) return built;
    const host = ts.createCompilerHost({});
    const options: ts.CompilerOptions = {
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      target: ts.ScriptTarget.ES2022,
      experimentalDecorators: true,
      skipLibCheck: true,
      noEmit: true,
      types: [],
    };
    const probeText = SDK.map((name, i) => `export * as sdk${i} from '${name}';`).join('\n');
    const readFile = host.readFile.bind(host);
    host.readFile = (name) => (resolve(name) === probe ? probeText : readFile(name));
    const fileExists = host.fileExists.bind(host);
    host.fileExists = (name) => resolve(name) === probe || fileExists(name);
    const roots = [...ENTRIES.map((entry) => join(ROOT, entry)), probe];
    built = ts.createProgram(roots, options, host);
    return built;
  }

  /** Each entry's exported names (the checker's count: types and values alike). */
  function namesOf(entry: string): Map<string, { fromSdk: boolean; where: string }> {
    return exportsOf(program(), program().getSourceFile(join(ROOT, entry))!);
  }

  it('shares a name with the SDK only for the SDK’s own types', () => {
    const checker = program().getTypeChecker();

    const sdkNames = new Set<string>();
    const probeFile = program().getSourceFile(probe)!;
    for (const ns of checker.getExportsOfModule(checker.getSymbolAtLocation(probeFile)!)) {
      const target = checker.getAliasedSymbol(ns);
      for (const name of checker.getExportsOfModule(target)) sdkNames.add(name.name);
    }
    expect(sdkNames.has('CallToolResult')).toBe(true);
    expect(sdkNames.has('Task')).toBe(true);

    const shadows: string[] = [];
    for (const entry of ENTRIES) {
      const names = namesOf(entry);
      expect(names.size).toBeGreaterThan(0);
      for (const [name, { fromSdk, where }] of names) {
        if (sdkNames.has(name) && !fromSdk) shadows.push(`${entry}: ${name} (${id(where)})`);
      }
    }
    expect(shadows).toEqual([]);
  });

  it('keeps the root entry to 43 names, and every name in one entry (the client’s and the queue runners’ aside)', () => {
    // The root is what an app author writes every day (issue 36); the rest goes to the subpath
    // that says who it is for. 40 until issue 39 added the step API a tool's author writes with
    // `task.step` (its options, its attempt, its error). `/client` serves Node clients without Nest, which must not load the
    // root to name TASKS_EXTENSION_ID or TaskState: the same declarations, exported there too.
    // `/bullmq` and `/pg-boss` are two runners of one shape (issue 38: switching is an import and
    // a connection): an app imports one of them, so they name their module and options alike.
    const root = namesOf('index.ts');
    expect(root.size).toBeLessThanOrEqual(43);
    const holders = new Map<string, string[]>();
    for (const entry of ENTRIES) {
      for (const name of namesOf(entry).keys())
        holders.set(name, [...(holders.get(name) ?? []), entry]);
    }
    const RUNNERS = ['bullmq/index.ts', 'pg-boss/index.ts'];
    const MIRRORED = ['TasksQueueModule', 'TasksQueueModuleOptions', 'TaskWorkerOptions'];
    for (const name of MIRRORED) expect([name, holders.get(name)]).toEqual([name, RUNNERS]);
    const inTwo: string[] = [];
    for (const [name, entries] of holders) {
      if (MIRRORED.includes(name)) continue;
      const serverSide = entries.filter((entry) => entry !== 'client/index.ts');
      if (serverSide.length > 1) inTwo.push(`${name}: ${serverSide.join(', ')}`);
    }
    expect(inTwo).toEqual([]);
    // The count sees a name exported twice: the client's TASKS_EXTENSION_ID is the root's too.
    expect(holders.get('TASKS_EXTENSION_ID')).toEqual(['index.ts', 'client/index.ts']);
  });
});
