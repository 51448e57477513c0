// A private Redis primary, its replica and Sentinel on loopback, for the fault tests: a real
// failover in a few seconds. Plain JavaScript, as the other servers here, so the benches may start
// it too.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { freePort } from './free-port.mjs';
import { markProcess } from './run-mark.mjs';

const HOST = '127.0.0.1';

/** A redis-server, recorded to be killed at the end of a test run should it outlive its test. */
function spawnRedis(args) {
  const server = spawn('redis-server', args, { stdio: 'ignore' });
  markProcess(server.pid);
  return server;
}

function missingServer() {
  throw new Error(
    'redis-server not on PATH: install redis-server (apt-get install -y redis-server); Sentinel runs as `redis-server <conf> --sentinel`',
  );
}

/**
 * A Redis primary and one replica of it (`--replicaof`), watched by `sentinels` Sentinels (1 or
 * 3; quorum 1 of 1, or 2 of 3) under the master group `masterName`, each on a free loopback port
 * and in its own directory of one temporary directory (`name` in its name). No persistence: a
 * killed server comes back empty and syncs from the primary. A failover is quick: a primary that
 * does not answer for `downAfterMs` (default 1000) is down, and `failoverTimeoutMs` (default
 * 2000) bounds a failover's steps (a failed one is tried again after twice that).
 *
 * Resolves once the replica is in sync and every Sentinel knows the primary, the replica and the
 * other Sentinels, so a `killPrimary()` at once is failed over. `onMissing()` is called when
 * redis-server is not on PATH (by default it throws); `track(halt)` gets at once a synchronous
 * `halt()` that kills every server and removes the directory, for a hard deadline or an exit.
 */
