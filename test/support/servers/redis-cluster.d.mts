export interface RedisCluster {
  /** The masters, each serving a third of the slots: what ioredis `Cluster` is given. */
  nodes: { host: string; port: number }[];
  /** Whether the servers are this process's own (false with REDIS_CLUSTER_NODES). */
  own: boolean;
  /** Stops the servers and removes their directory (a no-op with REDIS_CLUSTER_NODES). */
  stop(): Promise<void>;
}

export function startRedisCluster(options: {
  /** Part of the temporary directory's name. */
  name: string;
  /** Called when redis-server or redis-cli is not on PATH; by default it throws. */
  onMissing?: (tools: string[]) => never;
  /** Gets at once a synchronous `halt()` that kills the servers and removes their directory. */
  track?: (halt: () => void) => void;
}): Promise<RedisCluster>;
