import type { OnApplicationShutdown } from '@nestjs/common';
import {
  CREATED,
  createLimits,
  createRefusal,
  decodeRecord,
  encodeRecord,
  ID_TAKEN,
  type IndexedFields,
  indexedFields,
  removeInBatches,
  roomOrder,
  visibleTo,
} from '../store/store-rules.js';
import { listingKey, ownerKey, placeOfKey } from '../store/task-listing.js';
import type {
  TaskListPage,
  TaskStore,
  TaskStoreCleanupOptions,
  TaskStoreCreateOptions,
  TaskStoreLeases,
  TaskStoreListAllOptions,
  TaskStoreListOptions,
  TaskStoreWriteOptions,
} from '../store/task-store.js';
import { isTerminal, type TaskOwner, type TaskRecord, terminalSince } from '../task.js';
import { connect, redisFault, release, withTimeout } from './redis-connection.js';
import type { RedisClient, RedisConnectionOptions } from './redis-connection.js';
import { type OwnerSets, RedisKeys } from './redis-keys.js';
import { type ScriptClient, withScripts } from './redis.scripts.js';
import { RedisTaskListing } from './redis-task-listing.js';

/** Expired rows one cleanup script removes at most (it loops until fewer are left). */
const EXPIRE_ROWS_BATCH = 1000;

/** A sorted-set score: an instant, or '+inf' for none (a task without a TTL expires last). */
const scoreOf = (instant: number | null): number | string =>
  instant === null || instant === Infinity ? '+inf' : instant;

/**
 * The TaskStore for several instances behind one endpoint (ioredis 6), on one Redis or a Redis
 * Cluster (an ioredis `Cluster`). Its keys are laid out by RedisKeys (which share a slot, and why,
 * is in docs/redis-cluster.md), its scripts are in redis.scripts.ts.
 *
 * - A task is one hash holding its version and JSON, and beside them its owner key (`o`), status
 *   (`s`) and creation instant (`c`): an owner-scoped `get` compares the owner inside Redis, so
 *   another owner's task is never sent (a foreign id answers as fast as a missing one, whatever
 *   the record's size), and eviction checks the status there.
 * - Expiry is Redis's own: `PEXPIREAT createdAt + ttlMs`.
 * - A create is one script, one round trip, wherever its keys are on one node (a single Redis,
 *   Sentinel, a Cluster under a prefix with a hash tag): reservation, quota, `maxRows`, listing
 *   entries, record, expiry and held set, atomically (CREATE_ONE). On a Cluster under a plain
 *   prefix the task's slot is not the rows' and the owner's: two round trips, described below.
 * - Transitions are a server-side compare-and-set (Lua): two instances racing on one task cannot
 *   both win. `get` is one round trip, a transition (read + compare-and-set) two. A terminal
 *   write on one node is one script with the index writes that go with it (SET_TERMINAL).
 * - `maxRows` is enforced atomically on the sorted set of rows scored by expiry, which also lets
 *   cleanup find expired rows in O(expired); finished tasks without a TTL are found in the
 *   terminal set by the instant they finished.
 * - Listing reads one sorted set per owner, written in the same round trip as the task; entries
 *   of tasks that are gone are dropped when a listing meets them, and the set expires with its
 *   longest-lived task. A status filter reads that set in bounded batches (see `list`).
 * - The operator's listing across owners (`listAll`) reads the set of every task scored by
 *   `createdAt`. Its entry is added by the script that reserves the task's row, and removed
 *   wherever the row is (delete, cleanup, a failed create): no extra round trip. Tasks created
 *   before this set existed are not in it; they leave the listing's blind spot as they expire.
 * - The per-owner quota (`maxTasksPerOwner`) counts the owner's tasks and its finished ones in two
 *   sets of listing keys scored by expiry, in the slot of the rows: the script that reserves the
 *   row counts the owner and, at the quota, gives up the owner's finished task that expires first,
 *   atomically. The task given up is deleted in the same script when all is on one node, else in
 *   the create's second round trip, after a check on its own key that it is finished. The same script finds the owner's expired tasks, so the
 *   owner's listing index loses their entries, and those of the tasks given up, in the write of
 *   the new entry: the index holds what the owner's count holds, however many tasks the owner has
 *   made. Each set lives as long as its longest-lived entry.
 * - Every call is bounded by `timeoutMs` (default 5 s): with Redis away a request fails in bounded
 *   time, and ioredis reconnects by itself when Redis is back.
 * - Leases (TaskStoreLeases): one set scores each instance by the instant its lease runs out, on
 *   Redis's clock; one per instance scores the tasks it holds by their expiry, all in one slot. A
 *   held task is added in the round trip that writes the task and dropped in the one that writes
 *   it terminal (the task's own key is in another slot, so not in its script); a renewal is one
 *   script of two writes, whatever the number of tasks held.
 */
