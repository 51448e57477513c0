import {
  endPage,
  listingFilter,
  listingKey,
  ownerKey,
  placeOfKey,
  cursorKey,
} from '../store/task-listing.js';
import { decodeRecord } from '../store/store-rules.js';
import type {
  TaskListPage,
  TaskStoreListAllOptions,
  TaskStoreListOptions,
} from '../store/task-store.js';
import { isExpired, isOwnedBy, type TaskOwner, type TaskRecord } from '../task.js';
import type { RedisClient } from './redis-connection.js';
import type { RedisKeys } from './redis-keys.js';
import type { ScriptClient } from './redis.scripts.js';

/** What a listing reads through: the store's client, keys and scripts, each call bounded. */
export interface RedisListingAccess {
  readonly client: RedisClient;
  readonly keys: RedisKeys;
  readonly scripts: ScriptClient;
  /** Bounds a call by the store's `timeoutMs`. */
  readonly call: <T>(operation: Promise<T>) => Promise<T>;
}

/** Listing keys read (newest first) and, aligned with them, their records or `null`. */
interface ListingRead {
  keys: string[];
  records: (TaskRecord | null)[];
}

/** Index entries a filtered listing reads per round trip pair, at least (see `list`). */
const FILTERED_LIST_BATCH = 100;
/** Batches a filtered listing reads per call at most: its round trips are twice this. */
const FILTERED_LIST_BATCHES = 3;

/**
 * The listings of RedisTaskStore: an owner's (its index, a sorted set of listing keys) and the
 * operator's across owners (the set of every task scored by `createdAt`), page by page. How the
 * store writes those sets is in RedisTaskStore; how they are read, batched and filtered is here.
 */
export class RedisTaskListing {
  constructor(private readonly redis: RedisListingAccess) {}

  /**
   * Unfiltered, two round trips: the page of listing keys, then the page's records. With a status
   * filter the index is read in batches of `max(limit, 100)` entries, two round trips each, until
   * `limit` tasks match; at most 3 batches per call (6 round trips), after which the page ends
   * where the reading stopped, shorter than `limit`, with a `nextCursor` to go on from there.
   */
  async list(owner: TaskOwner, options: TaskStoreListOptions): Promise<TaskListPage> {
    const index = this.redis.keys.owner(ownerKey(owner)).index;
    return this.page(
      (last, count) => this.readListing(owner, index, last, count),
      cursorKey(options),
      options.limit,
      listingFilter(options.status),
    );
  }

  /**
   * Reads the set of every task as `list` reads an owner's index: two round trips unfiltered (a
   * script that finds the cursor's place and reads the page of ids, then the records), batches of
   * `max(limit, 100)` entries with a status or tool filter, at most 3 per call.
   */
  async listAll(options: TaskStoreListAllOptions): Promise<TaskListPage> {
    return this.page(
      (last, count) => this.readCreated(last, count),
      cursorKey(options),
      options.limit,
      listingFilter(options.status, options.toolName),
    );
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
      const tasks = records.filter((record): record is TaskRecord => record !== null);
      return endPage(tasks, limit, keys.length === limit ? keys[keys.length - 1] : undefined);
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
        if (tasks.length === limit) return endPage(tasks, limit, last);
      }
      if (keys.length < batch) return endPage(tasks, limit, undefined);
    }
    return endPage(tasks, limit, last);
  }

  /**
   * Up to `count` entries of the listing across owners below `after` (newest first) and, aligned
   * with them, their records (`null` for a task gone or expired). Two round trips. Entries of
   * tasks that are gone stay: the row is reserved (and listed) just before the task is written,
   * so an entry without its task may be one being created; they go with their rows.
   */
  private async readCreated(after: string | undefined, count: number): Promise<ListingRead> {
    const place = after === undefined ? undefined : placeOfKey(after);
    const reply = await this.redis.call(
      this.redis.scripts.nestjsMcpTasksListAll(
        this.redis.keys.created,
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
    if (this.redis.client.isCluster) {
      jsons = await this.redis.call(
        Promise.all(ids.map((id) => this.redis.client.hget(this.redis.keys.task(id), 'j'))),
      );
    } else {
      const pipeline = this.redis.client.pipeline();
      for (const taskId of ids) pipeline.hget(this.redis.keys.task(taskId), 'j');
      const replies = (await this.redis.call(pipeline.exec())) ?? [];
      jsons = replies.map(([error, json]) => {
        if (error) throw error;
        return json as string | null;
      });
    }
    const now = Date.now();
    return jsons.map((json) => {
      const record = json === null ? null : decodeRecord(json);
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
    const keys = await this.redis.call(
      this.redis.client.zrange(
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
    if (gone.length > 0) this.redis.client.zrem(index, ...gone).catch(() => undefined);
    const records = live.map((record) =>
      record !== null && isOwnedBy(record, owner) ? record : null,
    );
    return { keys, records };
  }
}
