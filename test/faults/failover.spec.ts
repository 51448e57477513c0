import { connect, createServer, type Server, type Socket } from 'node:net';
import { Redis } from 'ioredis';
import pg from 'pg';
import { RedisTaskStore } from '../../src/redis/index.js';
import { completeTask, newTask, toStoredResult, type TaskRecord } from '../../src/task.js';
import { newTaskId } from '../../src/task-id.js';
import { startPostgresWithReplica } from '../support/servers/postgres-replica.mjs';
import { startRedisSentinelSet } from '../support/servers/redis-sentinel.mjs';
import { startTcpProxy } from '../support/servers/tcp-proxy.mjs';

/**
 * The fault suite's failover servers, proven on real failovers: a Redis primary killed under
 * Sentinel, with ioredis and RedisTaskStore going on with the promoted replica; a PostgreSQL
 * primary killed and its streaming replica promoted, reached through one TCP proxy that the test
 * points at it. With FAULTS_REPORT=1 each test prints how long its failover took and the errors
 * seen meanwhile.
 */

/** Servers started here and not stopped: halted should the process exit first. */
const running = new Set<() => void>();
const track = (halt: () => void): void => {
  running.add(halt);
};
process.once('exit', () => {
  for (const halt of running) halt();
});

const report = (line: string): void => {
  if (process.env.FAULTS_REPORT) process.stdout.write(`[failover] ${line}\n`);
};

/** Error kinds, with the numbers (ports, counts) taken out, each with when it was first seen. */
class Errors {
  private readonly seen = new Map<string, { first: number; last: number; count: number }>();
  constructor(private readonly since: () => number) {}
  add(error: unknown): void {
    const kind = `${(error as Error).name}: ${(error as Error).message}`.replace(/\d+/g, 'N');
    const at = Date.now() - this.since();
    const entry = this.seen.get(kind);
    if (entry === undefined) this.seen.set(kind, { first: at, last: at, count: 1 });
    else Object.assign(entry, { last: at, count: entry.count + 1 });
  }
  toString(): string {
    return [...this.seen]
      .map(([kind, { first, last, count }]) => `${count}x ${kind} (${first}-${last} ms)`)
      .join('; ');
  }
}

describe('failover servers: Redis Sentinel', () => {
  it('ioredis and RedisTaskStore on the Sentinels go on with the promoted replica, keeping what WAIT saw replicated', async () => {
    const set = await startRedisSentinelSet({ name: 'faults', track });
    // ioredis's defaults: 20 retries per command, Sentinel found again at each reconnect.
    const client = new Redis({ sentinels: set.sentinels, name: set.name });
    // The project's defaults (one retry per call, 5 s bound) on { sentinels, name }.
    const store = new RedisTaskStore({
      connection: { sentinels: set.sentinels, name: set.name },
      prefix: 'failover:',
    });
    const owner = { principal: 'alice' };
    let killedAt = 0;
    const clientErrors = new Errors(() => killedAt);
    const storeErrors = new Errors(() => killedAt);
    client.on('error', (error) => clientErrors.add(error));
    try {
      await client.set('before', 'kept');
      const task = newTask(newTaskId(), owner, { ttlMs: 600_000 }, Date.now());
      await store.create(task, { maxRows: null });
      // Replication is asynchronous: WAIT returns once the replica has both writes.
      expect(await client.wait(1, 0)).toBe(1);
      killedAt = Date.now();
      await set.killPrimary();
      // Issued while the primary is down: ioredis queues it and, with its 20 retries (its
      // backoff, 50 ms more each time up to 2 s), runs it on the new primary.
      const during = client.set('during', 'queued').then(() => Date.now() - killedAt);
      // The store's calls go on through the failover, each failing by itself, until a get and
      // a compareAndSet (a script: the new primary loads it again) succeed.
      const probe = (async (): Promise<{ record: TaskRecord; backMs: number }> => {
        for (;;) {
          try {
            const read = await store.get(task.taskId, owner);
            if (read === null) return Promise.reject(new Error('the task is gone'));
            // A compareAndSet whose answer was lost may have been written all the same.
            if (read.status === 'completed') return { record: read, backMs: Date.now() - killedAt };
            const done = completeTask(read, toStoredResult({ content: [] }), {}, Date.now());
            if (done instanceof Error) return Promise.reject(done);
            if (await store.compareAndSet(done, read.version)) {
              return { record: done, backMs: Date.now() - killedAt };
            }
          } catch (error) {
            storeErrors.add(error);
            await new Promise((resolve) => setTimeout(resolve, 100));
          }
        }
      })();
      const primary = await set.waitForFailover();
      const failoverMs = Date.now() - killedAt;
      expect(primary.port).toBe(set.replicaPort);
      const duringMs = await during;
      await client.set('after', 'written');
      expect(await client.mget('before', 'during', 'after')).toEqual(['kept', 'queued', 'written']);
      const { record, backMs } = await probe;
      expect(record.status).toBe('completed');
      expect(await store.get(task.taskId, owner)).toEqual(record);
      report(`Redis: failover ${failoverMs} ms (kill to Sentinel naming the replica)`);
      report(
        `ioredis: a write issued at the kill answered after ${duringMs} ms; errors: ${clientErrors}`,
      );
      report(`RedisTaskStore: get + compareAndSet back after ${backMs} ms; errors: ${storeErrors}`);
      // The old primary comes back as a replica of the new one.
      await set.restartOldPrimary();
      expect(await client.wait(1, 5_000)).toBe(1);
    } finally {
      client.disconnect();
      await store.onApplicationShutdown();
      await set.stop();
    }
  }, 60_000);
});