export class RedisTaskStore implements TaskStore, TaskStoreLeases, OnApplicationShutdown {
  readonly client: RedisClient;
  private readonly owned: boolean;
  private readonly timeoutMs: number;
  private readonly keys: RedisKeys;
  private readonly scripts: ScriptClient;
  private readonly listing: RedisTaskListing;
  /** Whether every key a create touches is on one node, so one script does it all. */
  private readonly oneNode: boolean;
  /** `list` filters by status itself. */
  readonly listsByStatus: boolean = true;

  constructor(options: RedisConnectionOptions) {
    const link = connect(options, 'RedisTaskStore');
    ({ client: this.client, owned: this.owned, timeoutMs: this.timeoutMs } = link);
    this.keys = new RedisKeys(link.prefix);
    this.scripts = withScripts(this.client);
    this.oneNode = !this.client.isCluster || this.keys.oneSlot;
    this.listing = new RedisTaskListing({
      client: this.client,
      keys: this.keys,
      scripts: this.scripts,
      call: (operation) => this.call(operation),
    });
  }

  /** The key of a task (for tests and operators, as the other key readers below). */
  keyOf(taskId: string): string {
    return this.keys.task(taskId);
  }

  /** Every task, scored by `createdAt`: the listing across owners. */
  get createdKey(): string {
    return this.keys.created;
  }

  /** The owner's count: the listing keys of its tasks, scored by expiry (see RESERVE). */
  quotaKey(owner: string): string {
    return this.keys.owner(owner).quota;
  }

  /** The listing keys of the owner's finished tasks, scored by expiry (see RESERVE). */
  doneKey(owner: string): string {
    return this.keys.owner(owner).done;
  }

  /** The listing index of an owner. */
  ownerIndexKey(owner: TaskOwner): string {
    return this.keys.owner(ownerKey(owner)).index;
  }

  /** The tasks an instance holds. */
  heldKey(instanceId: string): string {
    return this.keys.held(instanceId);
  }

  /**
   * One round trip where every key is on one node (a single Redis, Sentinel, or a Cluster under a
   * prefix with a hash tag): CREATE_ONE reserves, counts, gives up and indexes, and writes the
   * record with its expiry, atomically. On a Cluster under a plain prefix the task's key and the
   * rows lie in different slots: two round trips (see `createAcrossSlots`).
   */
  async create(record: TaskRecord, options: TaskStoreCreateOptions): Promise<void> {
    const fields = indexedFields(record);
    if (!this.oneNode) return this.createAcrossSlots(record, options, fields);
    const { maxRows, quota } = createLimits(options);
    const sets = this.keys.owner(fields.ownerKey);
    const task = this.keys.task(record.taskId);
    const status = await this.call(
      this.scripts.nestjsMcpTasksCreateOne(
        this.keys.rows,
        this.keys.created,
        sets.quota,
        sets.done,
        sets.index,
        task,
        fields.heldBy === null ? task : this.keys.held(fields.heldBy),
        Date.now(),
        maxRows ?? -1,
        quota ?? -1,
        record.createdAt,
        fields.listingKey,
        record.version,
        fields.expiresAt ?? '',
        encodeRecord(record),
        fields.ownerKey,
        record.status,
      ),
    );
    if (status !== CREATED) throw createRefusal(status, options);
  }

