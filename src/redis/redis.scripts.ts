/**
 * The Lua scripts of RedisTaskStore: each runs atomically on one Redis Cluster slot (its KEYS
 * share a hash tag, see redis-keys.ts). Their texts are the store's engine work; the store class
 * says when each is sent.
 */
import type { RedisClient } from './redis-connection.js';

/**
 * Adds an entry to a per-owner sorted set, which lives as long as its longest-lived entry: a new
 * set takes the entry's expiry (epoch ms), a later one pushes it out, '+inf' (a task without TTL)
 * makes it persistent. Shared by RESERVE, FINISH, INDEX and CREATE_ONE. Two commands most times:
 * PEXPIREAT GT moves a set's expiry only later and leaves a set without one alone, so only then
 * is the set's size read (1: the set is new, it takes the expiry; more: it is persistent).
 */
const ADD_KEPT = `
local function add(key, score, id, expiry)
  redis.call('ZADD', key, score, id)
  if expiry == '+inf' then
    redis.call('PERSIST', key)
  elseif redis.call('PEXPIREAT', key, expiry, 'GT') == 0 and redis.call('ZCARD', key) == 1 then
    redis.call('PEXPIREAT', key, expiry)
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
 * A terminal write in one script, when every key it touches is on one node (see CREATE_ONE): the
 * compare-and-set of COMPARE_AND_SET, then what the store sends beside it otherwise, in the same
 * order and whatever the write's outcome: FINISH's entry in the owner's finished set, the task's
 * entry in the terminal set (a task without TTL) and its removal from the set of the instance
 * that held it. KEYS: task, done, terminal, held (unused ones repeat the task's key). ARGV:
 * expected version, new version, JSON, status, expiry score, listing key, finished instant
 * ('' = no terminal entry), '1' to drop it from the held set, task id. Returns 1 if written.
 */
const SET_TERMINAL = `${ADD_KEPT}
local written = 0
if redis.call('HGET', KEYS[1], 'v') == ARGV[1] then
  redis.call('HSET', KEYS[1], 'v', ARGV[2], 'j', ARGV[3], 's', ARGV[4])
  written = 1
end
add(KEYS[2], ARGV[5], ARGV[6], ARGV[5])
if ARGV[7] ~= '' then redis.call('ZADD', KEYS[3], 'NX', ARGV[7], ARGV[9]) end
if ARGV[8] == '1' then redis.call('ZREM', KEYS[4], ARGV[9]) end
return written`;

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

/**
 * The whole create in one script, when every key it touches is on one node (a single Redis, or a
 * Cluster whose prefix carries a hash tag: then every key of the store shares the prefix's slot).
 * What RESERVE, CREATE and INDEX do, in that order, and the evictions of EVICT inline:
 * - Entries of the owner's tasks past their expiry leave its count and listing index (at most
 *   1,000 a call from the count, the rest on a later create), and its finished set: whenever the
 *   owner's count is at its quota (so that the quota counts live tasks only), and on one create
 *   in 8 otherwise (by the first character of the random task id), which keeps the sets within a
 *   few creates' entries of the owner's live tasks at a fraction of the reads. An entry left for
 *   later is harmless: a listing drops an entry with no task behind it.
 * - At `maxTasksPerOwner`, the owner's finished task that expires first is given up, as many as
 *   needed: its key is read here (prefix .. '{' .. id .. '}', a key of the same slot), deleted
 *   when it is finished or counted out when it is gone. One whose finish entry came before its
 *   write (still live) keeps its place in the count: it is never given up, and the owner never
 *   holds a task above its quota. Refused (-2) when no finished task is left.
 * - Refused when `maxRows` tasks are live (0: the rows past their expiry are counted out only when
 *   all of them together reach it), or when the id is taken (-1): every task has its row, from
 *   this script until the task is deleted or cleanup finds it expired.
 * - Then the row, the entry in the listing across owners, the owner's count and listing index,
 *   the record with its expiry and, for a task an instance runs, the instance's held set.
 * KEYS: rows, created, quota, done, index, task, held (the task again when none). ARGV: now,
 * maxRows (-1 = none), maxTasksPerOwner (-1 = none), createdAt, listing key, version, expire-at
 * ms or '' (none: scored '+inf'), json, owner key, status. The task id is the listing key's tail,
 * the key prefix the task key's head. Returns the status: 1 (created), 0, -1 or -2 as RESERVE's.
 */
const CREATE_ONE = `${ADD_KEPT}
local now, entry, expiry = ARGV[1], ARGV[5], ARGV[7]
local id = string.sub(entry, 17)
local score = expiry == '' and '+inf' or expiry
local quota = tonumber(ARGV[3])
local count = quota >= 0 and redis.call('ZCARD', KEYS[3]) or 0
if (quota >= 0 and count >= quota) or string.byte(id, 1) % 8 == 0 then
  local stale = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0, 1000)
  if #stale > 0 then
    redis.call('ZREM', KEYS[3], unpack(stale))
    redis.call('ZREM', KEYS[5], unpack(stale))
    count = count - #stale
  end
  redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now)
