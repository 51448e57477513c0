import { afterEach, describe, expect, it } from '@jest/globals';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

/**
 * scripts/ensure-deps.mjs (run by `npm test` and `npm start`) decides from contents whether the
 * installed packages are the locked ones: its `--check` mode, in a directory of two made-up lock
 * files, never installs anything.
 */
const SCRIPT = resolve(import.meta.dirname, '../../scripts/ensure-deps.mjs');

/** A lock's entries; a workspace's links (and the root linked by name) have no version. */
type Packages = Record<
  string,
  { version?: string; optional?: boolean; link?: boolean; resolved?: string }
>;

const LOCKED: Packages = {
  '': { version: '1.0.0' },
  'node_modules/left-pad': { version: '1.3.0' },
  'node_modules/@scope/tool': { version: '2.0.1' },
  'node_modules/@esbuild/win32-x64': { version: '0.25.0', optional: true },
};

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** A project directory with `locked` in package-lock.json and, unless undefined, `installed`. */
function project(locked: Packages, installed: Packages | undefined): string {
  const dir = mkdtempSync(join(tmpdir(), 'ensure-deps-'));
  dirs.push(dir);
  writeFileSync(
    join(dir, 'package-lock.json'),
    JSON.stringify({ lockfileVersion: 3, packages: locked }),
  );
  if (installed !== undefined) {
    mkdirSync(join(dir, 'node_modules'));
    const { '': _root, ...rest } = installed;
    writeFileSync(
      join(dir, 'node_modules/.package-lock.json'),
      JSON.stringify({ lockfileVersion: 3, packages: rest }),
    );
  }
  return dir;
}

function check(dir: string): { status: number | null; out: string } {
  const run = spawnSync(process.execPath, [SCRIPT, '--check'], { cwd: dir, encoding: 'utf8' });
  return { status: run.status, out: run.stdout.trim() };
}

const withoutOptional = Object.fromEntries(
  Object.entries(LOCKED).filter(([, entry]) => entry.optional !== true),
);

describe('scripts/ensure-deps.mjs --check', () => {
  it('asks for an install when nothing is installed', () => {
    expect(check(project(LOCKED, undefined))).toEqual({
      status: 1,
      out: 'node_modules/.package-lock.json is missing',
    });
  });

  it('is in step when every locked package is installed, an optional one for another platform left out', () => {
    expect(check(project(LOCKED, withoutOptional))).toEqual({ status: 0, out: '' });
  });

  it('stays in step when package-lock.json is written anew, unchanged, after the install (a checkout)', () => {
    const dir = project(LOCKED, withoutOptional);
    const later = new Date(Date.now() + 60_000);
    utimesSync(join(dir, 'package-lock.json'), later, later);
    expect(check(dir)).toEqual({ status: 0, out: '' });
  });

  it('asks for an install when an installed version differs from the locked one', () => {
    const installed = { ...withoutOptional, 'node_modules/@scope/tool': { version: '2.0.0' } };
    expect(check(project(LOCKED, installed))).toEqual({
      status: 1,
      out: 'node_modules/@scope/tool is 2.0.0, locked at 2.0.1',
    });
  });

  it('asks for an install when a package that is not optional is missing', () => {
    const { 'node_modules/left-pad': _gone, ...installed } = withoutOptional;
    expect(check(project(LOCKED, installed))).toEqual({
      status: 1,
      out: 'node_modules/left-pad is not installed',
    });
  });

  it('asks for an install when an optional package that is installed differs', () => {
    const installed = { ...LOCKED, 'node_modules/@esbuild/win32-x64': { version: '0.24.0' } };
    expect(check(project(LOCKED, installed)).status).toBe(1);
  });

  it('is in step with a workspace and its links, none of which has a version (bench/)', () => {
    const locked: Packages = {
      ...LOCKED,
      bench: { version: '0.0.0' },
      'node_modules/nestjs-mcp-tasks': { resolved: '', link: true },
      'node_modules/nestjs-mcp-tasks-bench': { resolved: 'bench', link: true },
    };
    const { 'node_modules/@esbuild/win32-x64': _other, ...installed } = locked;
    expect(check(project(locked, installed))).toEqual({ status: 0, out: '' });
    // An install from before the workspace: the link to the project is missing.
    const { 'node_modules/nestjs-mcp-tasks': _link, ...before } = installed;
    expect(check(project(locked, before))).toEqual({
      status: 1,
      out: 'node_modules/nestjs-mcp-tasks is not installed',
    });
  });

  it('is in step on this checkout, as npm ci left it', () => {
    expect(check(resolve(import.meta.dirname, '../..'))).toEqual({ status: 0, out: '' });
  });
});
