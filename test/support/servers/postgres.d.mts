/**
 * PostgreSQL's server programs: `PG_BIN`, else the binaries published on npm for this platform
 * (as root, a copy in the temporary directory the `postgres` user can reach), else the newest
 * under /usr/lib/postgresql (Debian).
 */
export function postgresBinDir(): string | undefined;

/** The npm package of PostgreSQL's binaries for this platform, when installed. */
export function npmPostgres(): { name: string; version: string; native: string } | undefined;

/** The newest PostgreSQL under /usr/lib/postgresql (Debian's layout), or undefined. */
export function systemPostgresBinDir(): string | undefined;

export interface PrivatePostgres {
  url: string;
  port: number;
  /** The data directory. */
  data: string;
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
   * Copy the data directory from this private server (`pg_basebackup -R`, or the low-level
   * backup API where `bin` has no pg_basebackup) instead of initdb: the server starts as a
   * streaming hot standby of it.
   */
  baseBackupOf?: { port: number; data: string };
}): Promise<PrivatePostgres>;