export async function startRedisSentinelSet({
  name = 'redis',
  masterName = 'mymaster',
  sentinels: sentinelCount = 1,
  downAfterMs = 1000,
  failoverTimeoutMs = 2000,
  onMissing = missingServer,
  track = () => undefined,
} = {}) {
  if (sentinelCount !== 1 && sentinelCount !== 3) {
    throw new Error(`sentinels must be 1 or 3, not ${sentinelCount}`);
  }
  if (spawnSync('redis-server', ['--version']).status !== 0) onMissing();
  const dir = mkdtempSync(join(tmpdir(), `nestjs-mcp-tasks-${name}-sentinel-`));
  /** The running server of each port. */
  const servers = new Map();
  const halt = () => {
    for (const server of servers.values()) server.kill('SIGKILL');
    servers.clear();
    rmSync(dir, { recursive: true, force: true });
  };
  track(halt);
  const stop = async () => {
    await Promise.all([...servers.values()].map(stopServer));
    servers.clear();
    rmSync(dir, { recursive: true, force: true });
  };

  // Distinct ports: freePort releases each one, so ask for all before binding any.
  const ports = new Set();
  while (ports.size < 2 + sentinelCount) ports.add(await freePort());
  const [primaryPort, replicaPort, ...sentinelPorts] = [...ports];
  const quorum = sentinelCount === 1 ? 1 : 2;

  /** Starts the data server on `port`, a replica of `replicaOf` when given. */
  const startData = (port, replicaOf) => {
    const home = join(dir, String(port));
    mkdirSync(home, { recursive: true });
    const args = ['--port', String(port), '--bind', HOST, '--dir', home];
    args.push('--logfile', join(home, 'redis.log'), '--save', '', '--appendonly', 'no');
    // Full syncs straight over the socket, at once (Redis 7 waits 5 s for more replicas).
    args.push('--repl-diskless-sync', 'yes', '--repl-diskless-sync-delay', '0');
    if (replicaOf !== undefined) args.push('--replicaof', HOST, String(replicaOf));
    servers.set(port, spawnRedis(args));
  };
  const startSentinel = (port) => {
    const home = join(dir, `sentinel-${port}`);
    mkdirSync(home, { recursive: true });
    // Sentinel rewrites its configuration file as it learns: one of its own, writable.
    const conf = join(home, 'sentinel.conf');
    writeFileSync(
      conf,
      [
        `port ${port}`,
        `bind ${HOST}`,
        `dir ${home}`,
        `logfile ${join(home, 'sentinel.log')}`,
        `sentinel monitor ${masterName} ${HOST} ${primaryPort} ${quorum}`,
        `sentinel down-after-milliseconds ${masterName} ${downAfterMs}`,
        `sentinel failover-timeout ${masterName} ${failoverTimeoutMs}`,
        `sentinel parallel-syncs ${masterName} 1`,
        '',
      ].join('\n'),
    );
    servers.set(port, spawnRedis([conf, '--sentinel']));
  };

  /**
   * Waits until every Sentinel knows the replica on `port` as healthy and in sync, and knows the
   * other Sentinels: a Sentinel fails over only to a replica it has heard of, and elects a leader
   * only among the Sentinels it has heard of (their hellos come every 2 s).
   */
  const sentinelsKnowReplica = async (port) => {
    for (const sentinel of sentinelPorts) {
      await waitForNode(sentinel, async (node) => {
        const replicas = await node.call('SENTINEL', 'REPLICAS', masterName);
        const others = await node.call('SENTINEL', 'SENTINELS', masterName);
        return (
          replicas.some(
            (fields) =>
              field(fields, 'port') === String(port) &&
              !/s_down|o_down|disconnected/.test(field(fields, 'flags')) &&
              field(fields, 'master-link-status') === 'ok',
          ) && others.length === sentinelCount - 1
        );
      });
    }
  };

  /** The primary's address as the first Sentinel that answers reports it. */
  const reportedPrimary = async () => {
    for (const port of sentinelPorts) {
      const address = await onNode(port, (node) =>
        node.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', masterName),
      ).catch(() => null);
      if (Array.isArray(address)) return { host: String(address[0]), port: Number(address[1]) };
    }
    throw new Error(`no Sentinel of ${masterName} answered`);
  };
  const sentinelLogs = () =>
    sentinelPorts.map((port) => tail(join(dir, `sentinel-${port}`, 'sentinel.log'))).join('\n');

  /** The primary before the last `killPrimary()` or `failover()`. */
  let previous;
  /** The port of the server the last `killPrimary()` killed, until `restartOldPrimary()`. */
  let killedPort;

  try {
    startData(primaryPort);
    await waitForNode(primaryPort, async (node) => (await node.ping()) === 'PONG');
    startData(replicaPort, primaryPort);
    await replicaInSync(primaryPort, replicaPort);
    for (const port of sentinelPorts) startSentinel(port);
    await sentinelsKnowReplica(replicaPort);
  } catch (error) {
    await stop();
    throw error;
  }

  return {
    sentinels: sentinelPorts.map((port) => ({ host: HOST, port })),
    name: masterName,
    primaryPort,
    replicaPort,
    currentPrimary: reportedPrimary,
    killPrimary: async () => {
      const primary = await reportedPrimary();
      const server = servers.get(primary.port);
      if (server === undefined) throw new Error(`the primary on ${primary.port} is not running`);
      previous = primary;
      killedPort = primary.port;
      servers.delete(primary.port);
      await killServer(server);
    },
    failover: async () => {
      previous = await reportedPrimary();
      // One Sentinel promotes the replica without an election, the old primary staying up; when
      // it becomes a replica, Sentinel disconnects its clients.
      const [sentinel] = sentinelPorts;
      await onNode(sentinel, (node) => node.call('SENTINEL', 'FAILOVER', masterName));
    },
    waitForFailover: async ({ timeoutMs = 30_000 } = {}) => {
      if (previous === undefined) {
        throw new Error('waitForFailover() after killPrimary() or failover()');
      }
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const primary = await reportedPrimary().catch(() => previous);
        if (primary.port !== previous.port) {
          // The Sentinel names the replica once it reports itself a primary: wait for it to take
          // writes all the same, so a caller's next write is not refused as READONLY.
          await waitForNode(primary.port, async (node) =>
            String(await node.info('replication')).includes('role:master'),
          );
          previous = undefined;
          return primary;
        }
        if (Date.now() > deadline) {
          throw new Error(
            `no failover of ${masterName} within ${timeoutMs} ms; Sentinel logs:\n${sentinelLogs()}`,
          );
        }
        await sleep(50);
      }
    },
    restartOldPrimary: async () => {
      if (killedPort === undefined) throw new Error('restartOldPrimary() after killPrimary()');
      const primary = await reportedPrimary();
      if (primary.port === killedPort) throw new Error('no failover yet: the old primary leads');
      // Started a replica of the new primary at once: Sentinel would turn it into one too, but
      // only after it has reported itself a primary for 8 s.
      const port = killedPort;
      killedPort = undefined;
      startData(port, primary.port);
      await replicaInSync(primary.port, port);
      // Ready for the next failover, as at the start.
      await sentinelsKnowReplica(port);
    },
    stop,
  };
}