  /**
   * The create on a Redis Cluster whose prefix has no hash tag: the reservation (rows, the listing
   * across owners, the owner's count, in the slot of the rows), then the record (its own slot)
   * with the owner's listing entry (the owner's slot) and the deletion of the tasks given up.
   */
  private async createAcrossSlots(
    record: TaskRecord,
    options: TaskStoreCreateOptions,
    fields: IndexedFields,
  ): Promise<void> {
    const { expiresAt: at, listingKey: key } = fields;
    const score = scoreOf(at);
    const sets = this.keys.owner(fields.ownerKey);
    const { maxRows, quota } = createLimits(options);
    const [status, given, ...keys] = (await this.call(
      this.scripts.nestjsMcpTasksReserve(
        this.keys.rows,
        this.keys.created,
        sets.quota,
        sets.done,
        Date.now(),
        maxRows ?? -1,
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
    if (status !== CREATED) {
      await this.call(
        Promise.all([...evictions, keys.length > 0 ? this.client.zrem(index, ...keys) : undefined]),
      );
      throw createRefusal(status, options);
    }
    let written: number;
    try {
      // The owner's listing entry goes in the same round trip (another slot): should the write
      // fail, a listing drops the entry when it finds no task behind it.
      [written] = await this.call(
        Promise.all([
          this.scripts.nestjsMcpTasksCreate(
            this.keys.task(record.taskId),
            record.version,
            encodeRecord(record),
            at ?? '',
            fields.ownerKey,
            record.status,
            record.createdAt,
          ),
          this.scripts.nestjsMcpTasksIndex(index, key, at ?? '', ...keys),
          // A task an instance runs is held by it from this same round trip on.
          fields.heldBy === null
            ? undefined
            : this.client.zadd(this.keys.held(fields.heldBy), score, record.taskId),
          ...evictions,
        ]),
      );
    } catch (error) {
      // The row was reserved but the task not written: give the row back (best effort; an
      // orphan row only counts against maxRows until its expiry score passes), and its entries
      // in the listing across owners and the owner's count (orphans list nothing, and go with
      // their row or by their score).
      this.client.zrem(this.keys.rows, record.taskId).catch(() => undefined);
      this.client.zrem(this.keys.created, record.taskId).catch(() => undefined);
      this.client.zrem(sets.quota, key).catch(() => undefined);
      throw error;
    }
    if (written === 0) throw createRefusal(ID_TAKEN, options);
  }

  /**
   * Deletes a task RESERVE gave up to make room for its owner's new one, if it is finished. A
   * task still live (its finish entry was sent with a write that then lost the compare-and-set)
   * is counted again, in its row, the listing across owners and the quota: the owner may hold
   * one task above its quota until then, never loses a live task.
   */
  private async evict(entry: string, sets: OwnerSets): Promise<void> {
    const { taskId } = placeOfKey(entry);
    const reply = await this.scripts.nestjsMcpTasksEvict(this.keys.task(taskId));
    if (reply === 1) return;
    const record = decodeRecord(reply as string);
    if (isTerminal(record.status)) {
      // Written before statuses were kept beside the JSON: its JSON says it is finished.
      await this.client.del(this.keys.task(taskId));
      return;
    }
    const score = scoreOf(roomOrder(record));
    await this.client
      .multi()
      .zadd(this.keys.rows, score, taskId)
      .zadd(this.keys.created, record.createdAt, taskId)
      .zadd(sets.quota, score, entry)
      .exec();
    await this.client.zadd(sets.index, 0, entry);
  }

  /** An owner's tasks, newest first: its index read by RedisTaskListing. */
  list(owner: TaskOwner, options: TaskStoreListOptions): Promise<TaskListPage> {
    return this.listing.list(owner, options);
  }

  /** Every owner's tasks, newest first: the set of every task read by RedisTaskListing. */
  listAll(options: TaskStoreListAllOptions): Promise<TaskListPage> {
    return this.listing.listAll(options);
  }

  /** One PING, bounded by `timeoutMs` like every call. */
  async ping(): Promise<void> {
    await this.call(this.client.ping());
  }

  async get(taskId: string, owner?: TaskOwner): Promise<TaskRecord | null> {
    const key = this.keys.task(taskId);
    const json = await this.call(
      owner === undefined
        ? this.client.hget(key, 'j')
        : this.scripts.nestjsMcpTasksGetOwned(key, ownerKey(owner)),
    );
    if (json === null) return null;
    const record = decodeRecord(json);
    return visibleTo(record, owner) ? record : null;
  }

  async compareAndSet(
    record: TaskRecord,
    expectedVersion: number,
    options?: TaskStoreWriteOptions,
  ): Promise<boolean> {
    const fields = indexedFields(record);
    if (fields.terminal && this.oneNode) return this.setTerminal(record, expectedVersion, fields);
    const write = this.scripts.nestjsMcpTasksCompareAndSet(
      this.keys.task(record.taskId),
      expectedVersion,
      record.version,
      encodeRecord(record),
      record.status,
    );
    // A finished task without a TTL is kept until terminalTtlMs: it is remembered by the instant
    // it finished, sent together with the write (one round trip; the index lives in another
    // slot). Should the write lose, the entry is stale, and cleanup checks the record first.
    const since = fields.terminalAt;
    const remember =
      since === null ? undefined : this.client.zadd(this.keys.terminal, 'NX', since, record.taskId);
    // A task written terminal is no longer held, in the same round trip too. Should the write
    // lose, the task was changed by someone else meanwhile; the caller's retry writes it terminal
    // or finds it so, so dropping it early costs nothing.
    const release =
      fields.releasedBy === null
        ? undefined
        : this.client.zrem(this.keys.held(fields.releasedBy), record.taskId);
    // A finished task is one its owner's quota may give up, from this same round trip on (EVICT
    // checks the task itself, so an entry of a write that lost deletes nothing live).
    const finish = fields.terminal
      ? this.scripts.nestjsMcpTasksFinish(
          this.keys.owner(fields.ownerKey).done,
          scoreOf(fields.expiresAt),
          fields.listingKey,
        )
      : undefined;
    // A task taken over (a durable call resumed) is held by its new instance from this round trip
    // on. Should the write lose, the entry is stale: a sweep reads the record before it acts.
    const hold =
      options?.hold === true && fields.heldBy !== null && !fields.terminal
        ? this.client.zadd(this.keys.held(fields.heldBy), scoreOf(fields.expiresAt), record.taskId)
        : undefined;
    const [written] = await this.call(Promise.all([write, remember, release, finish, hold]));
    return written === 1;
  }

  /**
   * A terminal write where every key is on one node: the compare-and-set and the writes sent
   * beside it otherwise (see `compareAndSet`: the owner's finished set, the terminal set, the held
   * set) in one script, SET_TERMINAL, one command instead of two to four.
   */
  private async setTerminal(
    record: TaskRecord,
    expectedVersion: number,
    fields: IndexedFields,
  ): Promise<boolean> {
    const task = this.keys.task(record.taskId);
    const written = await this.call(
      this.scripts.nestjsMcpTasksSetTerminal(
        task,
        this.keys.owner(fields.ownerKey).done,
        fields.terminalAt === null ? task : this.keys.terminal,
        fields.releasedBy === null ? task : this.keys.held(fields.releasedBy),
        expectedVersion,
        record.version,
        encodeRecord(record),
        record.status,
        scoreOf(fields.expiresAt),
        fields.listingKey,
        fields.terminalAt ?? '',
        fields.releasedBy === null ? '' : '1',
        record.taskId,
      ),
    );
    return written === 1;
  }

  async renewLease(instanceId: string, ttlMs: number): Promise<string[]> {
    const expired = await this.call(
      this.scripts.nestjsMcpTasksRenewLease(
        this.keys.instances,
        this.keys.held(instanceId),
        instanceId,
        ttlMs,
      ),
    );
    return expired.filter((id) => id !== instanceId);
  }

  heldTasks(instanceId: string): Promise<string[]> {
    return this.call(this.client.zrange(this.keys.held(instanceId), '0', '-1'));
  }

  async releaseTasks(instanceId: string, taskIds: readonly string[]): Promise<boolean> {
    const forgotten = await this.call(
      this.scripts.nestjsMcpTasksReleaseTasks(
        this.keys.instances,
        this.keys.held(instanceId),
        instanceId,
        ...taskIds,
      ),
    );
    return forgotten === 1;
  }

  async releaseLease(instanceId: string): Promise<void> {
    await this.call(
      this.client
        .multi()
        .zrem(this.keys.instances, instanceId)
        .del(this.keys.held(instanceId))
        .exec(),
    );
  }

  /**
   * Two round trips: the task (its owner read as it goes), then its entries in the sets of every
   * task and of its owner.
   */
  async delete(taskId: string): Promise<boolean> {
    const found = await this.call(this.scripts.nestjsMcpTasksDelete(this.keys.task(taskId)));
    const removals = [
      this.client.zrem(this.keys.rows, taskId),
      this.client.zrem(this.keys.created, taskId),
      this.client.zrem(this.keys.terminal, taskId),
    ];
    const [owner, createdAt] = found ?? ['', ''];
    if (owner !== '' && createdAt !== '') {
      const entry = listingKey({ createdAt: Number(createdAt), taskId });
      const sets = this.keys.owner(owner);
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
    let removed = await removeInBatches(EXPIRE_ROWS_BATCH, () =>
      this.call(
        this.scripts.nestjsMcpTasksExpireRows(
          this.keys.rows,
          this.keys.created,
          now,
          EXPIRE_ROWS_BATCH,
        ),
      ),
    );
    // Finished tasks without a TTL, once terminalTtlMs old. An entry can be stale (its write
    // lost the compare-and-set): the record decides.
    const before = now - options.terminalTtlMs;
    const due = await this.call(this.client.zrangebyscore(this.keys.terminal, '-inf', before));
    for (const taskId of due) {
      const record = await this.get(taskId);
      const since = record === null ? null : terminalSince(record);
      if (record !== null && since === null) {
        await this.call(this.client.zrem(this.keys.terminal, taskId));
      } else if (since !== null && since > before) {
        await this.call(this.client.zadd(this.keys.terminal, 'XX', since, taskId));
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

  /** Bounds a call by `timeoutMs`; a failure names where Redis was sought (see `redisFault`). */
  private call<T>(operation: Promise<T>): Promise<T> {
    return withTimeout(operation, this.timeoutMs).catch((error: unknown) => {
      throw redisFault(this.client, 'RedisTaskStore', error);
    });
  }
}
