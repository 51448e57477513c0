// A private Redis Cluster for the benchmarks: three masters on loopback, no replicas, no
// persistence, started as the tests start theirs (test/support/servers/redis-cluster.mjs).

import { startRedisCluster } from '../test/support/servers/redis-cluster.mjs';

/**
 * The Redis Cluster of a bench: REDIS_CLUSTER_NODES (`host:port,host:port,…`) when set, else three
 * private redis-servers from PATH in a temporary directory (`name` in its name). `track(halt)`
 * gets at once a synchronous `halt()` that kills the servers and removes their directory, for the
 * caller's hard deadline. Exits the process with a message when redis-server or redis-cli is
 * missing.
 * @returns {Promise<{ nodes: { host: string, port: number }[], own: boolean, stop(): Promise<void> }>}
 */
export function startBenchRedisCluster(name, track = () => undefined) {
  return startRedisCluster({
    name: `bench-${name}`,
    track,
    onMissing: (tools) => {
      console.error(`This benchmark needs ${tools.join(' and ')} on PATH, or REDIS_CLUSTER_NODES.`);
      process.exit(1);
    },
  });
}
