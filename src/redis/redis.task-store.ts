import type { OnApplicationShutdown } from '@nestjs/common';
import { TaskInternalError, TaskQuotaError, TaskStoreFullError } from '../errors.js';
import {
  cursorAfter,
  keyOfCursor,
  listingKey,
  ownerKey,
  placeOfKey,
  statusFilter,
} from '../store/task-listing.js';
import type {
  TaskListPage,
  TaskStore,
  TaskStoreCleanupOptions,
  TaskStoreCreateOptions,
  TaskStoreLeases,
  TaskStoreListAllOptions,
  TaskStoreListOptions,
} from '../store/task-store.js';
import {
  expiresAt,
  isExpired,
  isOwnedBy,
  isTerminal,
  type TaskOwner,
  type TaskRecord,
  terminalSince,
} from '../task.js';
import {
  connect,
  DEFAULT_PREFIX,
  DEFAULT_REDIS_TIMEOUT_MS,
  type RedisClient,
  type RedisConnectionOptions,
  release,
  withTimeout,
} from './redis-connection.js';

/**
 * Adds an entry to a per-owner sorted set, which lives as long as its longest-lived entry: a new
 * set takes the entry's expiry (epoch ms), a later one pushes it out, '+inf' (a task without TTL)
 * makes it persistent. Shared by RESERVE, FINISH and INDEX.
 */
const ADD_KEPT = `
local function add(key, score, id, expiry)
  local fresh = redis.call('EXISTS', key) == 0
  redis.call('ZADD', key, score, id)
  if expiry == '+inf' then
    redis.call('PERSIST', key)
  elseif fresh then
    redis.call('PEXPIREAT', key, expiry)
  else
    local current = redis.call('PEXPIRETIME', key)
    if current >= 0 and current < tonumber(expiry) then redis.call('PEXPIREAT', key, expiry) end
  end
end`;

/**
 * Reserves a row: refuses when `maxRows` tasks are live (expired ones do not count), refuses an
 * id already reserved; a reserved task enters the listing across owners (scored by creation).
 * It also counts the owner: `quota` holds the listing keys of the owner's tasks, `done` those of
 * its finished ones, both scored by expiry. Entries past their expiry leave both (at most 1,000 a
 * call from `quota`; the rest go on the owner's next create). At `maxTasksPerOwner` the owner's
 * finished task that expires first leaves every set here, as many as needed; the caller deletes
 * those tasks (their keys are in other slots) after checking that they are finished (EVICT).
 * KEYS: rows, created, quota, done (one slot). ARGV: now, maxRows (-1 = none), taskId, expiry
 * score, createdAt, maxTasksPerOwner (-1 = none), listing key. Returns {status, n, the n listing
 * keys given up, then the listing keys of the owner's tasks found expired}, for the caller to drop
 * from the owner's listing index; status 1 (reserved), 0 (store full), -1 (id taken), -2 (the
 * owner's quota, every task live).
 */
const RESERVE = `${ADD_KEPT}
local now = ARGV[1]
local stale = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0, 1000)
if #stale > 0 then redis.call('ZREM', KEYS[3], unpack(stale)) end
redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now)
local evicted = {}
local function reply(status)
  local answer = {status, #evicted}
  for _, key in ipairs(evicted) do answer[#answer + 1] = key end
  for _, key in ipairs(stale) do answer[#answer + 1] = key end
  return answer
end
local quota = tonumber(ARGV[6])
if quota >= 0 then
  local count = redis.call('ZCARD', KEYS[3])
  while count >= quota do
    local oldest = redis.call('ZPOPMIN', KEYS[4])
    if #oldest == 0 then return reply(-2) end
    if redis.call('ZREM', KEYS[3], oldest[1]) == 1 then
      local id = string.sub(oldest[1], 17)
      redis.call('ZREM', KEYS[1], id)
      redis.call('ZREM', KEYS[2], id)
      count = count - 1
      evicted[#evicted + 1] = oldest[1]
    end
  end
end
local limit = tonumber(ARGV[2])
if limit >= 0 and redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf') >= limit then
  return reply(0)
end
if redis.call('ZADD', KEYS[1], 'NX', ARGV[4], ARGV[3]) == 0 then return reply(-1) end
redis.call('ZADD', KEYS[2], ARGV[5], ARGV[3])
add(KEYS[3], ARGV[4], ARGV[7], ARGV[4])
return reply(1)`;

/**
 * A task written terminal becomes one its owner's quota may give up (see RESERVE). Sent in the
 * round trip of the write; should the write lose, EVICT still checks the task before deleting.
 * KEYS: done. ARGV: expiry score, listing key.
 */
