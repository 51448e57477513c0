export interface TcpProxy {
  /** Where the app connects: 127.0.0.1. */
  host: string;
  port: number;
  /** Where new connections go now. */
  readonly target: { host: string; port: number };
  /** Connections open now. */
  readonly connections: number;
  /** Connections accepted since the start. */
  readonly accepted: number;
  /** New connections go to `port` (on `host`, by default the current target's); open ones stay. */
  retarget(port: number, host?: string): void;
  /** Destroys every open connection on both sides; `reset`: with a TCP RST instead of a FIN. */
  dropAll(options?: { reset?: boolean }): void;
  /** Stops listening and drops every open connection. */
  close(): Promise<void>;
}

/**
 * A TCP proxy on 127.0.0.1 (`port`, else a free one) to `targetHost` (default 127.0.0.1) and
 * `targetPort`. A connection whose target refuses is accepted and closed at once.
 */
export function startTcpProxy(options: {
  targetPort: number;
  targetHost?: string;
  port?: number;
}): Promise<TcpProxy>;
