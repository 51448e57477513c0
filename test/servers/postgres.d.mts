/** PostgreSQL's server programs: `PG_BIN`, else the newest under /usr/lib/postgresql (Debian). */
export function postgresBinDir(): string | undefined;

export interface PrivatePostgres {
  url: string;
  port: number;
  /** The postmaster's process id. */
  pid(): number;
  /** Starts the server (again, after `stop`) on the same port and data directory. */
  start(): void;
  /** `pg_ctl stop -m <mode>`; a server already stopped is fine. */
  stop(mode: 'fast' | 'immediate'): void;
  /** Stops the server at once and removes its directory. */
  halt(): void;
  /** Removes the server's directory. */
  remove(): void;
  /** `pg_ctl promote -w`: a standby leaves recovery; it takes writes once this returns. */
  promote(): void;
}

export function startPrivatePostgres(options: {
  bin: string;
  /** Part of the temporary directory's name. */
  name: string;
  /** `-c` options of the server. */
  settings?: Record<string, string | number>;
  /** Gets at once `halt()`, for a hard deadline or an exit. */
  track?: (halt: () => void) => void;
  /**
   * Copy the data directory from the server on this loopback port with `pg_basebackup -R`
   * instead of initdb: the server starts as a streaming hot standby of it.
   */
  baseBackupOf?: { port: number };
}): Promise<PrivatePostgres>;