const FINISH = `${ADD_KEPT}
add(KEYS[1], ARGV[1], ARGV[2], ARGV[1])
return 1`;

/**
 * Deletes a task RESERVE gave up to make room, if it is finished: returns 1 (deleted, or already
 * gone), else its JSON (a task still live, whose finish entry came before its write: the caller
 * counts it again). KEYS: task.
 */
const EVICT = `
local status = redis.call('HGET', KEYS[1], 's')
if status == 'completed' or status == 'failed' or status == 'cancelled' then
  redis.call('DEL', KEYS[1])
  return 1
end
if redis.call('EXISTS', KEYS[1]) == 0 then return 1 end
return redis.call('HGET', KEYS[1], 'j')`;

/**
 * Reads a task for its owner: the owner is compared before the record leaves Redis, so another
 * owner's task (of any size) answers as fast as a missing one. A record written before owners
 * were kept beside it has no 'o': it is returned, and the caller compares. KEYS: task. ARGV:
 * owner key.
 */
const GET_OWNED = `
local owner = redis.call('HGET', KEYS[1], 'o')
if owner and owner ~= ARGV[1] then return false end
return redis.call('HGET', KEYS[1], 'j')`;

/**
 * Deletes a task and returns {owner key, createdAt} (false when there was none; empty strings for
 * a record written before they were kept beside it), so the caller can drop it from its owner's
 * sets. KEYS: task.
 */
const DELETE = `
local fields = redis.call('HMGET', KEYS[1], 'o', 'c')
if redis.call('DEL', KEYS[1]) == 0 then return false end
return {fields[1] or '', fields[2] or ''}`;

/**
 * Removes up to ARGV[2] rows past their expiry, and their entries in the listing across owners
 * (ZREM in slices: Lua's unpack has a small stack). KEYS: rows, created. ARGV: now, count.
 * Returns how many rows it removed.
 */
const EXPIRE_ROWS = `
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
for i = 1, #ids, 1000 do
  local last = math.min(i + 999, #ids)
  redis.call('ZREM', KEYS[1], unpack(ids, i, last))
  redis.call('ZREM', KEYS[2], unpack(ids, i, last))
end
return #ids`;

/**
 * A page of the listing across owners, newest first: ids and their creation scores after the
 * cursor (createdAt, then id, as the listing key orders them). Within one score the set is in id
 * order, so the place of the cursor among the tasks created in its millisecond is found by a
 * binary search on rank (bytewise id comparison, as Redis orders members): O(log n) reads,
 * however many tasks share that millisecond. KEYS: created. ARGV: cursor's createdAt ('' for the
 * first page), cursor's task id, count. Returns [id, score, id, score, …].
 */
const LIST_ALL = `
local function less(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return #a < #b
end
local from = 0
if ARGV[1] ~= '' then
  from = redis.call('ZCOUNT', KEYS[1], '(' .. ARGV[1], '+inf')
  local high = from + redis.call('ZCOUNT', KEYS[1], ARGV[1], ARGV[1])
  while from < high do
    local middle = math.floor((from + high) / 2)
    if less(redis.call('ZRANGE', KEYS[1], middle, middle, 'REV')[1], ARGV[2]) then
      high = middle
    else
      from = middle + 1
    end
  end
end
return redis.call('ZRANGE', KEYS[1], from, from + tonumber(ARGV[3]) - 1, 'REV', 'WITHSCORES')`;

/**
 * Writes a new task with Redis's own expiry, and beside the JSON its owner key, status and
 * creation instant (for GET_OWNED, EVICT and DELETE). KEYS: task. ARGV: version, json, expire-at
 * ms or '', owner key, status, createdAt.
 */
const CREATE = `
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'v', ARGV[1], 'j', ARGV[2], 'o', ARGV[4], 's', ARGV[5], 'c', ARGV[6])
if ARGV[3] ~= '' then redis.call('PEXPIREAT', KEYS[1], ARGV[3]) end
return 1`;

/**
 * The compare-and-set: writes only if the stored version is the expected one (an expired task has
 * no key, so it fails too). HSET keeps the key's expiry. KEYS: task. ARGV: expected, version,
 * json, status.
 */
const COMPARE_AND_SET = `
if redis.call('HGET', KEYS[1], 'v') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'v', ARGV[2], 'j', ARGV[3], 's', ARGV[4])
return 1`;

/**
 * Adds a task to its owner's listing index (a sorted set of listing keys, all scored 0, read by
 * lex order), which lives as long as its longest-lived task (ADD_KEPT). The entries of the
 * owner's tasks that RESERVE found expired or gave up leave it in the same script. KEYS: index.
 * ARGV: listing key, expire-at ms or '', listing keys to drop…
 */
