// A private Redis Cluster for the benchmarks: three masters on loopback, no replicas, no
// persistence, joined by `redis-cli --cluster create`, as the tests start one
// (test/redis-cluster-server.ts, whose steps this follows in plain JavaScript).

import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { freePort, sleep } from './common.mjs';

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

/**
 * The Redis Cluster of a bench: REDIS_CLUSTER_NODES (`host:port,host:port,…`) when set, else three
 * private redis-servers from PATH in a temporary directory (`name` in its name). Each node gets a
 * client port and a cluster bus port asked of the OS (the default bus port, the client port +
 * 10000, may lie above 65535 for an ephemeral port). `track(servers, dir)` gets the processes and
 * their directory at once, for the caller's hard deadline. Resolves once every node serves every
 * slot and is linked to the two others on the bus (before that a PUBLISH may not reach a node).
 * @returns {Promise<{ nodes: { host: string, port: number }[], own: boolean, stop(): Promise<void> }>}
 */
export async function startBenchRedisCluster(name, track = () => undefined) {
  if (process.env.REDIS_CLUSTER_NODES) {
    const nodes = process.env.REDIS_CLUSTER_NODES.split(',').map((node) => {
      const [host, port] = node.trim().split(':');
      return { host, port: Number(port) };
    });
    return { nodes, own: false, stop: async () => undefined };
  }
  for (const tool of ['redis-server', 'redis-cli']) {
    if (spawnSync(tool, ['--version']).status !== 0) {
      console.error(`This benchmark needs ${tool} on PATH, or REDIS_CLUSTER_NODES.`);
      process.exit(1);
    }
  }
  const dir = mkdtempSync(join(tmpdir(), `nestjs-mcp-tasks-bench-${name}-cluster-`));
  const servers = [];
  track(servers, dir);
  const stop = async () => {
    await Promise.all(
      servers.map((server) =>
        server.exitCode !== null || server.signalCode !== null
          ? undefined
          : new Promise((resolve) => {
              server.once('exit', resolve);
              server.kill('SIGTERM');
            }),
      ),
    );
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
      servers.push(spawn('redis-server', args, { stdio: 'ignore' }));
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
    for (const { port } of nodes) {
      await waitForNode(port, async (node) =>
        String(await node.call('CLUSTER', 'INFO')).includes('cluster_state:ok'),
      );
    }
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
