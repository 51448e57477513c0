/**
 * The consumer check: the package as a user gets it. `npm pack` makes the tarball (its `prepare`
 * builds dist/), and three throwaway apps install it with only the peers the README's install
 * section names (plus their HTTP platform and a compiler):
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
 * In an installed copy, the package's own `prepare` step (`npm run prepare` inside
 * node_modules/nestjs-mcp-tasks) is skipped and leaves dist/ as shipped.
 *
 * Installs use npm's cache first (`--prefer-offline`): after `npm ci` of this project every
 * package is there. KEEP_CONSUMER_APPS=1 keeps the apps (their folder is printed).
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
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

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

/** Runs a command to its end; rejects (with its output) when it fails or takes too long. */
function run(
  command: string,
  args: string[],
  cwd: string,
  timeoutMs = STEP_TIMEOUT_MS,
): Promise<Ran> {
  return new Promise((done, fail) => {
    const child = spawn(command, args, { cwd, env: childEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', fail);
    child.on('close', (code) => {
      clearTimeout(timer);
      if (code === 0) return done({ code, stdout, stderr });
      fail(
        new Error(
          `${command} ${args.join(' ')} (in ${cwd}) exited ${code}\n${stdout.slice(-4000)}\n${stderr.slice(-4000)}`,
        ),
      );
    });
  });
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
  'docs/stores.md',
  'docs/queue.md',
  'docs/operators.md',
  'docs/testing.md',
];

/** The ```ts blocks of the README, each a complete module. */
export function readmeSnippets(readme: string): string[] {
  return [...readme.matchAll(/^```ts\n([\s\S]*?)^```/gm)].map((match) => match[1]!);
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

describe('consumer check: the packed package in three throwaway apps', () => {
  // The README and the docs pages its sections moved to: their snippets are checked as one text.
  const readme = MANUAL.map((path) => readFileSync(join(ROOT, path), 'utf8')).join('\n');
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

  beforeAll(async () => {
    const packed = await timed('pack (prepare builds dist/)', () =>
      npm(['pack', '--json', '--pack-destination', work], ROOT),
    );
    const [info] = JSON.parse(packed.stdout) as [{ filename: string; files: { path: string }[] }];
    tarball = join(work, info.filename);
    files = info.files.map((file) => file.path).sort();

    const peers = readmePeers(readme);
    cjs = writeApp('cjs-express', work, tarball, peers, '@nestjs/platform-express', 'commonjs');
    esm = writeApp('esm-fastify', work, tarball, peers, '@nestjs/platform-fastify', 'module');
    rekog = writeApp(
      'rekog',
      work,
      tarball,
      peers,
      '@nestjs/platform-express',
      'commonjs',
      REKOG_PACKAGES,
    );
    const apps = [cjs, esm, rekog];
    const install = ['install', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'];
    await timed('install (all apps)', () => Promise.all(apps.map((app) => npm(install, app.dir))));

    await timed('compile (all apps)', () => Promise.all(apps.map((app) => tsc(app.dir))));
    await timed('boot (all apps)', () => Promise.all(apps.map(boot)));
  }, 8 * 60_000);

  afterAll(async () => {
    const codes = await Promise.all([cjs, esm, rekog].filter(Boolean).map(stop));
    if (process.env.KEEP_CONSUMER_APPS) console.log(`consumer apps kept in ${work}`);
    else rmSync(work, { recursive: true, force: true });
    console.log(`consumer check: ${JSON.stringify(timings)}; ended ${codes.join('; ')}`);
  });

  it('the tarball holds the compiled JS and type declarations of every entry, the task console’s page files, the PostgreSQL schema’s SQL, and nothing else', () => {
    for (const entry of [
      'index',
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
    const consoleFiles = ['console.html', 'console.js', 'console.css'].map(
      (name) => `dist/console/assets/${name}`,
    );
    expect(files).toEqual(expect.arrayContaining(consoleFiles));
    // The SQL PostgresTaskStore applies, and teams apply by their own migrations.
    const schemaFiles = ['dist/postgres/schema/001-initial.sql'];
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

  it('every app shuts down cleanly on SIGTERM', async () => {
    // Nest closes the app, then ends the process with the signal it got: SIGTERM, not our SIGKILL.
    expect(await stop(cjs)).toBe('code null, signal SIGTERM');
    expect(await stop(esm)).toBe('code null, signal SIGTERM');
    expect(await stop(rekog)).toBe('code null, signal SIGTERM');
  });
});