const INDEX = `${ADD_KEPT}
add(KEYS[1], 0, ARGV[1], ARGV[2] == '' and '+inf' or ARGV[2])
for i = 3, #ARGV, 1000 do
  redis.call('ZREM', KEYS[1], unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
return 1`;

/** Redis's clock in epoch milliseconds, for the lease scripts: one clock for every instance. */
const NOW = `
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)`;

/**
 * Renews an instance's lease until now + ttl, drops from what it holds the tasks past their
 * expiry (Redis removed them; no write will ever finish them), and returns the instances whose
 * lease has run out. KEYS: instances, the instance's held tasks. ARGV: instance id, ttl ms.
 */
const RENEW_LEASE = `${NOW}
redis.call('ZADD', KEYS[1], string.format('%d', now + tonumber(ARGV[2])), ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', string.format('%d', now))
return redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', string.format('(%d', now))`;

/**
 * Stops holding tasks (ZREM in slices: Lua's unpack has a small stack), then forgets the instance
 * when its lease has run out and it holds nothing more. KEYS: instances, the instance's held
 * tasks. ARGV: instance id, task ids… Returns 1 when the instance is forgotten.
 */
const RELEASE_TASKS = `${NOW}
for i = 2, #ARGV, 1000 do
  redis.call('ZREM', KEYS[2], unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
local until_ = redis.call('ZSCORE', KEYS[1], ARGV[1])
if until_ and tonumber(until_) > now then return 0 end
if redis.call('ZCARD', KEYS[2]) > 0 then return 0 end
redis.call('ZREM', KEYS[1], ARGV[1])
return 1`;

/** The keys of one owner's sets (see RedisTaskStore.ownerSets). */
interface OwnerSets {
  readonly quota: string;
  readonly done: string;
  readonly index: string;
}

/** Listing keys read (newest first) and, aligned with them, their records or `null`. */
interface ListingRead {
  keys: string[];
  records: (TaskRecord | null)[];
}

/**
 * A key named `prefix` + `name` in the Redis Cluster slot of `key`, which starts with `prefix`:
 * when `key` has a hash tag (it lies in the prefix), `prefix` + `name`; else `key` itself is
 * made the tag. A prefix with an unmatched brace allows neither: then `prefix` + `name`, in
 * another slot (fine on a single Redis).
 */
function keyInSlotOf(key: string, prefix: string, name: string): string {
  if (hashed(key) !== key) return `${prefix}${name}`;
  const tagged = `${prefix}{${key}}${name}`;
  return hashed(tagged) === key ? tagged : `${prefix}${name}`;
}

/** The part of a key Redis Cluster hashes: its hash tag (`{…}`, not empty), else all of it. */
function hashed(key: string): string {
  const open = key.indexOf('{');
  const close = open < 0 ? -1 : key.indexOf('}', open + 1);
  return close > open + 1 ? key.slice(open + 1, close) : key;
}

/** Index entries a filtered listing reads per round trip pair, at least (see `list`). */
const FILTERED_LIST_BATCH = 100;
/** Batches a filtered listing reads per call at most: its round trips are twice this. */
const FILTERED_LIST_BATCHES = 3;

/** Expired rows one cleanup script removes at most (it loops until fewer are left). */
const EXPIRE_ROWS_BATCH = 1000;

const COMMANDS = {
  nestjsMcpTasksReserve: { numberOfKeys: 4, lua: RESERVE },
  nestjsMcpTasksFinish: { numberOfKeys: 1, lua: FINISH },
  nestjsMcpTasksEvict: { numberOfKeys: 1, lua: EVICT },
  nestjsMcpTasksGetOwned: { numberOfKeys: 1, lua: GET_OWNED },
  nestjsMcpTasksDelete: { numberOfKeys: 1, lua: DELETE },
  nestjsMcpTasksExpireRows: { numberOfKeys: 2, lua: EXPIRE_ROWS },
  nestjsMcpTasksListAll: { numberOfKeys: 1, lua: LIST_ALL },
  nestjsMcpTasksCreate: { numberOfKeys: 1, lua: CREATE },
  nestjsMcpTasksCompareAndSet: { numberOfKeys: 1, lua: COMPARE_AND_SET },
  nestjsMcpTasksIndex: { numberOfKeys: 1, lua: INDEX },
  nestjsMcpTasksRenewLease: { numberOfKeys: 2, lua: RENEW_LEASE },
  nestjsMcpTasksReleaseTasks: { numberOfKeys: 2, lua: RELEASE_TASKS },
} as const;