end
if quota >= 0 and count >= quota then
  local function finished(key)
    local status = redis.call('HGET', key, 's')
    if not status then
      local json = redis.call('HGET', key, 'j')
      if not json then return true end
      local ok, record = pcall(cjson.decode, json)
      status = ok and type(record) == 'table' and record.status or nil
    end
    return status == 'completed' or status == 'failed' or status == 'cancelled'
  end
  local prefix = string.sub(KEYS[6], 1, #KEYS[6] - #id - 2)
  while count >= quota do
    local oldest = redis.call('ZPOPMIN', KEYS[4])
    if #oldest == 0 then return -2 end
    local given = string.sub(oldest[1], 17)
    local key = prefix .. '{' .. given .. '}'
    if redis.call('ZSCORE', KEYS[3], oldest[1]) and finished(key) then
      redis.call('DEL', key)
      redis.call('ZREM', KEYS[3], oldest[1])
      redis.call('ZREM', KEYS[5], oldest[1])
      redis.call('ZREM', KEYS[1], given)
      redis.call('ZREM', KEYS[2], given)
      count = count - 1
    end
  end
end
local limit = tonumber(ARGV[2])
if limit >= 0 and redis.call('ZCARD', KEYS[1]) >= limit
  and redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf') >= limit then
  return 0
end
if redis.call('ZADD', KEYS[1], 'NX', score, id) == 0 then return -1 end
redis.call('ZADD', KEYS[2], ARGV[4], id)
add(KEYS[3], score, entry, score)
add(KEYS[5], 0, entry, score)
redis.call('HSET', KEYS[6], 'v', ARGV[6], 'j', ARGV[8], 'o', ARGV[9], 's', ARGV[10], 'c', ARGV[4])
if expiry ~= '' then redis.call('PEXPIREAT', KEYS[6], expiry) end
if KEYS[7] ~= KEYS[6] then redis.call('ZADD', KEYS[7], score, id) end
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

/** A script as a client command: its keys (one unless named), then its arguments. */
type Script<R, Keys extends string[] = [key: string]> = (
  ...keysAndArgs: [...Keys, ...(string | number)[]]
) => Promise<R>;

/** A script's definition for ioredis, typed with its command's reply and keys. */
interface Command<R, Keys extends string[]> {
  readonly numberOfKeys: Keys['length'];
  readonly lua: string;
  /** Never set: carries the command's type to ScriptClient. */
  readonly script?: Script<R, Keys>;
}

/** Defines a script of one key, or of `Keys` (the number of keys follows from them). */
function command<R, Keys extends string[] = [key: string]>(
  lua: string,
  numberOfKeys: Keys['length'] = 1,
): Command<R, Keys> {
  return { numberOfKeys, lua };
}

/** The keys of the lease scripts. */
type LeaseKeys = [instances: string, held: string];

const COMMANDS = {
  nestjsMcpTasksReserve: command<
    (number | string)[],
    [rows: string, created: string, quota: string, done: string]
  >(RESERVE, 4),
  nestjsMcpTasksCreateOne: command<
    number,
    [
      rows: string,
      created: string,
      quota: string,
      done: string,
      index: string,
      task: string,
      held: string,
    ]
  >(CREATE_ONE, 7),
  nestjsMcpTasksFinish: command<number>(FINISH),
  nestjsMcpTasksEvict: command<number | string>(EVICT),
  nestjsMcpTasksGetOwned: command<string | null>(GET_OWNED),
  nestjsMcpTasksDelete: command<[string, string] | null>(DELETE),
  nestjsMcpTasksExpireRows: command<number, [rows: string, created: string]>(EXPIRE_ROWS, 2),
  nestjsMcpTasksListAll: command<string[]>(LIST_ALL),
  nestjsMcpTasksCreate: command<number>(CREATE),
  nestjsMcpTasksCompareAndSet: command<number>(COMPARE_AND_SET),
  nestjsMcpTasksSetTerminal: command<
    number,
    [task: string, done: string, terminal: string, held: string]
  >(SET_TERMINAL, 4),
  nestjsMcpTasksIndex: command<number>(INDEX),
  nestjsMcpTasksRenewLease: command<string[], LeaseKeys>(RENEW_LEASE, 2),
  nestjsMcpTasksReleaseTasks: command<number, LeaseKeys>(RELEASE_TASKS, 2),
};

/** The client with the scripts defined as its commands (sent by EVALSHA). */
export type ScriptClient = RedisClient & {
  [Name in keyof typeof COMMANDS]-?: NonNullable<(typeof COMMANDS)[Name]['script']>;
};

/** Defines the scripts on `client`, once: a second store on the same client finds them there. */
export function withScripts(client: RedisClient): ScriptClient {
  for (const [name, definition] of Object.entries(COMMANDS)) {
    if (!(name in client)) client.defineCommand(name, definition);
  }
  return client as ScriptClient;
}
