export interface PostgresServerAddress {
  url: string;
  port: number;
}

export interface PostgresWithReplica {
  primary: PostgresServerAddress;
  /** A hot standby (answers reads) until `promote()`. */
  replica: PostgresServerAddress;
  /** `pg_ctl stop -m immediate` on the primary: no checkpoint, its connections end at once. */
  killPrimary(): Promise<void>;
  /** `pg_ctl promote` on the replica; resolves once `pg_is_in_recovery()` is false there. */
  promote(): Promise<void>;
  /** Resolves once the replica has replayed the WAL the primary had written when called. */
  waitForReplica(): Promise<void>;
  /** Stops both servers and removes their directories. */
  stop(): Promise<void>;
}

export function startPostgresWithReplica(options?: {
  /** Part of the temporary directories' names. Default `'pg'`. */
  name?: string;
  /**
   * Every commit on the primary waits until the replica has applied it (`remote_apply`).
   * Default true; the promoted replica commits alone.
   */
  synchronous?: boolean;
  /** `-c` options of both servers (by default fsync off, 32MB of buffers, 50 connections). */
  settings?: Record<string, string | number>;
  /** Gets at once, for each server, a synchronous `halt()` that stops it and removes its directory. */
  track?: (halt: () => void) => void;
}): Promise<PostgresWithReplica>;