type ScriptClient = RedisClient & {
  nestjsMcpTasksReserve(
    rows: string,
    created: string,
    quota: string,
    done: string,
    ...args: (string | number)[]
  ): Promise<(number | string)[]>;
  nestjsMcpTasksFinish(key: string, ...args: (string | number)[]): Promise<number>;
  nestjsMcpTasksEvict(key: string): Promise<number | string>;
  nestjsMcpTasksGetOwned(key: string, owner: string): Promise<string | null>;
  nestjsMcpTasksDelete(key: string): Promise<[string, string] | null>;
  nestjsMcpTasksExpireRows(
    rows: string,
    created: string,
    ...args: (string | number)[]
  ): Promise<number>;
  nestjsMcpTasksListAll(key: string, ...args: (string | number)[]): Promise<string[]>;
  nestjsMcpTasksCreate(key: string, ...args: (string | number)[]): Promise<number>;
  nestjsMcpTasksCompareAndSet(key: string, ...args: (string | number)[]): Promise<number>;
  nestjsMcpTasksIndex(key: string, ...args: (string | number)[]): Promise<number>;
  nestjsMcpTasksRenewLease(
    instances: string,
    held: string,
    ...args: (string | number)[]
  ): Promise<string[]>;
  nestjsMcpTasksReleaseTasks(
    instances: string,
    held: string,
    ...args: (string | number)[]
  ): Promise<number>;
};

/**
 * The TaskStore for several instances behind one endpoint (ioredis 6), on one Redis or a Redis
 * Cluster (an ioredis `Cluster`; which keys share a slot is in docs/redis-cluster.md).
 *
 * - A task is one hash `{prefix}{<taskId>}` holding its version and JSON; the braces are the hash
 *   tag, so every script touches one Redis Cluster slot.
 * - Expiry is Redis's own: `PEXPIREAT createdAt + ttlMs`.
 * - Transitions are a server-side compare-and-set (Lua): two instances racing on one task cannot
 *   both win. `get` is one round trip, a transition (read + compare-and-set) two.
 * - `maxRows` is enforced atomically on a sorted set of rows scored by expiry (`{prefix}rows`),
 *   which also lets cleanup find expired rows in O(expired); finished tasks without a TTL are
 *   found in `{prefix}terminal` by the instant they finished.
 * - Listing reads one sorted set per owner (`{prefix}owner:<owner>`), written in the same round
 *   trip as the task; entries of tasks that are gone are dropped when a listing meets them, and
 *   the set expires with its longest-lived task. A status filter reads that set in bounded
 *   batches (see `list`).
 * - The operator's listing across owners (`listAll`) reads `{prefix}{{prefix}rows}created`, every
 *   task scored by `createdAt`. Its entry is added by the script that reserves the task's row, and
 *   removed wherever the row is (delete, cleanup, a failed create): no extra round trip. Its name
 *   carries the rows key as hash tag, so the two share a Redis Cluster slot; when the prefix has a
 *   hash tag of its own, it is `{prefix}created`, in the prefix's slot. (A prefix with an unmatched
 *   brace cannot do either, and is for a single Redis only.) Tasks created before this set existed
 *   are not in it; they leave the listing's blind spot as they expire.
 * - The per-owner quota (`maxTasksPerOwner`) counts the owner's tasks in
 *   `{prefix}{{prefix}rows}quota:<owner>` and its finished ones in `…done:<owner>` (listing keys
 *   scored by expiry, both in the slot of the rows): the script that reserves the row counts the
 *   owner and, at the quota, gives up the owner's finished task that expires first, atomically.
 *   The task given up is deleted in the create's second round trip, after a check on its own key
 *   that it is finished. The same script finds the owner's expired tasks, so the owner's listing
 *   index loses their entries, and those of the tasks given up, in the write of the new entry: the
 *   index holds what the owner's count holds, however many tasks the owner has made. Each set
 *   lives as long as its longest-lived entry.
 * - Beside its JSON a task's hash keeps its owner key (`o`) and status (`s`): an owner-scoped `get`
 *   compares the owner inside Redis, so another owner's task is never sent (a foreign id answers
 *   as fast as a missing one, whatever the record's size), and eviction checks the status there.
 * - Every call is bounded by `timeoutMs` (default 5 s): with Redis away a request fails in bounded
 *   time, and ioredis reconnects by itself when Redis is back.
 * - Leases (TaskStoreLeases): `{prefix}{lease}instances` scores each instance by the instant its
 *   lease runs out, on Redis's clock; `{prefix}{lease}held:<instance>` scores the tasks it holds
 *   by their expiry. Both share the hash tag `{lease}`, so a lease script touches one slot. A held
 *   task is added in the round trip that writes the task and dropped in the one that writes it
 *   terminal (the task's own key is in another slot, so not in its script); a renewal is one
 *   script of two writes, whatever the number of tasks held.
 */
