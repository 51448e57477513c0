import { RedisTaskStore } from '../../src/redis/index.js';
import { ownerKey } from '../../src/store/task-listing.js';
import { DEFAULT_TERMINAL_TTL_MS } from '../../src/tasks.constants.js';

/**
 * What a principal left in the demo's Redis (prefix `demo:`), read after its server stopped and a
 * janitor pass ran, for the hostile-tenant suite: nothing there may need a manual cleanup. Every
 * key naming the principal must be bounded by configuration (not by how many requests it sent)
 * and expire; the rows that `maxRows` counts must each have their task.
 */

export const DEMO_PREFIX = 'demo:';

/** One key of the principal's: its entries (fields of a hash, members of a set) and its PTTL. */
export interface KeptKey {
  key: string;
  entries: number;
  /** Milliseconds left; -1: no expiry. */
  pttl: number;
}

export interface LeftInRedis {
  /** The principal's task hashes. */
  tasks: KeptKey[];
  /** The principal's own sets: its listing index, the quota's live and finished sets. */
  sets: KeptKey[];
  /** Rows (what `maxRows` counts) whose task is gone, and their number in all. */
  strayRows: number;
  rows: number;
  /** Entries of the listing across owners whose task is gone. */
  strayCreated: number;
}

/** A store on the demo's keys, for their names and a janitor pass; closed by `run`'s end. */
async function withStore<T>(url: string, run: (store: RedisTaskStore) => Promise<T>): Promise<T> {
  const store = new RedisTaskStore({ connection: url, prefix: DEMO_PREFIX });
  try {
    return await run(store);
  } finally {
    await store.onApplicationShutdown();
  }
}

/** What a janitor of the demo does on its interval: the store's cleanup, as of now. */
export function janitorPass(url: string): Promise<number> {
  return withStore(url, (store) =>
    store.cleanup(Date.now(), { terminalTtlMs: DEFAULT_TERMINAL_TTL_MS }),
  );
}

async function scan(store: RedisTaskStore, pattern: string): Promise<string[]> {
  const keys: string[] = [];
  let cursor = '0';
  do {
    const [next, found] = await store.client.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    keys.push(...found);
    cursor = next;
  } while (cursor !== '0');
  return keys;
}

async function kept(store: RedisTaskStore, key: string, type: 'hash' | 'zset'): Promise<KeptKey> {
  const [entries, pttl] = await Promise.all([
    type === 'hash' ? store.client.hlen(key) : store.client.zcard(key),
    store.client.pttl(key),
  ]);
  return { key, entries, pttl };
}

/** Reads what `principal` left under the demo's prefix, and the rows without a task. */
export function leftInRedis(url: string, principal: string): Promise<LeftInRedis> {
  return withStore(url, async (store) => {
    const owner = { principal };
    const key = ownerKey(owner);
    const tasks: KeptKey[] = [];
    const taskKey = /^demo:\{[A-Za-z0-9_-]+\}$/;
    for (const name of await scan(store, `${DEMO_PREFIX}{*}`)) {
      if (!taskKey.test(name)) continue;
      if ((await store.client.hget(name, 'o')) === key) tasks.push(await kept(store, name, 'hash'));
    }
    const sets: KeptKey[] = [];
    for (const name of [store.ownerIndexKey(owner), store.quotaKey(key), store.doneKey(key)]) {
      if ((await store.client.exists(name)) === 1) sets.push(await kept(store, name, 'zset'));
    }
    const missing = async (ids: string[]): Promise<number> => {
      let count = 0;
      for (const id of ids) if ((await store.client.exists(store.keyOf(id))) === 0) count++;
      return count;
    };
    const rows = await store.client.zrange(`${DEMO_PREFIX}rows`, '0', '-1');
    const created = await store.client.zrange(store.createdKey, '0', '-1');
    return {
      tasks,
      sets,
      rows: rows.length,
      strayRows: await missing(rows),
      strayCreated: await missing(created),
    };
  });
}
