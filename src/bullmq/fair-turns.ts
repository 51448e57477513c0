import { createHash, randomUUID } from 'node:crypto';
import type { Queue, RedisClient } from 'bullmq';
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
 * Takes a turn: checks the owner's oldest unconfirmed jobs (gone or finished: dropped; still
 * waiting or running: confirmed now), adds the new job, and answers its rank. One round trip,
 * before the job is added. KEYS[1]: the owner's set of jobs (job id → when last confirmed, ms).
 * ARGV: the queue's job key prefix (`queue.toKey('')`), the new job's id, FAIR_CHECK_AFTER_MS,
 * FAIR_CHECKS_PER_ADD, FAIR_KEY_TTL_MS.
 */
const TAKE_TURN = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local unconfirmed = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[3]),
  'LIMIT', 0, tonumber(ARGV[4]))
for _, id in ipairs(unconfirmed) do
  local job = redis.call('HMGET', ARGV[1] .. id, 'timestamp', 'finishedOn')
  if job[1] and not job[2] then
    redis.call('ZADD', KEYS[1], now, id)
  else
    redis.call('ZREM', KEYS[1], id)
  end
end
redis.call('ZADD', KEYS[1], now, ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return redis.call('ZCARD', KEYS[1])
`;

/** Gives a turn back: the job ended. KEYS[1]: the owner's set; ARGV[1]: the job id. */
const GIVE_TURN = `return redis.call('ZREM', KEYS[1], ARGV[1])`;

const TAKE = 'nestjsMcpTasksTakeTurn';
const GIVE = 'nestjsMcpTasksGiveTurn';

/** A job's place among its owner's jobs on a fair queue. */
export interface FairTurn {
  /** The job's id (chosen here, so the owner's set names it before the job exists). */
  jobId: string;
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
  return createHash('sha256')
    .update(JSON.stringify([owner.principal ?? null, owner.tenant ?? null]))
    .digest('base64url')
    .slice(0, 22);
}

/** The BullMQ priority of a job: its level's band, its rank within it. */
export function fairPriority(level: number, rank: number): number {
  return level * FAIR_RANKS + Math.min(Math.max(rank, 1), FAIR_RANKS - 1);
}

/**
 * The owners' turns on the fair queues, kept beside BullMQ's own keys: per queue and owner, a
 * sorted set of the ids of the owner's jobs that wait or run (`<prefix>:<queue>:fair:<owner>`).
 * A job's id enters it before the job is added and leaves it when the job ends (its worker
 * reports it), or when a later add of the same owner finds the job gone or finished.
 */
export class FairTurns {
  private readonly defined = new WeakSet<object>();

  /** Takes the turn of a new job of `owner` on `queue`. */
  async take(queue: Queue, owner: TaskOwner): Promise<FairTurn> {
    const ownerKey = fairOwnerKey(owner);
    const jobId = randomUUID();
    const client = await this.client(queue);
    const rank = Number(
      await client.runCommand(TAKE, [
        ownerSetKey(queue, ownerKey),
        queue.toKey(''),
        jobId,
        FAIR_CHECK_AFTER_MS,
        FAIR_CHECKS_PER_ADD,
        FAIR_KEY_TTL_MS,
      ]),
    );
    return { jobId, ownerKey, rank };
  }

  /** Gives back the turn of a job that ended (completed, or failed for good). Idempotent. */
  async give(queue: Queue, ownerKey: string, jobId: string): Promise<void> {
    const client = await this.client(queue);
    await client.runCommand(GIVE, [ownerSetKey(queue, ownerKey), jobId]);
  }

  /** The queue's Redis client, with the two scripts defined on it (once per client). */
  private async client(queue: Queue): Promise<RedisClient> {
    const client = await queue.getBackend().client;
    if (!this.defined.has(client)) {
      client.defineCommand(TAKE, { numberOfKeys: 1, lua: TAKE_TURN });
      client.defineCommand(GIVE, { numberOfKeys: 1, lua: GIVE_TURN });
      this.defined.add(client);
    }
    return client;
  }
}

/** The Redis key of an owner's set of jobs on a queue: `<prefix>:<queue>:fair:<owner key>`. */
export function ownerSetKey(queue: Queue, ownerKey: string): string {
  return queue.toKey(`fair:${ownerKey}`);
}