export class RedisTaskStore implements TaskStore, TaskStoreLeases, OnApplicationShutdown {
  readonly client: RedisClient;
  private readonly owned: boolean;
  private readonly prefix: string;
  private readonly timeoutMs: number;
  private readonly rowsKey: string;
  /** Every task, scored by `createdAt`, in the slot of `rowsKey` (see the class comment). */
  readonly createdKey: string;
  private readonly terminalKey: string;
  private readonly instancesKey: string;
  /** `list` filters by status itself. */
  readonly listsByStatus: boolean = true;

  constructor(options: RedisConnectionOptions) {
    ({ client: this.client, owned: this.owned } = connect(options, 'RedisTaskStore'));
    this.prefix = options.prefix ?? DEFAULT_PREFIX;
    this.timeoutMs = options.timeoutMs ?? DEFAULT_REDIS_TIMEOUT_MS;
    this.rowsKey = `${this.prefix}rows`;
    this.createdKey = keyInSlotOf(this.rowsKey, this.prefix, 'created');
    this.terminalKey = `${this.prefix}terminal`;
    this.instancesKey = `${this.prefix}{lease}instances`;
    for (const [name, definition] of Object.entries(COMMANDS)) {
      if (!(name in this.client)) this.client.defineCommand(name, definition);
    }
  }

  private get scripts(): ScriptClient {
    return this.client as ScriptClient;
  }

  /** The key of a task; `{…}` is the Redis Cluster hash tag. */
  keyOf(taskId: string): string {
    return `${this.prefix}{${taskId}}`;
  }

  async create(record: TaskRecord, options: TaskStoreCreateOptions): Promise<void> {
    const at = expiresAt(record);
    const score = at ?? '+inf';
    const owner = ownerKey(record.owner);
    const sets = this.ownerSets(owner);
    const key = listingKey(record);
    const quota = options.maxTasksPerOwner ?? null;
    const [status, given, ...keys] = (await this.call(
      this.scripts.nestjsMcpTasksReserve(
        this.rowsKey,
        this.createdKey,
        sets.quota,
        sets.done,
        Date.now(),
        options.maxRows ?? -1,
        record.taskId,
        score,
        record.createdAt,
        quota ?? -1,
        key,
      ),
    )) as [number, number, ...string[]];
    // The tasks given up to make room are deleted in the next round trip, the task's own; their
    // entries, and those of the owner's tasks found expired, leave the owner's listing index then.
    const evictions = keys.slice(0, given).map((entry) => this.evict(entry, sets));
    const { index } = sets;
    if (status !== 1) {
      await this.call(
        Promise.all([...evictions, keys.length > 0 ? this.client.zrem(index, ...keys) : undefined]),
      );
      if (status === 0) throw new TaskStoreFullError(options.maxRows ?? 0);
      if (status === -2) throw new TaskQuotaError(quota ?? 0);
      throw new TaskInternalError('Task id already exists');
    }
    let written: number;
    try {
      // The owner's listing entry goes in the same round trip (another slot): should the write
      // fail, a listing drops the entry when it finds no task behind it.
      [written] = await this.call(
        Promise.all([
          this.scripts.nestjsMcpTasksCreate(
            this.keyOf(record.taskId),
            record.version,
            JSON.stringify(record),
            at ?? '',
            owner,
            record.status,
            record.createdAt,
          ),
          this.scripts.nestjsMcpTasksIndex(index, key, at ?? '', ...keys),
          // A task an instance runs is held by it from this same round trip on.
          record.heldBy === undefined
            ? undefined
            : this.client.zadd(this.heldKey(record.heldBy), score, record.taskId),
          ...evictions,
        ]),
      );
    } catch (error) {
      // The row was reserved but the task not written: give the row back (best effort; an
      // orphan row only counts against maxRows until its expiry score passes), and its entries
      // in the listing across owners and the owner's count (orphans list nothing, and go with
      // their row or by their score).
      this.client.zrem(this.rowsKey, record.taskId).catch(() => undefined);
      this.client.zrem(this.createdKey, record.taskId).catch(() => undefined);
      this.client.zrem(sets.quota, key).catch(() => undefined);
      throw error;
    }
    if (written === 0) throw new TaskInternalError('Task id already exists');
  }