describe('failover servers: TCP proxy', () => {
  /** A server that answers each connection with its name. */
  async function namer(name: string): Promise<{ server: Server; port: number }> {
    const server = createServer((socket) => socket.end(name));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return { server, port: (server.address() as { port: number }).port };
  }
  /** Connects to `port`, and resolves with the first bytes received. */
  function greeting(port: number): Promise<{ socket: Socket; text: string }> {
    return new Promise((resolve, reject) => {
      const socket = connect(port, '127.0.0.1');
      socket.once('error', reject);
      socket.once('data', (data) => resolve({ socket, text: data.toString() }));
    });
  }

  it('sends new connections to the new target, and dropAll ends the open ones', async () => {
    const a = await namer('a');
    const b = await namer('b');
    // The target keeps this one open, for dropAll to end.
    const held = createServer(() => undefined);
    await new Promise<void>((resolve) => held.listen(0, '127.0.0.1', resolve));
    const proxy = await startTcpProxy({ targetPort: a.port });
    try {
      expect((await greeting(proxy.port)).text).toBe('a');
      proxy.retarget(b.port);
      expect((await greeting(proxy.port)).text).toBe('b');
      proxy.retarget((held.address() as { port: number }).port);
      const open = connect(proxy.port, '127.0.0.1');
      const closed = new Promise<void>((resolve) => open.once('close', () => resolve()));
      open.on('error', () => undefined);
      await new Promise((resolve) => open.once('connect', resolve));
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(proxy.connections).toBe(1);
      proxy.dropAll();
      await closed;
      expect(proxy.connections).toBe(0);
      expect(proxy.accepted).toBe(3);
    } finally {
      await proxy.close();
      for (const server of [a.server, b.server, held]) server.close();
    }
  });
});

describe('failover servers: PostgreSQL primary and replica', () => {
  it('a row committed on the primary is on the promoted replica, which a pg.Pool reaches through the retargeted proxy', async () => {
    const set = await startPostgresWithReplica({ name: 'faults', track });
    const proxy = await startTcpProxy({ targetPort: set.primary.port });
    const pool = new pg.Pool({
      connectionString: `postgres://postgres@127.0.0.1:${proxy.port}/postgres`,
      max: 2,
    });
    let killedAt = 0;
    const errors = new Errors(() => killedAt);
    // Idle clients whose connection ends are reported here, and left by the pool.
    pool.on('error', (error) => errors.add(error));
    try {
      await pool.query('CREATE TABLE failover (id int PRIMARY KEY, note text)');
      await pool.query("INSERT INTO failover VALUES (1, 'before')");
      // Synchronous (remote_apply): the commit answered once the replica had applied it.
      const standby = new pg.Client({ connectionString: set.replica.url });
      await standby.connect();
      try {
        expect((await standby.query('SELECT note FROM failover')).rows).toEqual([
          { note: 'before' },
        ]);
      } finally {
        await standby.end();
      }
      // Two connections: one checked out, which errors on its next query, and one idle in the
      // pool, whose end the pool reports (an 'error' event) when the primary dies.
      const [held, idle] = [await pool.connect(), await pool.connect()];
      idle.release();
      held.on('error', () => undefined);
      expect(pool.totalCount).toBe(2);
      killedAt = Date.now();
      await set.killPrimary();
      const heldError = await held.query('SELECT 1').then(
        () => new Error('the query on the dead primary answered'),
        (error: unknown) => error as Error,
      );
      expect(heldError.message).toMatch(/terminated|ECONNRESET|closed/i);
      errors.add(heldError);
      held.release(true);
      const promoteFrom = Date.now();
      await set.promote();
      const promoteMs = Date.now() - promoteFrom;
      // New connections go to the promoted replica; open ones (none left here: they died with
      // the primary) are cut, as they would be were the old primary still up.
      proxy.retarget(set.replica.port);
      proxy.dropAll();
      const failoverMs = Date.now() - killedAt;
      expect(pool.totalCount).toBe(0);
      const { rows } = await pool.query(
        'SELECT pg_is_in_recovery() AS recovery, inet_server_port() AS port, note FROM failover',
      );
      expect(rows).toEqual([{ recovery: false, port: set.replica.port, note: 'before' }]);
      await pool.query("INSERT INTO failover VALUES (2, 'after')");
      expect((await pool.query('SELECT count(*)::int AS n FROM failover')).rows).toEqual([
        { n: 2 },
      ]);
      report(
        `PostgreSQL: kill + promote + retarget ${failoverMs} ms (promote ${promoteMs} ms); errors: ${errors}`,
      );
    } finally {
      await pool.end();
      await proxy.close();
      await set.stop();
    }
  }, 60_000);
});
