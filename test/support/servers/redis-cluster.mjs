// A private three-master Redis Cluster on loopback, for the tests (test/support/redis-cluster-server.ts)
// and the benches (bench/common.mjs): plain JavaScript, so that both run the same steps.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { freePort } from './free-port.mjs';
import { markProcess } from './run-mark.mjs';

const TOOLS = ['redis-server', 'redis-cli'];

function missingTools(tools) {
  throw new Error(
    `${tools.join(' and ')} not on PATH: install redis-server (apt-get install -y redis-server) or set REDIS_CLUSTER_NODES`,
  );
}

/**
 * `REDIS_CLUSTER_NODES` (`host:port,host:port,…`) when set (`own: false`), else three private
 * redis-servers from PATH in a temporary directory (`name` in its name), joined by
 * `redis-cli --cluster create` with no replicas and no persistence. Each node gets two ports asked
 * of the OS, its client port and its cluster bus port (`--cluster-port`): Redis's default bus
 * port, the client port + 10000, may lie above 65535 for an ephemeral port. Resolves once every
 * node serves every slot and is linked to the two others on the bus. `onMissing(tools)` is called
 * when redis-server or redis-cli is not on PATH (by default it throws); `track(halt)` gets at once
 * a synchronous `halt()` that kills the servers and removes their directory, for a hard deadline.
 */
export async function startRedisCluster({
  name,
  onMissing = missingTools,
  track = () => undefined,
}) {
  if (process.env.REDIS_CLUSTER_NODES) {
    const nodes = process.env.REDIS_CLUSTER_NODES.split(',').map((node) => {
      const [host, port] = node.trim().split(':');
      return { host, port: Number(port) };
    });
    return { nodes, own: false, stop: async () => undefined };
  }
  const missing = TOOLS.filter((tool) => spawnSync(tool, ['--version']).status !== 0);
  if (missing.length > 0) onMissing(missing);
  const dir = mkdtempSync(join(tmpdir(), `nestjs-mcp-tasks-${name}-cluster-`));
  const servers = [];
  track(() => {
    for (const server of servers) server.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });
  const stop = async () => {
    await Promise.all(servers.map(stopServer));
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    // Six distinct ports: freePort releases each one, so ask for all before binding any.
    const ports = new Set();
    while (ports.size < 6) ports.add(await freePort());
    const [p1, b1, p2, b2, p3, b3] = [...ports];
    const pairs = [
      [p1, b1],
      [p2, b2],
      [p3, b3],
    ];
    for (const [port, bus] of pairs) {
      const args = ['--port', String(port), '--cluster-port', String(bus), '--bind', '127.0.0.1'];
      args.push('--dir', dir, '--cluster-enabled', 'yes');
      args.push('--cluster-config-file', join(dir, `nodes-${port}.conf`));
      args.push('--appendonly', 'no', '--save', '');
      const server = spawn('redis-server', args, { stdio: 'ignore' });
      markProcess(server.pid);
      servers.push(server);
    }
    const nodes = pairs.map(([port]) => ({ host: '127.0.0.1', port }));
    for (const { port } of nodes) {
      await waitForNode(port, async (node) => (await node.ping()) === 'PONG');
    }
    const created = spawnSync(
      'redis-cli',
      [
        '--cluster',
        'create',
        ...nodes.map(({ host, port }) => `${host}:${port}`),
        '--cluster-replicas',
        '0',
        '--cluster-yes',
      ],
      { encoding: 'utf8', timeout: 30_000 },
    );
    if (created.status !== 0) {
      throw new Error(`redis-cli --cluster create failed: ${created.stdout}${created.stderr}`);
    }
    // Every node must see every slot served before a client is let in: until then a node may
    // answer CLUSTERDOWN, or a client may learn a partial slot map from it.
    for (const { port } of nodes) {
      await waitForNode(port, async (node) =>
        String(await node.call('CLUSTER', 'INFO')).includes('cluster_state:ok'),
      );
    }
    // And every node must be linked to the two others on the cluster bus: until then a PUBLISH on
    // one node does not reach the subscribers of a node it has not shaken hands with yet.
    for (const { port } of nodes) {
      await waitForNode(port, async (node) => {
        const lines = String(await node.call('CLUSTER', 'NODES'))
          .trim()
          .split('\n');
        return (
          lines.length === nodes.length &&
          lines.every((line) => line.includes(' connected') && !line.includes('handshake'))
        );
      });
    }
    return { nodes, own: true, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** Polls the node on `port` until `ready(node)` holds (connection errors count as not yet). */
async function waitForNode(port, ready, ms = 20_000) {
  const node = new Redis({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0 });
  node.on('error', () => undefined);
  const deadline = Date.now() + ms;
  try {
    for (;;) {
      if (await ready(node).catch(() => false)) return;
      if (Date.now() > deadline) throw new Error(`Redis Cluster node ${port} did not get ready`);
      await sleep(50);
    }
  } finally {
    node.disconnect();
  }
}

function stopServer(server) {
  if (server.exitCode !== null || server.signalCode !== null) return undefined;
  return new Promise((resolve) => {
    server.once('exit', resolve);
    server.kill('SIGTERM');
  });
}