  /**
   * Deletes a task RESERVE gave up to make room for its owner's new one, if it is finished. A
   * task still live (its finish entry was sent with a write that then lost the compare-and-set)
   * is counted again, in its row, the listing across owners and the quota: the owner may hold
   * one task above its quota until then, never loses a live task.
   */
  private async evict(entry: string, sets: OwnerSets): Promise<void> {
    const { taskId } = placeOfKey(entry);
    const reply = await this.scripts.nestjsMcpTasksEvict(this.keyOf(taskId));
    if (reply === 1) return;
    const record = JSON.parse(reply as string) as TaskRecord;
    if (isTerminal(record.status)) {
      // Written before statuses were kept beside the JSON: its JSON says it is finished.
      await this.client.del(this.keyOf(taskId));
      return;
    }
    const score = expiresAt(record) ?? '+inf';
    await this.client
      .multi()
      .zadd(this.rowsKey, score, taskId)
      .zadd(this.createdKey, record.createdAt, taskId)
      .zadd(sets.quota, score, entry)
      .exec();
    await this.client.zadd(sets.index, 0, entry);
  }

  /**
   * The keys of one owner's sets (`owner` is its ownerKey, encoded once for all three): its count
   * and its finished tasks (listing keys scored by expiry, in the rows' slot, see RESERVE), and
   * its listing index.
   */
  private ownerSets(owner: string): OwnerSets {
    const encoded = Buffer.from(owner).toString('base64url');
    return {
      quota: keyInSlotOf(this.rowsKey, this.prefix, `quota:${encoded}`),
      done: keyInSlotOf(this.rowsKey, this.prefix, `done:${encoded}`),
      index: `${this.prefix}owner:${encoded}`,
    };
  }

  /** The owner's count: the listing keys of its tasks, scored by expiry (see RESERVE). */
  quotaKey(owner: string): string {
    return this.ownerSets(owner).quota;
  }

  /** The listing keys of the owner's finished tasks, scored by expiry (see RESERVE). */
  doneKey(owner: string): string {
    return this.ownerSets(owner).done;
  }

  /** The listing index of an owner. */
  ownerIndexKey(owner: TaskOwner): string {
    return this.ownerSets(ownerKey(owner)).index;
  }

  /**
   * Unfiltered, two round trips: the page of listing keys, then the page's records. With a status
   * filter the index is read in batches of `max(limit, 100)` entries, two round trips each, until
   * `limit` tasks match; at most 3 batches per call (6 round trips), after which the page ends
   * where the reading stopped, shorter than `limit`, with a `nextCursor` to go on from there.
   */
  async list(owner: TaskOwner, options: TaskStoreListOptions): Promise<TaskListPage> {
    const after = options.cursor === undefined ? undefined : keyOfCursor(options.cursor);
    const states = statusFilter(options.status);
    const index = this.ownerIndexKey(owner);
    return this.page(
      (last, count) => this.readListing(owner, index, last, count),
      after,
      options.limit,
      states && ((record) => states.has(record.status)),
    );
  }

  /**
   * Reads `{prefix}…created` as `list` reads an owner's index: two round trips unfiltered (a
   * script that finds the cursor's place and reads the page of ids, then the records), batches of
   * `max(limit, 100)` entries with a status or tool filter, at most 3 per call.
   */
  async listAll(options: TaskStoreListAllOptions): Promise<TaskListPage> {
    const after = options.cursor === undefined ? undefined : keyOfCursor(options.cursor);
    const states = statusFilter(options.status);
    const { toolName } = options;
    const keep =
      states === undefined && toolName === undefined
        ? undefined
        : (record: TaskRecord): boolean =>
            (states === undefined || states.has(record.status)) &&
            (toolName === undefined || record.toolName === toolName);
    return this.page((last, count) => this.readCreated(last, count), after, options.limit, keep);
  }

  /**
   * One page of a listing that `read` reads (entries below a listing key, and their records,
   * `null` for a task not to list). Without `keep`, one read of `limit` entries; with it, batches
   * of `max(limit, 100)` entries until `limit` records are kept, at most FILTERED_LIST_BATCHES.
   */
  private async page(
    read: (after: string | undefined, count: number) => Promise<ListingRead>,
    after: string | undefined,
    limit: number,
    keep?: (record: TaskRecord) => boolean,
  ): Promise<TaskListPage> {
    if (keep === undefined) {
      const { keys, records } = await read(after, limit);
      return {
        tasks: records.filter((record): record is TaskRecord => record !== null),
        ...(keys.length === limit && { nextCursor: cursorAfter(keys[keys.length - 1]!) }),
      };
    }
    const batch = Math.max(limit, FILTERED_LIST_BATCH);
    const tasks: TaskRecord[] = [];
    let last = after;
    for (let reads = 0; reads < FILTERED_LIST_BATCHES; reads++) {
      const { keys, records } = await read(last, batch);
      for (let i = 0; i < keys.length; i++) {
        last = keys[i]!;
        const record = records[i];
        if (record == null || !keep(record)) continue;
        tasks.push(record);
        // The page is full: the next one starts right after this task, not after the batch.
        if (tasks.length === limit) return { tasks, nextCursor: cursorAfter(last) };
      }
      if (keys.length < batch) return { tasks };
    }
    return { tasks, nextCursor: cursorAfter(last!) };
  }

