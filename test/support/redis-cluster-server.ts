import { type RedisCluster, startRedisCluster } from './servers/redis-cluster.mjs';

/** A real three-master Redis Cluster for the tests, on loopback. */
export type TestRedisCluster = Pick<RedisCluster, 'nodes' | 'stop'>;

/**
 * `REDIS_CLUSTER_NODES` (`host:port,host:port,…`) when set, else three private redis-servers from
 * PATH, joined by `redis-cli --cluster create` with no replicas (see servers/redis-cluster.mjs,
 * which the benches start too). No persistence: the tests never restart a node.
 */
export function startTestRedisCluster(): Promise<TestRedisCluster> {
  return startRedisCluster({
    name: 'redis',
    onMissing: (tools) => {
      throw new Error(
        `These tests need ${tools.join(' and ')}: install redis-server (apt-get install -y redis-server) or set REDIS_CLUSTER_NODES`,
      );
    },
  });
}
