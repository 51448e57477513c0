import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { freePort } from './redis-server.js';

/** A real three-master Redis Cluster for the tests, on loopback. */
export interface TestRedisCluster {
  /** The masters, each serving a third of the slots: what ioredis `Cluster` is given. */
  nodes: { host: string; port: number }[];
  /** Stops the servers and removes their directory (a no-op with REDIS_CLUSTER_NODES). */
  stop(): Promise<void>;
}

/**
 * `REDIS_CLUSTER_NODES` (`host:port,host:port,…`) when set, else three private redis-servers from
 * PATH, joined by `redis-cli --cluster create` with no replicas. Each node gets two ports asked of
 * the OS, its client port and its cluster bus port (`--cluster-port`): Redis's default bus port,
 * the client port + 10000, may lie above 65535 for an ephemeral port. No persistence: the tests
 * never restart a node.
 */
export async function startTestRedisCluster(): Promise<TestRedisCluster> {
  const fromEnv = process.env.REDIS_CLUSTER_NODES;
  if (fromEnv) {
    const nodes = fromEnv.split(',').map((node) => {
      const [host, port] = node.trim().split(':');
      return { host: host!, port: Number(port) };
    });
    return { nodes, stop: async () => undefined };
  }
  for (const tool of ['redis-server', 'redis-cli']) {
    if (spawnSync(tool, ['--version']).status !== 0) {
      throw new Error(
        `These tests need ${tool}: install redis-server (apt-get install -y redis-server) or set REDIS_CLUSTER_NODES`,
      );
    }
  }
  const dir = mkdtempSync(join(tmpdir(), 'nestjs-mcp-tasks-redis-cluster-'));
  const children: ChildProcess[] = [];
  const stop = async (): Promise<void> => {
    await Promise.all(children.map(stopChild));
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    // Six distinct ports: freePort releases each one, so ask for all before binding any.
    const ports = new Set<number>();
    while (ports.size < 6) ports.add(await freePort());
    const [p1, b1, p2, b2, p3, b3] = [...ports];
    const pairs: [number, number][] = [
      [p1!, b1!],
      [p2!, b2!],
      [p3!, b3!],
    ];
    for (const [port, bus] of pairs) {
      children.push(
        spawn(
          'redis-server',
          [
            '--port',
            String(port),
            '--cluster-port',
            String(bus),
            '--bind',
            '127.0.0.1',
            '--dir',
            dir,
            '--cluster-enabled',
            'yes',
            '--cluster-config-file',
            join(dir, `nodes-${port}.conf`),
            '--appendonly',
            'no',
            '--save',
            '',
          ],
          { stdio: 'ignore' },
        ),
      );
    }
    const nodes = pairs.map(([port]) => ({ host: '127.0.0.1', port }));
    for (const { port } of nodes)
      await waitFor(port, async (node) => (await node.ping()) === 'PONG');
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
      await waitFor(port, async (node) =>
        String(await node.call('CLUSTER', 'INFO')).includes('cluster_state:ok'),
      );
    }
    // And every node must be linked to the two others on the cluster bus: until then a PUBLISH on
    // one node does not reach the subscribers of a node it has not shaken hands with yet.
    for (const { port } of nodes) {
      await waitFor(port, async (node) => {
        const lines = String(await node.call('CLUSTER', 'NODES'))
          .trim()
          .split('\n');
        return (
          lines.length === nodes.length &&
          lines.every((line) => line.includes(' connected') && !line.includes('handshake'))
        );
      });
    }
    return { nodes, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** Polls the node on `port` until `ready` says so (connection errors count as not yet). */
async function waitFor(port: number, ready: (node: Redis) => Promise<boolean>): Promise<void> {
  const node = new Redis({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0 });
  node.on('error', () => undefined);
  const deadline = Date.now() + 20_000;
  try {
    for (;;) {
      if (await ready(node).catch(() => false)) return;
      if (Date.now() > deadline) throw new Error(`Redis Cluster node ${port} did not get ready`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  } finally {
    node.disconnect();
  }
}

function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    child.once('exit', () => resolve());
    child.kill('SIGTERM');
  });
}
