export interface RedisAddress {
  host: string;
  port: number;
}

export interface RedisSentinelSet {
  /** The Sentinels: what ioredis is given as `sentinels`. */
  sentinels: RedisAddress[];
  /** The master group name: what ioredis is given as `name`. */
  name: string;
  /** The port of the first primary. */
  primaryPort: number;
  /** The port of its replica, which a failover promotes. */
  replicaPort: number;
  /** The primary as the first Sentinel that answers names it. */
  currentPrimary(): Promise<RedisAddress>;
  /** SIGKILLs the current primary, as a crash: no goodbye to its clients or its replica. */
  killPrimary(): Promise<void>;
  /**
   * A planned failover (`SENTINEL FAILOVER`): the replica is promoted, the old primary stays up
   * and becomes its replica (Sentinel then disconnects the old primary's clients).
   */
  failover(): Promise<void>;
  /**
   * Resolves, after `killPrimary()` or `failover()`, once a Sentinel names another primary and
   * that one reports itself a primary; rejects after `timeoutMs` (default 30 s) with the
   * Sentinels' logs.
   */
  waitForFailover(options?: { timeoutMs?: number }): Promise<RedisAddress>;
  /**
   * After a failover, starts the killed server again on its port, empty, as a replica of the new
   * primary; resolves once it is in sync and the Sentinels know it, ready for another failover.
   */
  restartOldPrimary(): Promise<void>;
  /** Stops every server and removes their directory. */
  stop(): Promise<void>;
}

export function startRedisSentinelSet(options?: {
  /** Part of the temporary directory's name. Default `'redis'`. */
  name?: string;
  /** The master group name. Default `'mymaster'`. */
  masterName?: string;
  /** How many Sentinels: 1 (quorum 1, default) or 3 (quorum 2; starts about 2 s slower). */
  sentinels?: 1 | 3;
  /** `down-after-milliseconds`. Default 1000. */
  downAfterMs?: number;
  /** `failover-timeout`. Default 2000. */
  failoverTimeoutMs?: number;
  /** Called when redis-server is not on PATH; by default it throws. */
  onMissing?: () => never;
  /** Gets at once a synchronous `halt()` that kills the servers and removes their directory. */
  track?: (halt: () => void) => void;
}): Promise<RedisSentinelSet>;
