import type { McpServer } from '@modelcontextprotocol/server';

/** How many idle servers the pool keeps, over all owners: twice a busy client's concurrency. */
export const IDLE_SERVERS = 64;

/**
 * Idle 2026-07-28 servers, kept for the next request of the same owner, so that a request pays
 * for the McpServer, the app's `configure` and the tools' JSON Schemas once per instance instead
 * of once per request.
 *
 * A 2026-07-28 request carries everything about its client in its own envelope and leaves nothing
 * on the instance that the next request reads: the SDK connects the instance to a fresh transport
 * per exchange, sets its protocol version and seeds the client's identity from the envelope each
 * time. What could cross from one request to the next is a handler that is still running after its
 * exchange ended (the client went away) or work a handler left behind: so an instance is given back
 * only when its exchange ended with the client still there, and only to requests of the same owner
 * (principal and tenant). A change of the app's tools, prompts or resources (McpServerNotifier)
 * retires every instance built before it.
 */
export class McpServerPool {
  /** Idle servers per owner key, the least recently used owner first. */
  private readonly idle = new Map<string, McpServer[]>();
  private size = 0;
  private generation = 0;
  private closed = false;

  constructor(private readonly build: () => McpServer) {}

  /**
   * A server for one exchange of `owner`: an idle one when there is one, else a new one. It goes
   * back to the pool when the exchange closes, unless `signal` (the client's) has fired by then.
   */
  take(owner: string, signal: AbortSignal): McpServer {
    const servers = this.idle.get(owner);
    const server = servers?.pop() ?? this.build();
    if (servers !== undefined) {
      this.size--;
      if (servers.length === 0) this.idle.delete(owner);
    }
    const generation = this.generation;
    server.server.onclose = () => {
      if (!signal.aborted && generation === this.generation && !this.closed) {
        this.giveBack(owner, server);
      }
    };
    return server;
  }

  /** Retires every server built so far (the app's tools, prompts or resources changed). */
  retire(): void {
    this.generation++;
    this.idle.clear();
    this.size = 0;
  }

  /** Keeps nothing from now on (the app is shutting down). */
  close(): void {
    this.closed = true;
    this.retire();
  }

  /** How many servers are idle (for tests). */
  get idleCount(): number {
    return this.size;
  }

  private giveBack(owner: string, server: McpServer): void {
    if (this.size >= IDLE_SERVERS) {
      const [oldest, servers] = this.idle.entries().next().value as [string, McpServer[]];
      servers.shift();
      this.size--;
      if (servers.length === 0) this.idle.delete(oldest);
    }
    const servers = this.idle.get(owner) ?? [];
    // Re-inserted: the owner is now the most recently used.
    this.idle.delete(owner);
    servers.push(server);
    this.idle.set(owner, servers);
    this.size++;
  }
}
