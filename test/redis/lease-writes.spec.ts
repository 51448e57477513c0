import { Redis } from 'ioredis';
import { TasksLease } from '../../src/janitor/tasks.lease.js';
import { RedisTaskStore } from '../../src/redis/redis.task-store.js';
import { resolveTasksConfig } from '../../src/tasks.config.js';
import { TasksService } from '../../src/tasks.service.js';
import { startTestRedis, type TestRedis } from '../support/redis-server.js';

/**
 * What the lease costs Redis per renewal, counted by Redis itself (INFO commandstats): the same
 * commands with 10 and with 1,000 running tasks held, since tasks are held by the writes that
 * create and finish them, never by the timer. A count, not a timing: renewals are driven by hand.
 */

/** Commands Redis ran since the last CONFIG RESETSTAT, by name (INFO and CONFIG left out). */
async function commandStats(raw: Redis): Promise<Record<string, number>> {
  const info = await raw.info('commandstats');
  const calls: Record<string, number> = {};
  for (const match of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
    const [, name, count] = match;
    if (name === 'info' || name!.startsWith('config')) continue;
    calls[name!] = Number(count);
  }
  return calls;
}

/** Redis commands that write, among those the lease may run. */
const WRITES = new Set(['zadd', 'zrem', 'zremrangebyscore', 'del', 'hset', 'sadd', 'srem']);

describe('the lease: store writes per renewal do not depend on how many tasks run', () => {
  let redis: TestRedis;
  let raw: Redis;
  let store: RedisTaskStore;

  beforeAll(async () => {
    redis = await startTestRedis();
    raw = new Redis(redis.url);
    store = new RedisTaskStore({ connection: redis.url, prefix: 'writes:' });
  });
  afterAll(async () => {
    raw?.disconnect();
    await store?.onApplicationShutdown();
    await redis?.stop();
  });

  it('10 and 1,000 held running tasks: the same commands, and two writes per renewal', async () => {
    // A lease long enough that no instance's runs out while the tasks are created.
    const config = resolveTasksConfig({
      janitor: false,
      lease: { ttlMs: 60_000 },
      maxTasksPerOwner: null,
    });
    const tasks = new TasksService(store, null, config);
    // Another instance, alive, so that every renewal also reads the instances' leases.
    const other = new TasksService(store, null, config);
    const lease = new TasksLease(tasks, store, config);
    const otherLease = new TasksLease(other, store, config);
    await otherLease.renew();
    const owner = { principal: 'p' };
    const PERIODS = 5;

    const measure = async (running: number): Promise<Record<string, number>> => {
      while ((await store.heldTasks(tasks.instanceId)).length < running) {
        await tasks.create(owner, {}, { held: true });
      }
      expect(await store.heldTasks(tasks.instanceId)).toHaveLength(running);
      await lease.renew(); // loads the script, so that both counts see EVALSHA alone
      await raw.config('RESETSTAT');
      for (let period = 0; period < PERIODS; period++) await lease.renew();
      await lease.settled();
      return commandStats(raw);
    };

    const few = await measure(10);
    const many = await measure(1_000);
    expect(many).toEqual(few);
    const writes = Object.entries(few)
      .filter(([name]) => WRITES.has(name))
      .reduce((sum, [, count]) => sum + count, 0);
    // One round trip per renewal (EVALSHA), whose script writes twice: ZADD (the lease) and
    // ZREMRANGEBYSCORE (held tasks past their expiry; it finds none here).
    expect(few).toMatchObject({ evalsha: PERIODS, zadd: PERIODS, zremrangebyscore: PERIODS });
    expect(writes).toBe(2 * PERIODS);
    process.stdout.write(
      `lease commands over ${PERIODS} renewals, 10 and 1,000 held tasks: ${JSON.stringify(few)}\n`,
    );
  });
});
