import { createHash } from 'node:crypto';
import type { Queue, RedisClient } from 'bullmq';
import { BoundedMap } from '../store/bounded-map.js';
import type { TaskOwner } from '../task.js';

/**
 * How many owner ranks one BullMQ priority level holds on a fair queue: a job's priority is
 * `level × FAIR_RANKS + rank`, its level the tool's (or the queue's) `priority` option (0 without
 * one), its rank how many of its owner's jobs wait or run on the queue with it (1 for the first).
 * A rank past `FAIR_RANKS - 1` shares the last one (first come, first served among them).
 */
export const FAIR_RANKS = 1_024;

/** BullMQ's largest priority (2^21 − 1). */
export const BULLMQ_MAX_PRIORITY = 2_097_151;

/** The largest `priority` option a tool on a fair queue may set (2047). */
export const FAIR_MAX_LEVEL = Math.floor((BULLMQ_MAX_PRIORITY - (FAIR_RANKS - 1)) / FAIR_RANKS);

/**
 * An owner's job that no add has confirmed for this long is checked against BullMQ's own record
 * at the owner's next add: a job removed by hand, or one whose end no worker could report (it
 * died just then), stops counting. A job that still waits or runs is confirmed for as long again.
 */
export const FAIR_CHECK_AFTER_MS = 60_000;

/** At most this many of an owner's jobs are checked by one add (each check is one HMGET). */
export const FAIR_CHECKS_PER_ADD = 8;

/**
 * An owner's set of jobs expires this long after its last add or job end: an owner that never
 * calls again leaves nothing behind for good, whatever its workers could not report.
 */
export const FAIR_KEY_TTL_MS = 86_400_000;

/**
 * Takes turns, for the adds of one tick on one queue: for each (owner set, job id) pair, checks
 * the owner's oldest unconfirmed jobs (gone or finished: dropped; still waiting or running:
 * confirmed now), adds the new job, and answers its rank. One round trip, before the adds.
 * KEYS[1]: the first pair's owner set (the slot; every key of a queue shares it when BullMQ runs
 * on a cluster, whose queue prefix must be a hash tag). An owner set maps job id → when last
 * confirmed (ms). ARGV: the queue's job key prefix (`queue.toKey('')`), FAIR_CHECK_AFTER_MS,
 * FAIR_CHECKS_PER_ADD, FAIR_KEY_TTL_MS, then the pairs.
 */
