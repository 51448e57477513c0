/**
 * The consumer check: the package as a user gets it. `npm pack` makes the tarball (its `prepare`
 * builds dist/), and five throwaway apps install it with the peers the README's install section
 * names. Three of them (plus their HTTP platform and a compiler) are compiled and booted:
 *
 * - `cjs-express`: a CommonJS app on Express, compiled by `tsc` to CommonJS; the endpoint's guard
 *   has a constructor dependency; TaskErrorFilter through `app.useGlobalFilters`.
 * - `esm-fastify`: an ESM app on Fastify; auth as APP_GUARD, TaskErrorFilter as APP_FILTER,
 *   `forRootAsync`, a feature module that imports bare TasksModule.
 * - `rekog`: a CommonJS `@rekog/mcp-nest` 2.x app on Express (the version this project pins, with
 *   the peers rekog asks for): a plain rekog `@Tool` and the `@TaskTool`s on rekog's one route, a
 *   controller extending `McpHttpControllerFor` over `nestjs-mcp-tasks/rekog`'s TaskHttpTransport
 *   behind the app's guard, `TasksModule.forRoot({ path: false })` and `attachTasks`.
 *
 * In the first two, a feature module injects TasksService. In all three a client written as a
 * user writes it (`client.mts`, on `nestjs-mcp-tasks/client`) drives a task tool that asks for
 * input and one that is cancelled; the rekog app's also calls rekog's `echo` on the same URL and
 * checks that another user's task is not found. The ESM app also runs the store contract under node:test from
 * `nestjs-mcp-tasks/testing`, type-checks every TypeScript snippet of the README against the
 * installed package, and runs the README's node:test examples.
 *
 * The other two are the test setups docs/testing.md prints: `vitest` (as `nest new` 12 makes it)
 * and `jest-esm` (Jest on ES modules through ts-jest). Each of their files is a code block of that
 * page (its info string names the setup and the file, see recipeBlocks), their packages are those
 * of its install lines. Each runs `npm test` and must pass exactly the page's tests, type-checks
 * with `tsc --noEmit`, and runs the page's store spec once more on a store that breaks one rule,
 * which must fail naming it.
 *
 * The pages that show an app are built from their blocks too (PAGE_APPS: docs/rekog.md's rekog app
 * and the README's Quick start), into one project made as `nest new` 12 makes an app, inside the
 * rekog app's folder (its node_modules has what they need): every file a page's app needs is on
 * the page, and it compiles and runs as printed (rekog's app booted from its main.ts and called by
 * the page's client; the Quick start's module imported as a test would, then called by the
 * README's client). The claims of docs/testing.md and the README that name `nest new` are checked
 * against its template (`@nestjs/schematics`, pinned), and docs/install.md's install-scripts
 * warning against what npm prints when an empty app installs the tarball.
 *
 * In an installed copy, the package's own `prepare` step (`npm run prepare` inside
 * node_modules/nestjs-mcp-tasks) is skipped and leaves dist/ as shipped.
 *
 * Installs use npm's cache first (`--prefer-offline`): after `npm ci` of this project every
 * package is there but vitest and what it brings (pinned in RECIPE_PINS, fetched once). KEEP_CONSUMER_APPS=1 keeps the apps (their folder is printed).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { CONSOLE_SCRIPTS } from '../../src/console/console-assets.js';

const ROOT = resolve(import.meta.dirname, '../..');
const APPS = join(ROOT, 'test/consumer/apps');
const STEP_TIMEOUT_MS = 180_000;

interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** The environment of a child process, without what `npm test` put there for itself. */
function childEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (!/^npm_/i.test(key) && key !== 'NODE_OPTIONS' && key !== 'INIT_CWD') env[key] = value;
  }
  return { ...env, ...extra };
}

