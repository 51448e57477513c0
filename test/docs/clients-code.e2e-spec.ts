import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { build } from 'esbuild';
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';
import { DemoModule } from '../../examples/demo.module.js';

/**
 * The TypeScript snippets of docs/clients.md, as a user runs them: every ```ts block is written to
 * a `.mts` file, type-checked (strict, NodeNext, as an app's client file) and run by node against
 * the demo (DemoModule in memory, on a free port; the page's `http://127.0.0.1:3000` swapped for
 * it), and what it prints must be the ```text block that follows it on the page, exactly.
 * `nestjs-mcp-tasks/client` resolves to this repository's src/client (type-checked from it and
 * bundled from it by esbuild); every other import is the installed package, as a user has it.
 */

const ROOT = process.cwd();
/** The pages whose snippets run: the clients page, then the 2025-11-25 page's opening one. */
const DOCS = ['docs/clients.md', 'docs/legacy-2025.md'].map((page) => join(ROOT, page));
/** The origin the page's snippets name (`npm start`'s). */
const DOC_ORIGIN = 'http://127.0.0.1:3000';
const CLIENT_ENTRY = join(ROOT, 'src/client/index.ts');
/** How long one snippet may run. */
const RUN_MS = 20_000;

interface Snippet {
  /** The `## ` section it stands in, for messages. */
  section: string;
  code: string;
  /** What the page says it prints. */
  prints: string;
}

/** The page's ```ts blocks, each with the ```text block that follows it. */
export function snippetsOf(markdown: string): Snippet[] {
  const snippets: Snippet[] = [];
  let section = '';
  let pending: { section: string; code: string } | undefined;
  for (const match of markdown.matchAll(/^(## .*)$|^```(\w*)\n([\s\S]*?)^```$/gm)) {
    if (match[1] !== undefined) {
      section = match[1];
      continue;
    }
    const [, , lang, body] = match;
    if (lang === 'ts') {
      if (pending) throw new Error(`${pending.section}: a ts block without what it prints`);
      pending = { section, code: body! };
    } else if (pending) {
      if (lang !== 'text') throw new Error(`${pending.section}: a ts block without what it prints`);
      snippets.push({ ...pending, prints: body! });
      pending = undefined;
    }
  }
  if (pending) throw new Error(`${pending.section}: a ts block without what it prints`);
  return snippets;
}

/** The type errors of the given `.mts` files, one line each (none: an empty list). */
function typeErrors(files: string[]): string[] {
  const program = ts.createProgram(files, {
    target: ts.ScriptTarget.ES2022,
    lib: ['lib.es2022.d.ts'],
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    types: ['node'],
    strict: true,
    noEmit: true,
    skipLibCheck: true,
    paths: { 'nestjs-mcp-tasks/client': [CLIENT_ENTRY] },
  });
  return ts
    .getPreEmitDiagnostics(program)
    .filter(
      (diagnostic) => diagnostic.file === undefined || files.includes(diagnostic.file.fileName),
    )
    .map((diagnostic) => {
      const text = ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n');
      if (!diagnostic.file) return text;
      const { line } = diagnostic.file.getLineAndCharacterOfPosition(diagnostic.start ?? 0);
      return `${diagnostic.file.fileName}:${line + 1}: ${text}`;
    });
}

/** Bundles the snippet's own code (and `nestjs-mcp-tasks/client`) and runs it with node. */
async function run(file: string): Promise<{ code: number | null; out: string; err: string }> {
  const outfile = file.replace(/\.mts$/, '.mjs');
  await build({
    entryPoints: [file],
    outfile,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    packages: 'external',
    logLevel: 'silent',
    plugins: [
      {
        name: 'this-package',
        setup(builder) {
          builder.onResolve({ filter: /^nestjs-mcp-tasks\/client$/ }, () => ({
            path: CLIENT_ENTRY,
          }));
        },
      },
    ],
  });
  const child = spawn(process.execPath, [outfile], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString('utf8')));
  child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString('utf8')));
  const timer = setTimeout(() => child.kill('SIGKILL'), RUN_MS);
  const code = await new Promise<number | null>((done) => child.once('exit', done));
  clearTimeout(timer);
  return { code, out, err };
}