  /**
   * Up to `count` entries of the listing across owners below `after` (newest first) and, aligned
   * with them, their records (`null` for a task gone or expired). Two round trips. Entries of
   * tasks that are gone stay: the row is reserved (and listed) just before the task is written,
   * so an entry without its task may be one being created; they go with their rows.
   */
  private async readCreated(after: string | undefined, count: number): Promise<ListingRead> {
    const place = after === undefined ? undefined : placeOfKey(after);
    const reply = await this.call(
      this.scripts.nestjsMcpTasksListAll(
        this.createdKey,
        place?.createdAt ?? '',
        place?.taskId ?? '',
        count,
      ),
    );
    const keys: string[] = [];
    const ids: string[] = [];
    for (let i = 0; i < reply.length; i += 2) {
      ids.push(reply[i]!);
      keys.push(listingKey({ createdAt: Number(reply[i + 1]), taskId: reply[i]! }));
    }
    return { keys, records: await this.readRecords(ids) };
  }

  /**
   * The live records of `ids`, aligned with them (`null` for a task gone or expired): one
   * pipeline, so one round trip, none for no ids. On a Redis Cluster the tasks lie in many slots,
   * which one pipeline cannot span: the reads are sent at once instead, each to its task's node,
   * still one round trip.
   */
  private async readRecords(ids: readonly string[]): Promise<(TaskRecord | null)[]> {
    if (ids.length === 0) return [];
    let jsons: (string | null)[];
    if (this.client.isCluster) {
      jsons = await this.call(Promise.all(ids.map((id) => this.client.hget(this.keyOf(id), 'j'))));
    } else {
      const pipeline = this.client.pipeline();
      for (const taskId of ids) pipeline.hget(this.keyOf(taskId), 'j');
      const replies = (await this.call(pipeline.exec())) ?? [];
      jsons = replies.map(([error, json]) => {
        if (error) throw error;
        return json as string | null;
      });
    }
    const now = Date.now();
    return jsons.map((json) => {
      const record = json === null ? null : (JSON.parse(json) as TaskRecord);
      return record === null || isExpired(record, now) ? null : record;
    });
  }

  /**
   * Up to `count` entries of an owner's index below `after` (newest first) and, aligned with
   * them, their records (`null` for a task gone, expired or, by a forged entry, not the owner's).
   * Entries of tasks that are gone are dropped on the way. Two round trips.
   */
  private async readListing(
    owner: TaskOwner,
    index: string,
    after: string | undefined,
    count: number,
  ): Promise<ListingRead> {
    const keys = await this.call(
      this.client.zrange(
        index,
        after === undefined ? '+' : `(${after}`,
        '-',
        'BYLEX',
        'REV',
        'LIMIT',
        0,
        count,
      ),
    );
    const live = await this.readRecords(keys.map((key) => key.slice(key.indexOf(':') + 1)));
    const gone = keys.filter((_key, i) => live[i] === null);
    if (gone.length > 0) this.client.zrem(index, ...gone).catch(() => undefined);
    const records = live.map((record) =>
      record !== null && isOwnedBy(record, owner) ? record : null,
    );
    return { keys, records };
  }

  /** One PING, bounded by `timeoutMs` like every call. */
  async ping(): Promise<void> {
    await this.call(this.client.ping());
  }

  async get(taskId: string, owner?: TaskOwner): Promise<TaskRecord | null> {
    const key = this.keyOf(taskId);
    const json = await this.call(
      owner === undefined
        ? this.client.hget(key, 'j')
        : this.scripts.nestjsMcpTasksGetOwned(key, ownerKey(owner)),
    );
    if (json === null) return null;
    const record = JSON.parse(json) as TaskRecord;
    if (owner !== undefined && !isOwnedBy(record, owner)) return null;
    return record;
  }