const TAKE_TURNS = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local prefix, after, checks, ttl = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local ranks = {}
for i = 5, #ARGV, 2 do
  local key = ARGV[i]
  local unconfirmed = redis.call('ZRANGEBYSCORE', key, '-inf', now - after, 'LIMIT', 0, checks)
  for _, id in ipairs(unconfirmed) do
    local job = redis.call('HMGET', prefix .. id, 'timestamp', 'finishedOn')
    if job[1] and not job[2] then
      redis.call('ZADD', key, now, id)
    else
      redis.call('ZREM', key, id)
    end
  end
  redis.call('ZADD', key, now, ARGV[i + 1])
  redis.call('PEXPIRE', key, ttl)
  ranks[#ranks + 1] = redis.call('ZCARD', key)
end
return ranks
`;

/**
 * Gives turns back, for the jobs that ended in one tick on one queue. KEYS[1] as for TAKE_TURNS;
 * ARGV: (owner set, job id) pairs. An owner set whose last job leaves is gone (Redis drops an
 * empty sorted set); one that keeps jobs has its expiry pushed back.
 */
const GIVE_TURNS = `
for i = 2, #ARGV, 2 do
  local key = ARGV[i - 1]
  if redis.call('ZREM', key, ARGV[i]) == 1 and redis.call('EXISTS', key) == 1 then
    redis.call('PEXPIRE', key, ${FAIR_KEY_TTL_MS})
  end
end
return 0
`;

const TAKE = 'nestjsMcpTasksTakeTurns';
const GIVE = 'nestjsMcpTasksGiveTurns';

/** One take or give waiting for its tick's script. */
interface Pending<T> {
  key: string;
  jobId: string;
  resolve: (value: T) => void;
  reject: (error: unknown) => void;
}

/** What one queue's current tick has gathered. */
interface Batch {
  takes: Pending<number>[];
  gives: Pending<void>[];
}

/** A job's place among its owner's jobs on a fair queue. */
export interface FairTurn {
  /** The owner's key (see `fairOwnerKey`), which the job carries for its end. */
  ownerKey: string;
  /** 1 + how many of the owner's jobs wait or run on the queue besides it. */
  rank: number;
}

/**
 * The key of an owner's turns: a hash of its principal and tenant (22 characters), so that a
 * long or odd principal makes no long or odd Redis key, and the key names no one.
 */
export function fairOwnerKey(owner: TaskOwner): string {
  return hashOwner(ownerJson(owner));
}

const ownerJson = (owner: TaskOwner): string =>
  JSON.stringify([owner.principal ?? null, owner.tenant ?? null]);

const hashOwner = (json: string): string =>
  createHash('sha256').update(json).digest('base64url').slice(0, 22);

/** Owner keys FairTurns keeps, the most recently made first to go past the bounds. */
const OWNER_KEYS_KEPT = 1_024;
const OWNER_KEYS_BYTES = 1 << 20;

/** The BullMQ priority of a job: its level's band, its rank within it. */
export function fairPriority(level: number, rank: number): number {
  return level * FAIR_RANKS + Math.min(Math.max(rank, 1), FAIR_RANKS - 1);
}

/**
 * The owners' turns on the fair queues, kept beside BullMQ's own keys: per queue and owner, a
 * sorted set of the ids of the owner's jobs that wait or run (`<prefix>:<queue>:fair:<owner>`).
 * A job's id enters it before the job is added and leaves it when the job ends (its worker
 * reports it), or when a later add of the same owner finds the job gone or finished. The takes
 * (and the gives) of one tick on one queue go to Redis together, in one script call: under load
 * the cost per job falls below one command.
 */
export class FairTurns {
  private readonly defined = new WeakSet<object>();
  private readonly batches = new Map<Queue, Batch>();
  /** The keys of recent owners (`fairOwnerKey`): the hash was the add's largest CPU cost here. */
  private readonly ownerKeys = new BoundedMap<string>(OWNER_KEYS_KEPT, OWNER_KEYS_BYTES);

  /**
   * Takes the turn of a new job of `owner` on `queue`, whose id is `jobId` (chosen before the add,
   * so that the owner's set names the job before it exists).
   */
  async take(queue: Queue, owner: TaskOwner, jobId: string): Promise<FairTurn> {
    const json = ownerJson(owner);
    let ownerKey = this.ownerKeys.get(json);
    if (ownerKey === undefined) {
      ownerKey = hashOwner(json);
      this.ownerKeys.set(json, ownerKey, 2 * json.length + 64);
    }
    const rank = await new Promise<number>((resolve, reject) =>
      this.batch(queue).takes.push({ key: ownerSetKey(queue, ownerKey), jobId, resolve, reject }),
    );
    return { ownerKey, rank };
  }

  /** Gives back the turn of a job that ended (completed, or failed for good). Idempotent. */
  give(queue: Queue, ownerKey: string, jobId: string): Promise<void> {
    return new Promise<void>((resolve, reject) =>
      this.batch(queue).gives.push({ key: ownerSetKey(queue, ownerKey), jobId, resolve, reject }),
    );
  }

  /** The queue's batch of this tick, sent once the tick's calls are in. */
  private batch(queue: Queue): Batch {
    let batch = this.batches.get(queue);
    if (batch === undefined) {
      batch = { takes: [], gives: [] };
      this.batches.set(queue, batch);
      setImmediate(() => {
        this.batches.delete(queue);
        void this.send(queue, batch!);
      });
    }
    return batch;
  }

  private async send(queue: Queue, { takes, gives }: Batch): Promise<void> {
    let client: RedisClient;
    try {
      client = await this.client(queue);
    } catch (error) {
      for (const each of [...takes, ...gives]) each.reject(error);
      return;
    }
    if (takes.length > 0) {
      const args: (string | number)[] = [
        takes[0]!.key,
        queue.toKey(''),
        FAIR_CHECK_AFTER_MS,
        FAIR_CHECKS_PER_ADD,
        FAIR_KEY_TTL_MS,
      ];
      for (const { key, jobId } of takes) args.push(key, jobId);
      client.runCommand(TAKE, args).then(
        (ranks: unknown[]) => takes.forEach((each, i) => each.resolve(Number(ranks[i]))),
        (error: unknown) => takes.forEach((each) => each.reject(error)),
      );
    }
    if (gives.length > 0) {
      const args: string[] = [gives[0]!.key];
      for (const { key, jobId } of gives) args.push(key, jobId);
      client.runCommand(GIVE, args).then(
        () => gives.forEach((each) => each.resolve()),
        (error: unknown) => gives.forEach((each) => each.reject(error)),
      );
    }
  }

  /** The queue's Redis client, with the two scripts defined on it (once per client). */
  private async client(queue: Queue): Promise<RedisClient> {
    const client = await queue.getBackend().client;
    if (!this.defined.has(client)) {
      client.defineCommand(TAKE, { numberOfKeys: 1, lua: TAKE_TURNS });
      client.defineCommand(GIVE, { numberOfKeys: 1, lua: GIVE_TURNS });
      this.defined.add(client);
    }
    return client;
  }
}

/** The Redis key of an owner's set of jobs on a queue: `<prefix>:<queue>:fair:<owner key>`. */
export function ownerSetKey(queue: Queue, ownerKey: string): string {
  return queue.toKey(`fair:${ownerKey}`);
}
