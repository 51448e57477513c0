// A private PostgreSQL server on loopback, for the tests (test/postgres-server.ts) and the benches
// (bench/common.mjs): plain JavaScript, so that both run the same steps.
import { spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './free-port.mjs';

/** PostgreSQL's server programs: `PG_BIN`, else the newest under /usr/lib/postgresql (Debian). */
export function postgresBinDir() {
  if (process.env.PG_BIN) return process.env.PG_BIN;
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return undefined;
  const versions = readdirSync(root)
    .filter((version) => existsSync(join(root, version, 'bin', 'initdb')))
    .sort((a, b) => Number(b) - Number(a));
  return versions.length === 0 ? undefined : join(root, versions[0], 'bin');
}

/**
 * Runs a server program. PostgreSQL refuses to run as root: as root it runs as the `postgres`
 * user (Debian's package makes it), which then owns the data directory.
 */
function run(program, args) {
  const [command, argv] =
    process.getuid?.() === 0
      ? ['runuser', ['-u', 'postgres', '--', program, ...args]]
      : [program, args];
  return spawnSync(command, argv, { encoding: 'utf8' });
}

function check(result, what) {
  if (result.status !== 0) {
    throw new Error(`${what} failed (${result.status}): ${result.stderr || result.stdout}`);
  }
}

/**
 * A private server of the programs in `bin`: initdb into a temporary directory (`name` in its
 * name; the data directory and the unix socket both live there, owned by the server's user), on a
 * free loopback port, started with `settings` (`-c` options: `{ fsync: 'off' }`). `track(halt)`
 * gets at once a synchronous `halt()` that stops the server immediately and removes its
 * directory, for a hard deadline or an exit.
 *
 * What it resolves: `url`, `port`, `pid()` (the postmaster's, whose children are the server's
 * processes), `start()` (again on the same port and data directory, after a `stop`), `stop(mode)`
 * (`pg_ctl stop -m fast|immediate`; a server already stopped is fine), `halt()`, `remove()`
 * (the directory) and `promote()` (a standby's).
 *
 * With `baseBackupOf: { port }` the data directory is not made by initdb but copied from the
 * server on that loopback port by `pg_basebackup -R` (which writes `primary_conninfo` and
 * `standby.signal`): the server starts as a streaming standby of it, a hot standby that answers
 * reads. The source must allow replication connections from loopback, as initdb's pg_hba.conf
 * does (`--auth=trust`), and have a free WAL sender (`max_wal_senders`, 10 by default).
 */
export async function startPrivatePostgres({
  bin,
  name,
  settings = {},
  track = () => undefined,
  baseBackupOf,
}) {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), `nestjs-mcp-tasks-${name}-`));
  if (process.getuid?.() === 0) {
    const user = spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' });
    const group = spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' });
    check(user, 'id -u postgres');
    chownSync(dir, Number(user.stdout.trim()), Number(group.stdout.trim()));
  }
  const data = join(dir, 'data');
  const ctl = (args) => run(join(bin, 'pg_ctl'), ['-D', data, ...args]);
  const remove = () => rmSync(dir, { recursive: true, force: true });
  const halt = () => {
    ctl(['-m', 'immediate', '-w', 'stop']);
    remove();
  };
  track(halt);
  const options = [
    `-p ${port}`,
    `-k ${dir}`,
    '-c listen_addresses=127.0.0.1',
    ...Object.entries(settings).map(([key, value]) => `-c ${key}=${value}`),
  ].join(' ');
  const start = () =>
    check(
      ctl(['-o', options, '-l', join(dir, 'server.log'), '-w', '-t', '30', 'start']),
      'pg_ctl start',
    );
  const initdb = () =>
    check(
      run(join(bin, 'initdb'), [
        '-D',
        data,
        '-U',
        'postgres',
        '--auth=trust',
        '--encoding=UTF8',
        '--no-locale',
        '--no-sync',
      ]),
      'initdb',
    );
  // A fast checkpoint (the default spreads it out), the WAL streamed alongside, nothing synced.
  const baseBackup = ({ port: source }) =>
    check(
      run(join(bin, 'pg_basebackup'), [
        ...['-h', '127.0.0.1', '-p', String(source), '-U', 'postgres', '-D', data],
        ...['-R', '-X', 'stream', '--checkpoint=fast', '--no-sync'],
      ]),
      'pg_basebackup',
    );
  try {
    if (baseBackupOf === undefined) initdb();
    else baseBackup(baseBackupOf);
    start();
  } catch (error) {
    halt();
    throw error;
  }
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    port,
    pid: () => Number(readFileSync(join(data, 'postmaster.pid'), 'utf8').split('\n')[0]),
    start,
    stop: (mode) => {
      const result = ctl(['-m', mode, '-w', '-t', '30', 'stop']);
      // A server already stopped is fine: pg_ctl says so with "Is server running?".
      if (result.status !== 0 && !/Is server running\?/.test(result.stderr)) {
        check(result, `pg_ctl stop -m ${mode}`);
      }
    },
    halt,
    remove,
    // Waits (-w) until the standby has left recovery: it takes writes once this returns.
    promote: () => check(ctl(['-w', '-t', '30', 'promote']), 'pg_ctl promote'),
  };
}