/**
 * Waits until the replica on `replicaPort` has loaded the primary's data and the primary streams
 * its writes to it. The replica reports its link up once it has loaded the data, and the primary
 * reports it online, but the primary holds the writes back until the replica's first
 * acknowledgement, which comes within a second: until then a write is on the primary alone, and
 * lost by a kill. So a propagated command that leaves no key behind (a PUBLISH) must be
 * acknowledged (WAIT) by the replica.
 */
async function replicaInSync(primaryPort, replicaPort) {
  await waitForNode(replicaPort, async (node) =>
    String(await node.info('replication')).includes('master_link_status:up'),
  );
  await waitForNode(primaryPort, async (node) => {
    await node.publish('nestjs-mcp-tasks:replica-in-sync', String(replicaPort));
    return (await node.wait(1, 1000)) >= 1;
  });
}

/** A field of a Sentinel reply given as a flat list of names and values. */
function field(fields, fieldName) {
  const index = fields.indexOf(fieldName);
  return index === -1 || index % 2 === 1 ? '' : String(fields[index + 1]);
}

/** The last lines of a log file, for an error message. */
function tail(path, lines = 20) {
  if (!existsSync(path)) return `(no ${path})`;
  return `${path}:\n${readFileSync(path, 'utf8').trimEnd().split('\n').slice(-lines).join('\n')}`;
}

/** Runs `action` on a short-lived connection to the server on `port`. */
async function onNode(port, action) {
  const node = new Redis({
    port,
    host: HOST,
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    connectTimeout: 1000,
  });
  node.on('error', () => undefined);
  try {
    return await action(node);
  } finally {
    node.disconnect();
  }
}

/** Polls the server on `port` until `ready(node)` holds (connection errors count as not yet). */
async function waitForNode(port, ready, ms = 20_000) {
  const node = new Redis({ port, host: HOST, lazyConnect: true, maxRetriesPerRequest: 0 });
  node.on('error', () => undefined);
  const deadline = Date.now() + ms;
  try {
    for (;;) {
      if (await ready(node).catch(() => false)) return;
      if (Date.now() > deadline) throw new Error(`Redis on port ${port} did not get ready`);
      await sleep(50);
    }
  } finally {
    node.disconnect();
  }
}

/** SIGKILL, as a crash: no goodbye to the clients or the replica. */
function killServer(server) {
  if (server.exitCode !== null || server.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    server.once('exit', () => resolve());
    server.kill('SIGKILL');
  });
}

function stopServer(server) {
  if (server.exitCode !== null || server.signalCode !== null) return undefined;
  return new Promise((resolve) => {
    server.once('exit', resolve);
    server.kill('SIGTERM');
  });
}