/** Runs a command to its end and resolves with how it ended, failed or not (SIGKILL on timeout). */
function attempt(
  command: string,
  args: string[],
  cwd: string,
  timeoutMs = STEP_TIMEOUT_MS,
  env: Record<string, string> = {},
): Promise<Ran> {
  return new Promise((done, fail) => {
    const child = spawn(command, args, {
      cwd,
      env: childEnv(env),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', fail);
    child.on('close', (code) => {
      clearTimeout(timer);
      done({ code, stdout, stderr });
    });
  });
}

/** Runs a command to its end; rejects (with its output) when it fails or takes too long. */
async function run(
  command: string,
  args: string[],
  cwd: string,
  timeoutMs = STEP_TIMEOUT_MS,
  env: Record<string, string> = {},
): Promise<Ran> {
  const ran = await attempt(command, args, cwd, timeoutMs, env);
  if (ran.code === 0) return ran;
  throw new Error(
    `${command} ${args.join(' ')} (in ${cwd}) exited ${ran.code}\n${ran.stdout.slice(-4000)}\n${ran.stderr.slice(-4000)}`,
  );
}

const npm = (args: string[], cwd: string): Promise<Ran> => run('npm', args, cwd);
const tsc = (project: string): Promise<Ran> =>
  run(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', project], project);

/** The version of a package installed in this project: the apps pin the same. */
function installedVersion(name: string): string {
  const manifest = JSON.parse(
    readFileSync(join(ROOT, 'node_modules', name, 'package.json'), 'utf8'),
  ) as { version: string };
  return manifest.version;
}

/**
 * The packages the README's install section tells a user to install beside the package itself:
 * every `npm install` line of its shell block whose arguments are all registry package names.
 */
export function readmePeers(readme: string): string[] {
  const section = /^## Install\n([\s\S]*?)^## /m.exec(readme)?.[1] ?? '';
  const names = new Set<string>();
  for (const block of section.matchAll(/```sh\n([\s\S]*?)```/g)) {
    for (const line of block[1]!.split('\n')) {
      const words = line.replace(/#.*/, '').trim().split(/\s+/);
      if (words[0] !== 'npm' || words[1] !== 'install') continue;
      const packages = words.slice(2).filter((word) => !word.startsWith('-'));
      if (packages.length === 0) continue;
      if (!packages.every((word) => /^(@[a-z0-9.-]+\/)?[a-z0-9.-]+$/.test(word))) continue;
      for (const name of packages) if (name !== 'nestjs-mcp-tasks') names.add(name);
    }
  }
  return [...names].sort();
}

/** The README, then the docs pages its TypeScript snippets moved to (its Install section first). */
const MANUAL = [
  'README.md',
  'docs/task-tools.md',
  'docs/endpoint.md',
  'docs/typescript-client.md',
  'docs/tasks-service.md',
  'docs/options.md',
  'docs/stores.md',
  'docs/queue.md',
  'docs/operators.md',
  'docs/testing.md',
  'docs/durable-steps.md',
];

/** The ```ts blocks of the README, each a complete module. */
export function readmeSnippets(readme: string): string[] {
  return [...readme.matchAll(/^```ts\n([\s\S]*?)^```/gm)].map((match) => match[1]!);
}

/** The page whose test setups the `vitest` and `jest-esm` apps are made of. */
const TESTING_PAGE = 'docs/testing.md';

/** A code block of a test setup: its info string is `LANG app=NAME[,NAME] [file=PATH]`. */
export interface RecipeBlock {
  lang: string;
  apps: string[];
  file?: string;
  code: string;
}

/** The code blocks of a page that belong to a test setup (the others have no `app=`). */
export function recipeBlocks(page: string): RecipeBlock[] {
  const blocks: RecipeBlock[] = [];
  for (const [, lang, info, code] of page.matchAll(/^```(\w+) ([^\n]+)\n([\s\S]*?)^```/gm)) {
    const attributes = Object.fromEntries(
      info!
        .trim()
        .split(/\s+/)
        .map((word) => word.split('=') as [string, string]),
    );
    if (attributes.app === undefined) continue;
    blocks.push({
      lang: lang!,
      apps: attributes.app.split(','),
      file: attributes.file,
      code: code!,
    });
  }
  return blocks;
}

/**
 * The packages of a setup's `npm install` lines, without their version ranges, as dependencies or
 * (after `--save-dev` or `-D`) devDependencies.
 */
export function recipePackages(blocks: RecipeBlock[]): { dev: string[]; prod: string[] } {
  const dev: string[] = [];
  const prod: string[] = [];
  for (const block of blocks.filter((b) => b.lang === 'sh')) {
    for (const line of block.code.split('\n')) {
      const words = line.replace(/#.*/, '').trim().split(/\s+/);
      if (words[0] !== 'npm' || words[1] !== 'install') continue;
      const into = words.includes('--save-dev') || words.includes('-D') ? dev : prod;
      // Not options, and not the tarball's path (the package itself, which every app installs).
      for (const word of words.slice(2).filter((w) => !w.startsWith('-') && !w.endsWith('.tgz'))) {
        const name = /^(@?[^@]+)/.exec(word)![1]!;
        if (name !== 'nestjs-mcp-tasks') into.push(name);
      }
    }
  }
  return { dev, prod };
}

/**
 * The test setups: the app a setup's blocks are written into, the packages it installs beyond its
 * install lines, and how its runner names a failed test in its output.
 */
const RECIPES = [
  { recipe: 'vitest', app: 'vitest', extra: [], failedTest: (rule: string) => `× ${rule}` },
  {
    recipe: 'jest',
    app: 'jest-esm',
    extra: [],
    failedTest: (rule: string) => `● the task store › ${rule}`,
  },
];
/** The versions of the setups' packages this project does not install (vitest 5 needs Node 22). */
const RECIPE_PINS: Record<string, string> = {
  vitest: '4.1.12',
  vite: '8.4.0',
};

/** The rule the failing run's store breaks, and that store (put before the page's store spec). */
const BROKEN_RULE = 'delete removes the task and says whether it was there';
const BROKEN_STORE = [
  "import { InMemoryTaskStore as KeptStore } from 'nestjs-mcp-tasks/store';",
  '',
  '/** Deletes as it should, but says it did even when there was nothing to delete. */',
  'class ForgetfulStore extends KeptStore {',
  '  override async delete(taskId: string): Promise<boolean> {',
  '    await super.delete(taskId);',
  '    return true;',
  '  }',
  '}',
  '',
].join('\n');

/** The counts of a runner's summary line: `Tests  1 failed | 41 passed (42)`, `Tests: 47 passed`. */
function testCounts(output: string): { passed: number; failed: number } {
  // eslint-disable-next-line no-control-regex
  const line = /^\s*Tests:?\s+(.*)$/m.exec(output.replace(/\x1b\[[0-9;]*m/g, ''))?.[1] ?? '';
  return {
    passed: Number(/(\d+) passed/.exec(line)?.[1] ?? NaN),
    failed: Number(/(\d+) failed/.exec(line)?.[1] ?? 0),
  };
}

/**
 * Writes a test setup's app: each block of the page that names it as the file it names
 * (package.json's block is merged into the manifest), and a manifest with the tarball, the
 * README's peers and the packages of the setup's install lines. The apps of both setups live in
 * one folder and share its node_modules (one install instead of two: their packages differ only
 * by the runner); `writeRecipeFolder` writes its manifest.
 */
function writeRecipeApp(
  setup: (typeof RECIPES)[number],
  page: string,
  into: string,
  tarball: string,
  peers: string[],
): App & Manifest {
  const dir = join(into, setup.app);
  mkdirSync(dir, { recursive: true });
  const blocks = recipeBlocks(page).filter((block) => block.apps.includes(setup.recipe));
  let manifest: Record<string, unknown> = {};
  for (const block of blocks) {
    if (block.file === undefined) continue;
    if (block.file === 'package.json') {
      manifest = { ...manifest, ...(JSON.parse(block.code) as Record<string, unknown>) };
      continue;
    }
    mkdirSync(dirname(join(dir, block.file)), { recursive: true });
    writeFileSync(join(dir, block.file), block.code);
  }
  const version = (name: string): string => {
    if (existsSync(join(ROOT, 'node_modules', name, 'package.json'))) return installedVersion(name);
    const pinned = RECIPE_PINS[name];
    if (pinned === undefined) {
      throw new Error(`${TESTING_PAGE} installs ${name}: pin its version in RECIPE_PINS`);
    }
    return pinned;
  };
  const { dev, prod } = recipePackages(blocks);
  const dependencies: Record<string, string> = { 'nestjs-mcp-tasks': `file:${tarball}` };
  for (const name of [...peers, ...prod]) dependencies[name] = version(name);
  const devDependencies: Record<string, string> = {};
  for (const name of ['typescript', '@types/node', ...dev, ...setup.extra]) {
    devDependencies[name] = version(name);
  }
  const written = {
    name: `consumer-${setup.app}`,
    version: '1.0.0',
    private: true,
    ...manifest,
    dependencies,
    devDependencies,
  };
  writeFileSync(join(dir, 'package.json'), `${JSON.stringify(written, null, 2)}\n`);
  symlinkSync('../node_modules', join(dir, 'node_modules'));
  return { name: setup.app, dir, dependencies, devDependencies };
}

interface Manifest {
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
}

/** The folder of the setups' apps: a manifest with every package of theirs (one version each). */
function writeRecipeFolder(dir: string, apps: Manifest[]): App {
  const manifest = {
    name: 'consumer-test-setups',
    version: '1.0.0',
    private: true,
    dependencies: Object.assign({}, ...apps.map((app) => app.dependencies)) as object,
    devDependencies: Object.assign({}, ...apps.map((app) => app.devDependencies)) as object,
  };
  writeFileSync(join(dir, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  return { name: 'test setups', dir };
}

/**
 * `nest new` 12's app template, from the `@nestjs/schematics` package it generates apps with
 * (pinned: the pages' claims are checked against one version). Its files are EJS templates;
 * `renderTemplate` fills the few tags they use.
 */
const NEST_SCHEMATICS = '12.0.17';
const NEST_NEW_FILES = 'package/dist/lib/application/files/ts-esm';

/** Fetches the schematics package (npm's cache first) and unpacks the ESM app template. */
async function fetchNestNew(into: string): Promise<string> {
  mkdirSync(into, { recursive: true });
  const packed = await npm(
    [
      'pack',
      `@nestjs/schematics@${NEST_SCHEMATICS}`,
      '--prefer-offline',
      '--json',
      '--pack-destination',
      into,
    ],
    into,
  );
  const [info] = JSON.parse(packed.stdout) as [{ filename: string }];
  await run('tar', ['xzf', info.filename, NEST_NEW_FILES], into);
  return join(into, NEST_NEW_FILES);
}

/** A template file with its `<%= name %>` and `<% if (name) { %>…<% } %>` tags filled. */
export function renderTemplate(text: string, values: Record<string, string | boolean>): string {
  return text
    .replace(/<% if \((\w+)\) \{ %>([\s\S]*?)<% \} %>/g, (_all, name: string, body: string) =>
      values[name] === true ? body : '',
    )
    .replace(/<%= (\w+) %>/g, (_all, name: string) => String(values[name]));
}

/**
 * The pages whose blocks form an app (info string `ts app=NAME file=PATH`). Each is written into
 * a folder of one project made as `nest new` 12 makes an app (its package.json's
 * `"type": "module"`, its tsconfig.json as generated without tests), which one `tsc` compiles.
 * The project lives inside the rekog app's folder and uses its node_modules: it has the package,
 * the README's peers, Express, and rekog with its peers.
 */
const PAGE_APPS = [
  { app: 'rekog', page: 'docs/rekog.md' },
  { app: 'quickstart', page: 'README.md' },
];

/** Writes the pages' apps into `into/<app>`, and `nest new`'s manifest and tsconfig into `into`. */
function writePageApps(into: string, nestNew: string): App {
  mkdirSync(into, { recursive: true });
  for (const { app, page } of PAGE_APPS) {
    const blocks = recipeBlocks(readFileSync(join(ROOT, page), 'utf8'));
    for (const block of blocks.filter((b) => b.apps.includes(app))) {
      if (block.file === undefined) continue;
      mkdirSync(dirname(join(into, app, block.file)), { recursive: true });
      writeFileSync(join(into, app, block.file), block.code);
    }
  }
  writeFileSync(
    join(into, 'package.json'),
    JSON.stringify({ name: 'pages', private: true, type: 'module' }),
  );
  const tsconfig = renderTemplate(readFileSync(join(nestNew, 'tsconfig.json'), 'utf8'), {
    strict: true,
    spec: false,
  });
  writeFileSync(join(into, 'tsconfig.json'), tsconfig);
  return { name: 'pages', dir: into };
}

/** A port no one listens on now (the OS's pick, released at once). */
function freePort(): Promise<number> {
  return new Promise((done, fail) => {
    const server = createServer();
    server.once('error', fail);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => done(port));
    });
  });
}

/**
 * Starts a page app's compiled `main` as the page runs it, with PORT set (`nest new`'s main.ts
 * reads it), and resolves once its endpoint answers.
 */
async function serve(app: App, main: string): Promise<void> {
  app.port = await freePort();
  app.base = `http://127.0.0.1:${app.port}`;
  const child = spawn(process.execPath, [main], {
    cwd: app.dir,
    env: childEnv({ PORT: String(app.port) }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  app.process = child;
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (child.exitCode !== null)
      throw new Error(`${app.name} exited ${child.exitCode}:\n${output}`);
    if (Date.now() > deadline) throw new Error(`${app.name} did not start:\n${output}`);
    const answered = await fetch(`${app.base}/mcp`, { method: 'POST' }).then(
      () => true,
      () => false,
    );
    if (answered) return;
    await new Promise((done) => setTimeout(done, 100));
  }
}

/** The `console.log(…); // <what it prints>` comments of a block: what its run must print. */
export function promisedLines(code: string): string[] {
  return [...code.matchAll(/^console\.log\(.*\); \/\/ (.+)$/gm)].map((match) => match[1]!);
}

interface App {
  name: string;
  dir: string;
  process?: ChildProcess;
  port?: number;
  base?: string;
}

/**
 * Writes an app: its package.json, the sources the apps share, and its own files (which replace a
 * shared one of the same name). `extra`: packages it installs beyond the README's peers.
 */
function writeApp(
  name: string,
  into: string,
  tarball: string,
  peers: string[],
  platform: string,
  type: 'commonjs' | 'module',
  extra: string[] = [],
): App {
  const dir = join(into, name);
  mkdirSync(dir, { recursive: true });
  cpSync(join(APPS, 'shared'), join(dir, 'src'), { recursive: true });
  cpSync(join(APPS, name), dir, { recursive: true });
  const dependencies: Record<string, string> = { 'nestjs-mcp-tasks': `file:${tarball}` };
  for (const peer of [...peers, platform, ...extra]) {
    // The CommonJS app goes without OpenTelemetry, as an app that never installed it: the module
    // must boot and run there, recording nothing.
    if (type === 'commonjs' && peer.startsWith('@opentelemetry/')) continue;
    dependencies[peer] = installedVersion(peer);
  }
  const manifest = {
    name: `consumer-${name}`,
    version: '1.0.0',
    private: true,
    type,
    dependencies,
    devDependencies: {
      typescript: installedVersion('typescript'),
      '@types/node': installedVersion('@types/node'),
    },
  };
  writeFileSync(join(dir, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  return { name, dir };
}

/** Starts the compiled app on a free port and resolves once it listens. */
function boot(app: App): Promise<void> {
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, ['dist/main.js'], {
      cwd: app.dir,
      env: childEnv({ PORT: '0' }),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    app.process = child;
    let output = '';
    const timer = setTimeout(
      () => fail(new Error(`${app.name} did not start:\n${output}`)),
      30_000,
    );
    const onData = (chunk: Buffer): void => {
      output += chunk.toString();
      const port = /listening on (\d+) \((\w+)\)/.exec(output);
      if (port) {
        clearTimeout(timer);
        app.port = Number(port[1]);
        app.base = `http://127.0.0.1:${app.port}`;
        done();
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.on('exit', (code) => {
      clearTimeout(timer);
      if (app.port === undefined) fail(new Error(`${app.name} exited ${code}:\n${output}`));
    });
  });
}

/** Sends SIGTERM and resolves with how the process ended (SIGKILL after 10 s). */
async function stop(app: App): Promise<string> {
  const child = app.process;
  if (child === undefined) return 'never started';
  const ended = (): string => `code ${child.exitCode}, signal ${child.signalCode}`;
  if (child.exitCode !== null || child.signalCode !== null) return ended();
  return await new Promise((done) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    child.on('exit', () => {
      clearTimeout(timer);
      done(ended());
    });
    child.kill('SIGTERM');
  });
}

interface ClientReport {
  asked: string;
  tools: string[];
  greet: { taskId: string; content: unknown; statuses: string[] };
  cancel: { taskId: string; status: string; cancelledError: boolean };
  invalid: { isTask: boolean; isError: boolean };
}

/** What the rekog app's client saw (test/consumer/apps/rekog/src/client.mts). */
interface RekogClientReport extends ClientReport {
  echo: { isTask: boolean; content: unknown };
  foreign: Record<'read' | 'cancel', { code?: unknown; message?: unknown }>;
}

/**
 * What the rekog app installs beside the README's peers: @rekog/mcp-nest at the version this
 * project pins, and the peers it asks for (its microservice strategy, the SDK's core and Node
 * packages, zod for its tools' parameters).
 */
const REKOG_PACKAGES = [
  '@rekog/mcp-nest',
  '@nestjs/microservices',
  '@modelcontextprotocol/core',
  '@modelcontextprotocol/node',
  'zod',
];

/**
 * What the ESM app installs beside the README's peers for the pages' snippets it compiles: the
 * queue page's pg-boss runner needs pg-boss 10 (`npm install pg pg-boss@10` there; pg comes with
 * it), which the README's install lines leave out as an optional peer.
 */
const PAGE_PACKAGES = ['pg-boss'];

/** Runs the app's client against its endpoint; resolves with the report it printed last. */
async function drive<Report = ClientReport>(app: App): Promise<Report> {
  const { stdout } = await run(
    process.execPath,
    ['dist/client.mjs', `${app.base}/mcp`],
    app.dir,
    60_000,
  );
  return JSON.parse(stdout.trim().split('\n').at(-1)!) as Report;
}

const bearer = (token: string): Record<string, string> => ({ authorization: `Bearer ${token}` });

describe('consumer check: the packed package in five throwaway apps', () => {
  // The README and the docs pages its sections moved to: their snippets are checked as one text.
  const readme = MANUAL.map((path) => readFileSync(join(ROOT, path), 'utf8')).join('\n');
  const testingPage = readFileSync(join(ROOT, TESTING_PAGE), 'utf8');
  const work = mkdtempSync(join(tmpdir(), 'nestjs-mcp-tasks-consumer-'));
  const timings: Record<string, number> = {};
  const timed = async <T>(step: string, work: () => Promise<T>): Promise<T> => {
    const started = Date.now();
    try {
      return await work();
    } finally {
      timings[step] = Date.now() - started;
    }
  };
  let tarball: string;
  let files: string[];
  let cjs: App;
  let esm: App;
  let rekog: App;
  const recipeApps = new Map<string, App>();
  /** The pages' apps (PAGE_APPS), and docs/rekog.md's app running from there. */
  let pages: App;
  let rekogPage: App;
  /** How `tsc` ended on the pages' apps (a page that does not compile fails its tests alone). */
  let pagesCompiled: Ran;
  /** Whether docs/rekog.md's app started: undefined, or why not. */
  let rekogPageStarted: Promise<unknown>;
  /** `nest new` 12's app template, unpacked. */
  let nestNew: string;
  /** An empty app into which `npm install <tarball>` ran as docs/install.md says, and its output. */
  const bare = join(work, 'bare');
  let bareInstall: Ran;
  /** The contract's rules, as the installed package names them. */
  let rules: string[];

  beforeAll(async () => {
    const packed = await timed('pack (prepare builds dist/)', () =>
      npm(['pack', '--json', '--pack-destination', work], ROOT),
    );
    const [info] = JSON.parse(packed.stdout) as [{ filename: string; files: { path: string }[] }];
    tarball = join(work, info.filename);
    files = info.files.map((file) => file.path).sort();

    const peers = readmePeers(readme);
    cjs = writeApp('cjs-express', work, tarball, peers, '@nestjs/platform-express', 'commonjs');
    esm = writeApp(
      'esm-fastify',
      work,
      tarball,
      peers,
      '@nestjs/platform-fastify',
      'module',
      PAGE_PACKAGES,
    );
    rekog = writeApp(
      'rekog',
      work,
      tarball,
      peers,
      '@nestjs/platform-express',
      'commonjs',
      REKOG_PACKAGES,
    );
    const setups = join(work, 'test-setups');
    mkdirSync(setups);
    for (const setup of RECIPES) {
      recipeApps.set(setup.recipe, writeRecipeApp(setup, testingPage, setups, tarball, peers));
    }
    const recipeFolder = writeRecipeFolder(setups, [
      ...(recipeApps.values() as Iterable<App & Manifest>),
    ]);
    const apps = [cjs, esm, rekog];
    const fetchingNestNew = timed('fetch nest new', () => fetchNestNew(join(work, 'nest-new')));
    mkdirSync(bare);
    writeFileSync(join(bare, 'package.json'), JSON.stringify({ name: 'bare', private: true }));
    const install = ['install', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'];
    await timed('install (all apps)', () =>
      Promise.all([
        ...[...apps, recipeFolder].map((app) => npm(install, app.dir)),
        // At npm's default log level, as a user runs it: docs/install.md quotes its warning.
        attempt('npm', [...install.slice(0, -1), tarball], bare).then((ran) => (bareInstall = ran)),
      ]),
    );
    nestNew = await fetchingNestNew;
    pages = writePageApps(join(rekog.dir, 'pages'), nestNew);
    rekogPage = { name: 'docs/rekog.md', dir: pages.dir };
    const listed = await run(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        "const { taskStoreContractRules } = await import('nestjs-mcp-tasks/testing'); console.log(JSON.stringify(taskStoreContractRules()));",
      ],
      setups,
    );
    rules = JSON.parse(listed.stdout) as string[];

    await timed('compile (all apps)', () =>
      Promise.all([
        ...apps.map((app) => tsc(app.dir)),
        attempt(
          process.execPath,
          [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', '.'],
          pages.dir,
        ).then((ran) => (pagesCompiled = ran)),
      ]),
    );
    await timed('boot (all apps)', () =>
      Promise.all([
        ...apps.map(boot),
        (rekogPageStarted = serve(rekogPage, 'dist/rekog/src/main.js').then(
          () => undefined,
          (error: unknown) => error,
        )),
      ]),
    );
  }, 8 * 60_000);

  afterAll(async () => {
    const codes = await Promise.all([cjs, esm, rekog, rekogPage].filter(Boolean).map(stop));
    if (process.env.KEEP_CONSUMER_APPS) console.log(`consumer apps kept in ${work}`);
    else await timed('remove the apps', async () => rmSync(work, { recursive: true, force: true }));
    console.log(`consumer check: ${JSON.stringify(timings)}; ended ${codes.join('; ')}`);
  });

  it('the tarball holds the compiled JS and type declarations of every entry, the task console’s page files, the PostgreSQL schema’s SQL, and nothing else', () => {
    for (const entry of [
      'index',
      'options/index',
      'store/index',
      'front/index',
      'redis/index',
      'postgres/index',
      'client/index',
      'testing/index',
      'rekog/index',
    ]) {
      expect(files).toContain(`dist/${entry}.js`);
      expect(files).toContain(`dist/${entry}.d.ts`);
    }
    expect(files).toEqual(
      expect.arrayContaining(['LICENSE', 'README.md', 'package.json', 'scripts/prepare.mjs']),
    );
    const consoleFiles = ['console.html', 'console.css', ...CONSOLE_SCRIPTS].map(
      (name) => `dist/console/assets/${name}`,
    );
    expect(files).toEqual(expect.arrayContaining(consoleFiles));
    // The SQL PostgresTaskStore applies, and teams apply by their own migrations: every file of
    // src/postgres/schema, and at least the first versions.
    const schemaNames = readdirSync(join(ROOT, 'src/postgres/schema')).filter((name) =>
      name.endsWith('.sql'),
    );
    expect(schemaNames).toEqual(expect.arrayContaining(['001-initial.sql']));
    const schemaFiles = schemaNames.map((name) => `dist/postgres/schema/${name}`);
    expect(files).toEqual(expect.arrayContaining(schemaFiles));
    const unexpected = files.filter(
      (path) =>
        !/^dist\/.+\.(js|d\.ts)$/.test(path) &&
        !consoleFiles.includes(path) &&
        !schemaFiles.includes(path) &&
        !['LICENSE', 'README.md', 'package.json', 'scripts/prepare.mjs'].includes(path),
    );
    expect(unexpected).toEqual([]);
    expect(
      files.some((path) => /\.(spec|e2e-spec)\.|^dist\/(test|bench|examples)\//.test(path)),
    ).toBe(false);
  });

  it("in an installed copy, the package's prepare step is skipped and leaves dist/ in place", async () => {
    const installed = join(esm.dir, 'node_modules/nestjs-mcp-tasks');
    const listing = (): string[] =>
      readdirSync(join(installed, 'dist'), { recursive: true, encoding: 'utf8' }).sort();
    const before = listing();
    expect(before).toContain('index.js');
    // Before scripts/prepare.mjs, prepare ran the build: it removed dist/, then failed for want of
    // tsconfig.build.json (npm then exits non-zero and `run` rejects).
    const { stdout } = await timed('prepare in the installed copy', () =>
      npm(['run', 'prepare'], installed),
    );
    expect(stdout).toMatch(/prepare skipped .*dist\/ kept/);
    expect(listing()).toEqual(before);
  });

  it('every package the installed code imports is a dependency or a declared peer', () => {
    const installed = join(cjs.dir, 'node_modules/nestjs-mcp-tasks');
    const manifest = JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8')) as {
      dependencies?: Record<string, string>;
      peerDependencies?: Record<string, string>;
    };
    const declared = new Set([
      ...Object.keys(manifest.dependencies ?? {}),
      ...Object.keys(manifest.peerDependencies ?? {}),
    ]);
    const imported = new Set<string>();
    for (const path of files.filter((file) => file.endsWith('.js'))) {
      const code = readFileSync(join(installed, path), 'utf8');
      for (const [, spec] of code.matchAll(
        /(?:from|import\(|require\(|\)\()\s*['"]([^'"]+)['"]/g,
      )) {
        if (spec!.startsWith('.') || spec!.startsWith('node:')) continue;
        const parts = spec!.split('/');
        imported.add(spec!.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]!);
      }
    }
    expect(imported).toContain('@nestjs/common');
    expect(imported).toContain('ioredis');
    expect([...imported].filter((name) => !declared.has(name))).toEqual([]);
  });

  it('the README names the peers an app installs', () => {
    expect(readmePeers(readme)).toEqual(
      expect.arrayContaining([
        '@nestjs/common',
        '@nestjs/core',
        'class-transformer',
        'class-validator',
        'reflect-metadata',
        'rxjs',
        '@modelcontextprotocol/client',
        '@modelcontextprotocol/ext-tasks',
        '@opentelemetry/api',
      ]),
    );
  });

  it('the CommonJS app has no OpenTelemetry installed (and runs: see its calls below); the ESM app has the API', () => {
    expect(existsSync(join(cjs.dir, 'node_modules', '@opentelemetry', 'api'))).toBe(false);
    expect(existsSync(join(esm.dir, 'node_modules', '@opentelemetry', 'api'))).toBe(true);
  });

  it('the CommonJS apps are compiled to CommonJS and the ESM app to ESM', () => {
    expect(readFileSync(join(cjs.dir, 'dist/main.js'), 'utf8')).toMatch(
      /require\("nestjs-mcp-tasks"\)/,
    );
    expect(readFileSync(join(rekog.dir, 'dist/main.js'), 'utf8')).toMatch(
      /require\("nestjs-mcp-tasks\/rekog"\)/,
    );
    expect(readFileSync(join(esm.dir, 'dist/main.js'), 'utf8')).toMatch(/^import /m);
  });

  describe.each([
    ['cjs-express', () => cjs],
    ['esm-fastify', () => esm],
  ])('%s', (_name, appOf) => {
    it('a client on nestjs-mcp-tasks/client answers an input request, follows a task to its result, and cancels one', async () => {
      const app = appOf();
      const report = await drive(app);
      expect(report.tools).toEqual(['greet', 'wait_for_cancel']);
      expect(report.asked).toBe('Whom shall I greet?');
      expect(report.greet.content).toEqual([{ type: 'text', text: 'Hello, Ada!' }]);
      expect(report.greet.statuses).toContain('input_required');
      expect(report.greet.statuses.at(-1)).toBe('completed');
      expect(report.cancel).toMatchObject({ status: 'cancelled', cancelledError: true });
      // Invalid arguments are the tool error result the SDK gives, not a task.
      expect(report.invalid).toEqual({ isTask: false, isError: true });

      // The cancelled task, as the feature module's REST route sees it through TasksService.
      const own = await fetch(`${app.base}/reports/${report.cancel.taskId}`, {
        headers: bearer('alice-token'),
      });
      expect(own.status).toBe(200);
      expect(await own.json()).toMatchObject({ taskId: report.cancel.taskId, status: 'cancelled' });
    });

    it('the endpoint is behind the app guard: no token is 401, another user cannot see a task', async () => {
      const app = appOf();
      const anonymous = await fetch(`${app.base}/mcp`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'server/discover' }),
      });
      expect(anonymous.status).toBe(401);
      const started = await fetch(`${app.base}/reports`, {
        method: 'POST',
        headers: bearer('alice-token'),
      });
      const { taskId } = (await started.json()) as { taskId: string };
      const foreign = await fetch(`${app.base}/reports/${taskId}`, {
        headers: bearer('bob-token'),
      });
      expect(foreign.status).toBe(404);
    });

    it('a feature module drives tasks through TasksService; TaskErrors become HTTP answers without a stack', async () => {
      const app = appOf();
      const started = await fetch(`${app.base}/reports`, {
        method: 'POST',
        headers: bearer('alice-token'),
      });
      expect(started.status).toBe(201);
      const { taskId } = (await started.json()) as { taskId: string };
      let status: unknown;
      for (let i = 0; i < 100 && status !== 'completed'; i++) {
        const answer = await fetch(`${app.base}/reports/${taskId}`, {
          headers: bearer('alice-token'),
        });
        expect(answer.status).toBe(200);
        status = ((await answer.json()) as { status: string }).status;
        if (status !== 'completed') await new Promise((done) => setTimeout(done, 20));
      }
      expect(status).toBe('completed');

      const missing = await fetch(`${app.base}/reports/no-such-task`, {
        headers: bearer('alice-token'),
      });
      expect(missing.status).toBe(404);
      const text = await missing.text();
      expect(JSON.parse(text)).toEqual({
        statusCode: 404,
        error: 'Not Found',
        message: 'Task not found',
        code: -32602,
      });
      expect(text).not.toMatch(/\bat \S+ \(|\.js:\d+/);
    });
  });

  describe('rekog', () => {
    it("a client on nestjs-mcp-tasks/client calls rekog's echo and runs the task tools on rekog's one route; another user's task is not found", async () => {
      const report = await drive<RekogClientReport>(rekog);
      // rekog's tools/list shows its own tool and the task tools attachTasks registered into it.
      expect(report.tools).toEqual(['echo', 'greet', 'wait_for_cancel']);
      expect(report.echo).toEqual({
        isTask: false,
        content: [{ type: 'text', text: 'from rekog' }],
      });
      expect(report.asked).toBe('Whom shall I greet?');
      expect(report.greet.content).toEqual([{ type: 'text', text: 'Hello, Ada!' }]);
      expect(report.greet.statuses).toContain('input_required');
      expect(report.greet.statuses.at(-1)).toBe('completed');
      expect(report.cancel).toMatchObject({ status: 'cancelled', cancelledError: true });
      // Invalid arguments of a task tool on rekog's route: the tool error result, not a task.
      expect(report.invalid).toEqual({ isTask: false, isError: true });
      const notFound = { code: -32602, message: 'Task not found' };
      expect(report.foreign).toEqual({ read: notFound, cancel: notFound });
    });

    it("rekog's route is behind the app guard for task traffic and rekog's own alike: no token is 401", async () => {
      const calls = [
        { method: 'tasks/get', params: { taskId: 'any' } },
        { method: 'tools/call', params: { name: 'echo', arguments: { text: 'hi' } } },
      ];
      for (const call of calls) {
        const anonymous = await fetch(`${rekog.base}/mcp`, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            accept: 'application/json, text/event-stream',
            'mcp-protocol-version': '2026-07-28',
          },
          body: JSON.stringify({ jsonrpc: '2.0', id: 1, ...call }),
        });
        expect({ method: call.method, status: anonymous.status }).toEqual({
          method: call.method,
          status: 401,
        });
      }
    });
  });

  it('the ESM app serves the task console from the installed package: its page and script for alice, 403 for bob', async () => {
    const page = await fetch(`${esm.base}/mcp-tasks`, { headers: bearer('alice-token') });
    expect(page.status).toBe(200);
    expect(page.headers.get('content-security-policy')).toContain("default-src 'self'");
    expect(await page.text()).toContain('<script type="module" src="/mcp-tasks/console.js">');
    const script = await fetch(`${esm.base}/mcp-tasks/console.js`, {
      headers: bearer('alice-token'),
    });
    expect(script.status).toBe(200);
    expect(await script.text()).toContain('sessionStorage');
    const listing = await fetch(`${esm.base}/mcp-tasks/api/tasks`, {
      headers: bearer('alice-token'),
    });
    expect(listing.status).toBe(200);
    expect(await listing.json()).toHaveProperty('tasks');
    const bob = await fetch(`${esm.base}/mcp-tasks`, { headers: bearer('bob-token') });
    expect(bob.status).toBe(403);
  });

  it('every TypeScript snippet of the README compiles against the installed package', async () => {
    const snippets = readmeSnippets(readme);
    expect(snippets.length).toBeGreaterThan(10);
    const dir = join(esm.dir, 'readme');
    mkdirSync(dir, { recursive: true });
    snippets.forEach((code, i) =>
      writeFileSync(join(dir, `snippet-${String(i + 1).padStart(2, '0')}.ts`), code),
    );
    const config = {
      extends: '../tsconfig.json',
      compilerOptions: { rootDir: '.', outDir: 'dist' },
      include: ['*.ts'],
    };
    writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify(config));
    await timed('compile README snippets', () => tsc(dir));
  });

  it("the README's node:test examples pass when run", async () => {
    const dir = join(esm.dir, 'readme');
    const tests = readmeSnippets(readme).flatMap((code, i) =>
      /from 'node:test'/.test(code) ? [`dist/snippet-${String(i + 1).padStart(2, '0')}.js`] : [],
    );
    expect(tests.length).toBeGreaterThanOrEqual(2);
    // The README's example store, proven with the contract suite as the README tells store authors.
    const store = readmeSnippets(readme).findIndex((code) =>
      /export class MapTaskStore/.test(code),
    );
    expect(store).toBeGreaterThanOrEqual(0);
    writeFileSync(
      join(dir, 'map-store.contract.mjs'),
      [
        "import { describe, it } from 'node:test';",
        "import { taskStoreContract } from 'nestjs-mcp-tasks/testing';",
        `import { MapTaskStore } from './dist/snippet-${String(store + 1).padStart(2, '0')}.js';`,
        "describe('MapTaskStore (README)', () => {",
        '  for (const rule of taskStoreContract(() => new MapTaskStore())) it(rule.name, rule.run);',
        '});',
      ].join('\n'),
    );
    const { stdout } = await run(
      process.execPath,
      ['--test', ...tests, 'map-store.contract.mjs'],
      dir,
      60_000,
    );
    // 23 rules on the in-memory store, 2 tool tests, 23 rules on the README's store.
    expect(Number(/# pass (\d+)/.exec(stdout)?.[1])).toBeGreaterThanOrEqual(48);
    expect(stdout).toMatch(/# fail 0/);
  });

  it('the store contract runs under node:test from nestjs-mcp-tasks/testing', async () => {
    cpSync(
      join(ROOT, 'test/consumer/contract.node-test.mjs'),
      join(esm.dir, 'contract.node-test.mjs'),
    );
    const { stdout } = await run(
      process.execPath,
      ['--test', 'contract.node-test.mjs'],
      esm.dir,
      60_000,
    );
    expect(stdout).toMatch(/# pass [1-9]\d*/);
    expect(stdout).toMatch(/# fail 0/);
  });

  describe.each(RECIPES)('the $recipe setup of docs/testing.md', (setup) => {
    const blocks = recipeBlocks(testingPage).filter((block) => block.apps.includes(setup.recipe));
    const specs = blocks.filter((block) => block.file?.endsWith('.spec.ts'));
    const storeSpec = specs.find((block) => block.code.includes('taskStoreContract('));
    // Each `it(` of the page's specs is one test, but the store spec's one line is one per rule.
    const expected = (): number =>
      specs.reduce(
        (sum, block) =>
          sum + (block === storeSpec ? rules.length : block.code.match(/^\s*it\(/gm)!.length),
        0,
      );

    it('is whole on the page: its config, tsconfig, package.json, install line and three specs', () => {
      const files = blocks.map((block) => block.file ?? block.lang).sort();
      const config = setup.recipe === 'jest' ? 'jest.config.js' : 'vitest.config.ts';
      expect(files).toEqual(
        [
          config,
          'package.json',
          'sh',
          'src/report.tools.spec.ts',
          'src/report.tools.ts',
          'src/task-store.spec.ts',
          'tsconfig.json',
        ].sort(),
      );
      expect(storeSpec).toBeDefined();
      // The page's own counts: the rules of the contract and what `npm test` ends with.
      expect(Number(/\((\d+)\s+rules:/.exec(testingPage)?.[1])).toBe(rules.length);
      expect(testingPage).toContain(
        setup.recipe === 'jest'
          ? `Tests:       ${expected()} passed, ${expected()} total`
          : `Tests  ${expected()} passed (${expected()})`,
      );
    });

    it("npm test runs the page's specs and passes every one; the app type-checks", async () => {
      const app = recipeApps.get(setup.recipe)!;
      const [tested, typed] = await timed(`npm test + tsc (${setup.app})`, () =>
        Promise.all([
          attempt('npm', ['test'], app.dir, 120_000),
          attempt(
            process.execPath,
            [join(ROOT, 'node_modules/typescript/bin/tsc'), '--noEmit', '-p', '.'],
            app.dir,
          ),
        ]),
      );
      const output = `${tested.stdout}\n${tested.stderr}`;
      // The runner's output is shown only when it did not exit as expected.
      expect({
        code: tested.code,
        ...testCounts(output),
        output: tested.code === 0 ? '' : output.slice(-4000),
      }).toEqual({ code: 0, passed: expected(), failed: 0, output: '' });
      expect({ code: typed.code, output: typed.stdout }).toEqual({ code: 0, output: '' });
    });

    it('the store spec fails on a store that breaks one rule, naming the rule', async () => {
      expect(rules).toContain(BROKEN_RULE);
      const app = recipeApps.get(setup.recipe)!;
      const broken = storeSpec!.code.replace('new InMemoryTaskStore()', 'new ForgetfulStore()');
      expect(broken).not.toBe(storeSpec!.code);
      writeFileSync(join(app.dir, 'src/broken-store.spec.ts'), BROKEN_STORE + broken);
      const ran = await timed(`npm test, broken store (${setup.app})`, () =>
        attempt('npm', ['test', '--', 'broken-store'], app.dir, 120_000),
      );
      const output = `${ran.stdout}\n${ran.stderr}`;
      expect({
        code: ran.code,
        ...testCounts(output),
        output: ran.code === 1 ? '' : output.slice(-4000),
      }).toEqual({ code: 1, passed: rules.length - 1, failed: 1, output: '' });
      // eslint-disable-next-line no-control-regex
      expect(output.replace(/\x1b\[[0-9;]*m/g, '')).toContain(setup.failedTest(BROKEN_RULE));
    });
  });

  it('the apps of the pages compile as printed, in an app as `nest new` makes it', () => {
    expect({ code: pagesCompiled.code, output: pagesCompiled.stdout.slice(-4000) }).toEqual({
      code: 0,
      output: '',
    });
  });

  describe('docs/rekog.md, built from the page', () => {
    const page = readFileSync(join(ROOT, 'docs/rekog.md'), 'utf8');
    const blocks = recipeBlocks(page).filter((block) => block.apps.includes('rekog'));

    it('shows whole files: each relative import is a file it shows, each package one it or `nest new` installs', () => {
      const files = blocks.flatMap((block) => block.file ?? []).sort();
      expect(files).toEqual([
        'client.mts',
        'src/app.module.ts',
        'src/auth.guard.ts',
        'src/echo.tools.ts',
        'src/main.ts',
        'src/mcp.controller.ts',
        'src/report.tools.ts',
      ]);
      const generated = JSON.parse(
        renderTemplate(readFileSync(join(nestNew, 'package.json.template'), 'utf8'), {}),
      ) as { dependencies: Record<string, string> };
      const { dev, prod } = recipePackages(blocks);
      const installs = new Set([
        'nestjs-mcp-tasks',
        ...dev,
        ...prod,
        ...Object.keys(generated.dependencies),
      ]);
      const unresolved: string[] = [];
      for (const block of blocks.filter((b) => b.lang === 'ts')) {
        for (const [, spec] of block.code.matchAll(/^import [^;]*?from '([^']+)';$/gm)) {
          if (spec!.startsWith('.')) {
            const target = join(dirname(block.file!), spec!).replace(/\.(m?)js$/, '.$1ts');
            if (!files.includes(target)) unresolved.push(`${block.file}: ${spec}`);
            continue;
          }
          const parts = spec!.split('/');
          const name = spec!.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]!;
          if (!installs.has(name)) unresolved.push(`${block.file}: ${spec}`);
        }
      }
      expect(unresolved).toEqual([]);
      // The app the check built has what the page installs (and rekog at the version it names).
      const built = JSON.parse(readFileSync(join(rekog.dir, 'package.json'), 'utf8')) as Manifest;
      expect(prod.filter((name) => built.dependencies[name] === undefined)).toEqual([]);
      expect(page).toContain(`@rekog/mcp-nest@${built.dependencies['@rekog/mcp-nest']}`);
    });

    it("runs: the page's client.mts calls rekog's echo and the task tool through the page's app, printing what the page says", async () => {
      const notStarted = await rekogPageStarted;
      if (notStarted) throw notStarted;
      const client = blocks.find((block) => block.file === 'client.mts')!;
      const promised = promisedLines(client.code);
      expect(promised).toHaveLength(2);
      const { stdout } = await run(
        process.execPath,
        ['dist/rekog/client.mjs'],
        rekogPage.dir,
        60_000,
        { MCP_URL: `${rekogPage.base}/mcp` },
      );
      expect(stdout.trim().split('\n')).toEqual(expect.arrayContaining(promised));
    });

    it("the page's guard guards rekog's route: no token is 401", async () => {
      const notStarted = await rekogPageStarted;
      if (notStarted) throw notStarted;
      const anonymous = await fetch(`${rekogPage.base}/mcp`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'mcp-protocol-version': '2026-07-28',
        },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 1,
          method: 'tasks/get',
          params: { taskId: 'x' },
        }),
      });
      expect(anonymous.status).toBe(401);
    });
  });

  describe('the README Quick start, built from the page', () => {
    const page = readFileSync(join(ROOT, 'README.md'), 'utf8');
    const blocks = recipeBlocks(page).filter((block) => block.apps.includes('quickstart'));

    it("is two whole files, the module and main.ts, which is `nest new`'s", () => {
      expect(blocks.map((block) => block.file)).toEqual(['src/app.module.ts', 'src/main.ts']);
      const main = readFileSync(join(nestNew, 'src/main.ts'), 'utf8');
      expect(blocks[1]!.code).toBe(renderTemplate(main, { observe: false }));
    });

    it("a test imports AppModule (nothing listens on import), serves it, and the README's client.mts gets 5 from add_slowly", async () => {
      const client = readmeSnippets(page).find((code) => code.includes("callTool('add_slowly'"));
      const url = 'http://localhost:3000/mcp';
      expect(client).toContain(url);
      writeFileSync(join(pages.dir, 'quickstart/client.template.mjs'), client!);
      // As a test of the user's would: import the module, start it on a free port, call it.
      writeFileSync(
        join(pages.dir, 'quickstart/import-module.mjs'),
        [
          "import { readFileSync, writeFileSync } from 'node:fs';",
          "import { NestFactory } from '@nestjs/core';",
          "const { AppModule } = await import('../dist/quickstart/src/app.module.js');",
          "const listening = process.getActiveResourcesInfo().includes('TCPServerWrap');",
          "const app = await NestFactory.create(AppModule, { logger: ['error', 'warn'] });",
          "await app.listen(0, '127.0.0.1');",
          'const { port } = app.getHttpServer().address();',
          "const client = readFileSync(new URL('client.template.mjs', import.meta.url), 'utf8');",
          `const url = ${JSON.stringify(url)};`,
          'const served = client.replace(url, `http://127.0.0.1:${port}/mcp`);',
          "writeFileSync(new URL('client.mjs', import.meta.url), served);",
          "await import('./client.mjs');",
          'await app.close();',
          'console.log(JSON.stringify({ listening }));',
        ].join('\n'),
      );
      const { stdout } = await run(process.execPath, ['quickstart/import-module.mjs'], pages.dir);
      expect(JSON.parse(stdout.trim().split('\n').at(-1)!)).toEqual({ listening: false });
      // What the README's comment says `console.log(await call.result())` prints.
      expect(stdout).toContain("content: [ { type: 'text', text: '5' } ]");
      expect(stdout).toContain('structuredContent: { sum: 5 }');
    });
  });

  it("docs/install.md: a tarball install prints the page's install-scripts warning and brings the required peers; once approved, no warning", async () => {
    const page = readFileSync(join(ROOT, 'docs/install.md'), 'utf8');
    const warning = /^```text npm=tarball\n([\s\S]*?)^```/m.exec(page)?.[1];
    expect(warning).toBeDefined();
    const said = `${bareInstall.stdout}\n${bareInstall.stderr}`;
    expect({ code: bareInstall.code, output: bareInstall.code === 0 ? '' : said }).toEqual({
      code: 0,
      output: '',
    });
    for (const line of warning!.trim().split('\n')) expect(said).toContain(line);
    for (const peer of ['@nestjs/common', '@nestjs/core', 'reflect-metadata', 'rxjs']) {
      expect({ peer, installed: existsSync(join(bare, 'node_modules', peer)) }).toEqual({
        peer,
        installed: true,
      });
    }
    await npm(['install-scripts', 'approve', 'nestjs-mcp-tasks'], bare);
    const again = await timed('install again, approved', () =>
      npm(['install', '--prefer-offline', '--no-audit', '--no-fund'], bare),
    );
    expect(`${again.stdout}\n${again.stderr}`).not.toContain('install-scripts');
  });

  it("docs/testing.md's vitest setup is what `nest new` 12 writes: its config, install line, test script and tsconfig lines", () => {
    const blocks = recipeBlocks(testingPage).filter((block) => block.apps.includes('vitest'));
    const code = (file: string): string => blocks.find((block) => block.file === file)!.code;
    const template = (file: string, values: Record<string, string | boolean>): string =>
      renderTemplate(readFileSync(join(nestNew, file), 'utf8'), values);
    const values = { specFileSuffix: 'spec', spec: true, strict: true };

    expect(code('vitest.config.ts')).toBe(template('vitest.config.ts', values));

    const generated = JSON.parse(template('package.json.template', values)) as {
      type: string;
      scripts: Record<string, string>;
      devDependencies: Record<string, string>;
    };
    const manifest = JSON.parse(code('package.json')) as typeof generated;
    expect(manifest).toEqual({ type: generated.type, scripts: { test: generated.scripts.test } });
    const install = blocks.find((block) => block.lang === 'sh')!.code;
    const ranges = [...install.matchAll(/\s((?:@[\w.-]+\/)?[\w.-]+)@(\S+)/g)].map(
      ([, name, range]) => ({ name, range }),
    );
    expect(ranges.map(({ name }) => name).sort()).toEqual(['vite', 'vitest']);
    expect(ranges).toEqual(
      ranges.map(({ name }) => ({ name, range: generated.devDependencies[name!] })),
    );

    const options = (json: string): Record<string, unknown> =>
      (JSON.parse(json) as { compilerOptions: Record<string, unknown> }).compilerOptions;
    const generatedOptions = options(template('tsconfig.json', values));
    const pageOptions = Object.entries(options(code('tsconfig.json')));
    expect(pageOptions.length).toBeGreaterThan(5);
    expect(pageOptions).toEqual(pageOptions.map(([key]) => [key, generatedOptions[key]]));
  });

  it('every app shuts down cleanly on SIGTERM', async () => {
    // Nest closes the app, then ends the process with the signal it got: SIGTERM, not our SIGKILL.
    expect(await stop(cjs)).toBe('code null, signal SIGTERM');
    expect(await stop(esm)).toBe('code null, signal SIGTERM');
    expect(await stop(rekog)).toBe('code null, signal SIGTERM');
  });
});
