import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import type { INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DemoModule } from '../../examples/demo.module.js';

/**
 * docs/python.md's client, the page's `tasks_client.py` block (its one copy: the test writes it
 * from the page into a temporary folder), run as the page says: by a Python with the official
 * `mcp` 2.3 package, against the demo (DemoModule in memory, as `npm start`
 * runs it, on a free port). The test checks what the script prints, then asks the server itself
 * (over HTTP, as the script's principal and as another) that the tasks it names exist, belong to
 * the token it was given, and ended as it says.
 *
 * The Python: MCP_PYTHON, else .cache/python/bin/python (which .ci/run makes with
 * `python3 -m venv .cache/python && .cache/python/bin/pip install mcp==2.3.0`). Without one, the
 * test is skipped, and its name says why.
 */

const PAGE = join(process.cwd(), 'docs/python.md');

/** The page's block of `file`: its info string is `python file=<file>`. */
function pythonBlock(page: string, file: string): string | undefined {
  const blocks = [...page.matchAll(/^```python file=(\S+)\n([\s\S]*?)^```$/gm)];
  return blocks.find(([, name]) => name === file)?.[2];
}

const script = pythonBlock(readFileSync(PAGE, 'utf8'), 'tasks_client.py');
const folder = mkdtempSync(join(tmpdir(), 'python-client-'));
const SCRIPT = join(folder, 'tasks_client.py');
if (script !== undefined) writeFileSync(SCRIPT, script);
const LOCAL_PYTHON = join(process.cwd(), '.cache/python/bin/python');
const VERSION = '2026-07-28';

/** The Python to run the script with, or why there is none. */
function findPython(): { python: string } | { missing: string } {
  const python = process.env.MCP_PYTHON ?? (existsSync(LOCAL_PYTHON) ? LOCAL_PYTHON : undefined);
  if (python === undefined)
    return { missing: 'no Python with mcp 2.3: set MCP_PYTHON or make .cache/python' };
  // MCP_PYTHON is used as given (a wrong one fails the test); the local venv may be half made.
  if (process.env.MCP_PYTHON) return { python };
  const probe = spawnSync(
    python,
    ['-c', 'import importlib.metadata as m; print(m.version("mcp"))'],
    { encoding: 'utf8' },
  );
  const version = probe.stdout?.trim() ?? '';
  return /^2\.3\./.test(version)
    ? { python }
    : { missing: `.cache/python has no mcp 2.3 (found "${version || 'none'}")` };
}

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function runScript(python: string, args: string[]): Promise<Run> {
  return new Promise((done, fail) => {
    const child = spawn(python, [SCRIPT, ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, PYTHONUNBUFFERED: '1' },
      timeout: 30_000,
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    child.once('error', fail);
    child.once('close', (code) => done({ code, stdout, stderr }));
  });
}

/** One 2026-07-28 request to the demo, as `principal`; the JSON-RPC answer. */
async function rpc(
  origin: string,
  principal: string,
  method: string,
  params: Record<string, unknown>,
): Promise<{ result?: Record<string, unknown>; error?: { code: number; message: string } }> {
  const response = await fetch(`${origin}/mcp`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': VERSION,
      'mcp-method': method,
      'mcp-name': String(params.taskId),
      authorization: `Bearer ${principal}`,
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method,
      params: {
        ...params,
        _meta: {
          'io.modelcontextprotocol/protocolVersion': VERSION,
          'io.modelcontextprotocol/clientInfo': { name: 'python-client.e2e-spec', version: '1' },
          'io.modelcontextprotocol/clientCapabilities': {
            extensions: { 'io.modelcontextprotocol/tasks': {} },
          },
        },
      },
    }),
  });
  return (await response.json()) as Awaited<ReturnType<typeof rpc>>;
}

const found = findPython();
if ('missing' in found) {
  process.stdout.write(`python-client.e2e-spec: skipped, ${found.missing}\n`);
}
const withPython = 'python' in found ? test : test.skip;
const why = 'missing' in found ? ` (skipped: ${found.missing})` : '';

describe('docs/python.md: the Python client against the demo', () => {
  let app: INestApplication;
  let origin: string;

  beforeAll(async () => {
    app = await NestFactory.create(DemoModule, { forceCloseConnections: true, logger: false });
    await app.listen(0, '127.0.0.1');
    const { port } = app.getHttpServer().address() as { port: number };
    origin = `http://127.0.0.1:${port}`;
  });

  afterAll(async () => {
    await app?.close();
    rmSync(folder, { recursive: true, force: true });
  });

  test('the page shows the whole script, as one block', () => {
    // Whether or not a Python is here to run it: the page must hold what the tests below run.
    expect(script).toMatch(/^"""Calls the demo's task tools from Python/);
    expect(script).toMatch(/\nif __name__ == "__main__":\n[\s\S]*sys\.exit\(/);
  });

  withPython(
    `follows greet through its input to "Hello, Grace!", cancels wait_for_cancel, as the token's principal${why}`,
    async () => {
      const python = (found as { python: string }).python;
      const run = await runScript(python, [`${origin}/mcp`, '--token', 'grace', '--name', 'Grace']);
      expect(run.stderr).toBe('');
      expect(run.code).toBe(0);
      // Each line as printed; the task ids are captured the first time and must repeat.
      const id = '([A-Za-z0-9_-]+)';
      const lines = [
        `protocol ${VERSION}`,
        `greet: task ${id} working`,
        'greet: task \\1 input_required \\(Waiting for your name\\)',
        '  asked "What is your name\\?", answering Grace',
        'greet: task \\1 completed',
        'result: Hello, Grace!',
        `wait_for_cancel: task ${id} working`,
        'wait_for_cancel: task \\2 cancelled \\(Cancelled\\)',
      ];
      const match = new RegExp(`^${lines.join('\\n')}\\n$`).exec(run.stdout);
      if (!match) throw new Error(`the script printed:\n${run.stdout}`);
      const [, greetId, cancelId] = match;
      expect(greetId).not.toBe(cancelId);

      // The server holds both tasks, ended as printed, for the principal of the token.
      const greet = await rpc(origin, 'grace', 'tasks/get', { taskId: greetId });
      expect(greet.result).toMatchObject({
        status: 'completed',
        result: { content: [{ type: 'text', text: 'Hello, Grace!' }] },
      });
      const cancelled = await rpc(origin, 'grace', 'tasks/get', { taskId: cancelId });
      expect(cancelled.result).toMatchObject({ status: 'cancelled' });
      // Another principal does not see them: the script's token is what made them Grace's.
      for (const taskId of [greetId, cancelId]) {
        const other = await rpc(origin, 'alice', 'tasks/get', { taskId });
        expect(other.error).toEqual({ code: -32602, message: 'Task not found' });
      }
    },
    30_000,
  );

  withPython(
    `a server that is not there: one line on stderr, exit 1, no traceback${why}`,
    async () => {
      const python = (found as { python: string }).python;
      const run = await runScript(python, [`${origin}/nowhere`]);
      expect(run.code).toBe(1);
      expect(run.stdout).toBe('');
      expect(run.stderr).toBe('error: MCPError: Not Found\n');
    },
    30_000,
  );
});