  async compareAndSet(record: TaskRecord, expectedVersion: number): Promise<boolean> {
    const write = this.scripts.nestjsMcpTasksCompareAndSet(
      this.keyOf(record.taskId),
      expectedVersion,
      record.version,
      JSON.stringify(record),
      record.status,
    );
    // A finished task without a TTL is kept until terminalTtlMs: it is remembered by the instant
    // it finished, sent together with the write (one round trip; the index lives in another
    // slot). Should the write lose, the entry is stale, and cleanup checks the record first.
    const since = terminalSince(record);
    const remember =
      since === null ? undefined : this.client.zadd(this.terminalKey, 'NX', since, record.taskId);
    // A task written terminal is no longer held, in the same round trip too. Should the write
    // lose, the task was changed by someone else meanwhile; the caller's retry writes it terminal
    // or finds it so, so dropping it early costs nothing.
    const release =
      record.heldBy !== undefined && isTerminal(record.status)
        ? this.client.zrem(this.heldKey(record.heldBy), record.taskId)
        : undefined;
    // A finished task is one its owner's quota may give up, from this same round trip on (EVICT
    // checks the task itself, so an entry of a write that lost deletes nothing live).
    const finish = isTerminal(record.status)
      ? this.scripts.nestjsMcpTasksFinish(
          this.doneKey(ownerKey(record.owner)),
          expiresAt(record) ?? '+inf',
          listingKey(record),
        )
      : undefined;
    const [written] = await this.call(Promise.all([write, remember, release, finish]));
    return written === 1;
  }

  /** The tasks an instance holds; `{lease}` is the hash tag of every lease key. */
  heldKey(instanceId: string): string {
    return `${this.prefix}{lease}held:${instanceId}`;
  }

  async renewLease(instanceId: string, ttlMs: number): Promise<string[]> {
    const expired = await this.call(
      this.scripts.nestjsMcpTasksRenewLease(
        this.instancesKey,
        this.heldKey(instanceId),
        instanceId,
        ttlMs,
      ),
    );
    return expired.filter((id) => id !== instanceId);
  }

  heldTasks(instanceId: string): Promise<string[]> {
    return this.call(this.client.zrange(this.heldKey(instanceId), '0', '-1'));
  }

  async releaseTasks(instanceId: string, taskIds: readonly string[]): Promise<boolean> {
    const forgotten = await this.call(
      this.scripts.nestjsMcpTasksReleaseTasks(
        this.instancesKey,
        this.heldKey(instanceId),
        instanceId,
        ...taskIds,
      ),
    );
    return forgotten === 1;
  }

  async releaseLease(instanceId: string): Promise<void> {
    await this.call(
      this.client.multi().zrem(this.instancesKey, instanceId).del(this.heldKey(instanceId)).exec(),
    );
  }

  /**
   * Two round trips: the task (its owner read as it goes), then its entries in the sets of every
   * task and of its owner.
   */
  async delete(taskId: string): Promise<boolean> {
    const found = await this.call(this.scripts.nestjsMcpTasksDelete(this.keyOf(taskId)));
    const removals = [
      this.client.zrem(this.rowsKey, taskId),
      this.client.zrem(this.createdKey, taskId),
      this.client.zrem(this.terminalKey, taskId),
    ];
    const [owner, createdAt] = found ?? ['', ''];
    if (owner !== '' && createdAt !== '') {
      const entry = listingKey({ createdAt: Number(createdAt), taskId });
      const sets = this.ownerSets(owner);
      removals.push(
        this.client.zrem(sets.quota, entry),
        this.client.zrem(sets.done, entry),
        this.client.zrem(sets.index, entry),
      );
    }
    await this.call(Promise.all(removals));
    return found !== null;
  }

  async cleanup(now: number, options: TaskStoreCleanupOptions): Promise<number> {
    // Tasks past their TTL: Redis removed them already; their rows go now, with their entries in
    // the listing across owners, in batches (each a script that keeps Redis busy briefly).
    let removed = 0;
    for (;;) {
      const expired = await this.call(
        this.scripts.nestjsMcpTasksExpireRows(
          this.rowsKey,
          this.createdKey,
          now,
          EXPIRE_ROWS_BATCH,
        ),
      );
      removed += expired;
      if (expired < EXPIRE_ROWS_BATCH) break;
    }
    // Finished tasks without a TTL, once terminalTtlMs old. An entry can be stale (its write
    // lost the compare-and-set): the record decides.
    const before = now - options.terminalTtlMs;
    const due = await this.call(this.client.zrangebyscore(this.terminalKey, '-inf', before));
    for (const taskId of due) {
      const record = await this.get(taskId);
      const since = record === null ? null : terminalSince(record);
      if (record !== null && since === null) {
        await this.call(this.client.zrem(this.terminalKey, taskId));
      } else if (since !== null && since > before) {
        await this.call(this.client.zadd(this.terminalKey, 'XX', since, taskId));
      } else if (await this.delete(taskId)) {
        removed++;
      }
    }
    return removed;
  }

  private closing: Promise<void> | undefined;

  /** Closes the client the store made (not the app's own). Idempotent. */
  onApplicationShutdown(): Promise<void> {
    this.closing ??= release(this.client, this.owned, this.timeoutMs);
    return this.closing;
  }

  private call<T>(operation: Promise<T>): Promise<T> {
    return withTimeout(operation, this.timeoutMs);
  }
}