/** Starts the demo as `npm start` builds it (in memory), on a free port. */
async function startDemo(): Promise<{ origin: string; app: INestApplication }> {
  const app = await NestFactory.create(DemoModule, { forceCloseConnections: true, logger: false });
  await app.listen(0, '127.0.0.1');
  const { port } = app.getHttpServer().address() as { port: number };
  return { app, origin: `http://127.0.0.1:${port}` };
}

describe('the TypeScript snippets of docs/clients.md and docs/legacy-2025.md', () => {
  const snippets = DOCS.flatMap((doc) => snippetsOf(readFileSync(doc, 'utf8')));
  let dir: string;
  let written = 0;
  /** Writes a snippet's code to a fresh `.mts` file under the repository (its node_modules). */
  const write = (code: string, origin = DOC_ORIGIN): string => {
    const file = join(dir, `snippet-${++written}.mts`);
    writeFileSync(file, code.split(DOC_ORIGIN).join(origin));
    return file;
  };
  const apps: INestApplication[] = [];
  const demo = async (): Promise<string> => {
    const started = await startDemo();
    apps.push(started.app);
    return started.origin;
  };

  beforeAll(() => {
    mkdirSync(join(ROOT, '.scratch'), { recursive: true });
    dir = mkdtempSync(join(ROOT, '.scratch', 'clients-doc-'));
  });
  afterAll(async () => {
    for (const app of apps) await app.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('has the snippets of both TypeScript clients, each with what it prints', () => {
    expect(snippets.map((snippet) => snippet.section)).toEqual([
      '## From TypeScript',
      '## The v1 SDK (`@modelcontextprotocol/sdk` 1.x, 2025-11-25 tasks)',
      '',
    ]);
    expect(snippets[0]!.code).toContain("from 'nestjs-mcp-tasks/client'");
    expect(snippets[1]!.code).toContain("from '@modelcontextprotocol/sdk/client/index.js'");
  });

  /** The page's snippets and two wrong copies, type-checked in one program (errors by file). */
  let checked: { page: string[]; wrong: string[]; errors: string[] } | undefined;
  const typeCheck = (): NonNullable<typeof checked> => {
    if (checked) return checked;
    const page = snippets.map((snippet) => write(snippet.code));
    const wrong = [
      snippets[0]!.code.replace('mcp.callTool(', 'mcp.callTools('),
      snippets[1]!.code.replace("{ name: 'greet',", "{ nam: 'greet',"),
    ].map((code, at) => {
      expect(code).not.toBe(snippets[at]!.code);
      return write(code);
    });
    checked = { page, wrong, errors: typeErrors([...page, ...wrong]) };
    return checked;
  };
  const errorsOf = (files: string[], errors: string[]): string[] =>
    errors.filter((error) => files.some((file) => error.startsWith(`${file}:`)));

  it('type-checks them as a client file (strict, NodeNext)', () => {
    const { page, wrong, errors } = typeCheck();
    expect(errorsOf(page, errors)).toEqual([]);
    // Nothing but the two wrong copies' errors (no error outside the files, none missed).
    expect(errors).toHaveLength(errorsOf(wrong, errors).length);
  }, 60_000);

  it('and a wrong copy does not type-check', () => {
    const { wrong, errors } = typeCheck();
    expect(errorsOf(wrong, errors)).toEqual([
      expect.stringMatching(/^.*snippet-4\.mts:\d+: .*callTools/),
      expect.stringMatching(/^.*snippet-5\.mts:\d+: .*'nam' does not exist/),
    ]);
  }, 60_000);

  it.each([0, 1, 2])(
    'snippet %i prints what the page shows, run against the demo',
    async (at) => {
      const snippet = snippets[at]!;
      const ran = await run(write(snippet.code, await demo()));
      expect({ code: ran.code, err: ran.err }).toEqual({ code: 0, err: '' });
      expect(ran.out).toBe(snippet.prints);
    },
    30_000,
  );

  it('a wrong copy prints something else', async () => {
    const snippet = snippets[1]!;
    const wrong = snippet.code.replace("content: { name: 'Ada' }", "content: { name: 'Bob' }");
    expect(wrong).not.toBe(snippet.code);
    const ran = await run(write(wrong, await demo()));
    expect(ran.code).toBe(0);
    expect(ran.out).not.toBe(snippet.prints);
    expect(ran.out).toContain('Hello, Bob!');
  }, 30_000);
});
