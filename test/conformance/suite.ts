/**
 * Runs the official MCP conformance suite's CLI (`@modelcontextprotocol/conformance`, pinned in
 * package.json) against a server URL and reads back its per-scenario results.
 *
 * The CLI needs Node >= 22 (it imports `fs.globSync`); the tests run on Node 20, so it runs on a
 * Node 22 binary from the npm registry (see node22()), or on this process's Node when that is
 * already 22 or later.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';

const require = createRequire(import.meta.url);

export type CheckStatus = 'SUCCESS' | 'FAILURE' | 'WARNING' | 'SKIPPED' | 'INFO';

/** One check of one scenario, as the CLI writes it to `<scenario dir>/checks.json`. */
export interface Check {
  id: string;
  name?: string;
  description?: string;
  status: CheckStatus;
  errorMessage?: string;
}

export interface ScenarioResult {
  scenario: string;
  checks: Check[];
}

/** The suite's CLI entry (`bin.conformance` of the pinned package). */
export function suiteCli(): string {
  const manifest = require.resolve('@modelcontextprotocol/conformance/package.json');
  const { bin } = JSON.parse(readFileSync(manifest, 'utf8')) as { bin: Record<string, string> };
  return join(dirname(manifest), bin.conformance);
}

/** The suite's version, as installed. */
export function suiteVersion(): string {
  const manifest = require.resolve('@modelcontextprotocol/conformance/package.json');
  return (JSON.parse(readFileSync(manifest, 'utf8')) as { version: string }).version;
}

/**
 * A Node >= 22 to run the CLI with: this process's when it is one, else the binary
 * scripts/ensure-node22.mjs unpacked into .cache/ from the npm registry before the tests.
 */
export function node22(): string {
  if (Number(process.versions.node.split('.')[0]) >= 22) return process.execPath;
  const manifest = JSON.parse(readFileSync('package.json', 'utf8')) as {
    config: { conformanceNode: string };
  };
  const spec = manifest.config.conformanceNode;
  const binary = join('.cache', spec.replace(/[@/]/g, '-'), 'package', 'bin', 'node');
  if (!existsSync(binary)) {
    throw new Error(
      `The conformance suite needs Node >= 22: run \`node scripts/ensure-node22.mjs\` (npm test ` +
        `does) to fetch ${spec} from the npm registry, or run the tests on Node 22`,
    );
  }
  return resolve(binary);
}

export interface RunOutput {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  timedOut: boolean;
}

/**
 * Runs the CLI with `args`, asynchronously (the server under test lives in this process, so the
 * event loop must keep serving it). The child gets its own process group, killed whole on timeout.
 */
export function runCli(args: string[], timeoutMs: number): Promise<RunOutput> {
  return new Promise((resolve, reject) => {
    const child = spawn(node22(), [suiteCli(), ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
      env: { ...process.env, NO_COLOR: '1', FORCE_COLOR: '0' },
    });
    let stdout = '';
    let stderr = '';
    let timedOut = false;
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const kill = () => {
      try {
        if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
      } catch {
        // already gone
      }
    };
    const timer = setTimeout(() => {
      timedOut = true;
      kill();
    }, timeoutMs);
    child.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      kill(); // anything the CLI left behind in its group
      resolve({ code, signal, stdout, stderr, timedOut });
    });
  });
}

/** Scenario names printed by `conformance list` (lines `  - name [...]`). */
export function parseScenarioList(text: string): string[] {
  return [...text.matchAll(/^\s+- ([a-z0-9][a-z0-9/_-]*)/gm)].map((match) => match[1]);
}

/** The server scenarios of `list --server --requirements <revision>`: scored and not scored. */
export function parseRequirementList(text: string): { scored: string[]; notScored: string[] } {
  const scored: string[] = [];
  const notScored: string[] = [];
  let section: 'scored' | 'client' | 'not-scored' | undefined;
  for (const line of text.split('\n')) {
    if (/^Server scenarios/.test(line)) section = 'scored';
    else if (/^Client scenarios/.test(line)) section = 'client';
    else if (/^Run and reported, but never scored/.test(line)) section = 'not-scored';
    const item = /^\s+- ([a-z0-9][a-z0-9/_-]*)(?: \[(\w+)\])?/.exec(line);
    if (!item) continue;
    if (section === 'scored') scored.push(item[1]);
    else if (section === 'not-scored' && item[2] === 'server') notScored.push(item[1]);
  }
  return { scored, notScored };
}

/**
 * Reads the results the CLI saved under `dir` (`-o dir`): one folder per scenario run,
 * `server-<scenario>-<timestamp>`, holding `checks.json`.
 */
export function readResults(dir: string): ScenarioResult[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true })
    .filter((entry) => entry.isDirectory() && entry.name.startsWith('server-'))
    .map((entry) => {
      const scenario = entry.name
        .replace(/^server-/, '')
        .replace(/-\d{4}-\d{2}-\d{2}T[\d-]+Z$/, '');
      const file = join(dir, entry.name, 'checks.json');
      const checks = existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as Check[]) : [];
      return { scenario, checks };
    })
    .sort((a, b) => a.scenario.localeCompare(b.scenario));
}

/** A fresh temporary folder, and its removal. */
export function tempDir(): { path: string; remove(): void } {
  const path = mkdtempSync(join(tmpdir(), 'mcp-conformance-'));
  return { path, remove: () => rmSync(path, { recursive: true, force: true }) };
}
