import { isExpired, isOwnedBy, type TaskOwner, type TaskRecord } from '../task.js';
import { CreationIndex } from './creation-index.js';
import {
  cursorKey,
  endPage,
  listingFilter,
  listingKey,
  ownerKey,
  placeOfKey,
} from './task-listing.js';
import type { TaskListPage, TaskStoreListAllOptions, TaskStoreListOptions } from './task-store.js';

/**
 * Index entries one `list` or `listAll` page looks at most: a filter that matches few tasks ends
 * the page there, short, with a cursor to go on.
 */
const LIST_LOOKS = 10_000;

/**
 * The listings of InMemoryTaskStore: an index by creation (`CreationIndex`) per owner, and one of
 * every task for the operator's listing across owners. It reads the store's records; the store
 * tells it of each task added and removed.
 */
export class InMemoryListing {
  /**
   * Each owner's tasks by creation, for `list`. Entries of removed tasks stay until they pile up
   * (then one pass compacts every owner's index and forgets the owners left without tasks), so
   * removal never searches an index.
   */
  private readonly byOwner = new Map<string, CreationIndex>();
  private ownerStale = 0;
  /** Every task by creation, for `listAll`. */
  private readonly byCreation = new CreationIndex();

  /** `tasks`: the store's records by id, which the listings read and never change. */
  constructor(private readonly tasks: ReadonlyMap<string, TaskRecord>) {}

  /** Lists a task just stored, under its owner (by its ownerKey) and among every task. */
  add(record: TaskRecord, owner: string): void {
    this.ownedBy(owner).add(record.createdAt, record.taskId);
    this.byCreation.add(record.createdAt, record.taskId);
  }

  /**
   * Notes a task the store removed; its entries go later: once removed tasks have left as many
   * entries as there are live tasks, one pass compacts every owner's index (amortised O(1) per
   * removal) and forgets the owners it leaves empty.
   */
  removed(): void {
    this.byCreation.noteRemoved(this.listed);
    if (++this.ownerStale >= 1024 && this.ownerStale * 2 >= this.tasks.size) {
      for (const [key, owned] of this.byOwner) {
        // Listed under this owner: stored, not re-created since, and still this owner's.
        owned.compact((createdAt, taskId) => {
          const task = this.tasks.get(taskId);
          return task?.createdAt === createdAt && ownerKey(task.owner) === key;
        });
        if (owned.size === 0) this.byOwner.delete(key);
      }
      this.ownerStale = 0;
    }
  }

  /** Forgets every entry. */
  clear(): void {
    this.byOwner.clear();
    this.byCreation.clear();
    this.ownerStale = 0;
  }

  /** Walks the owner's creation index down from the cursor, as `listAll` walks every task's. */
  list(owner: TaskOwner, options: TaskStoreListOptions): TaskListPage {
    const after = cursorKey(options);
    const owned = this.byOwner.get(ownerKey(owner));
    if (owned === undefined) return { tasks: [] };
    const keep = listingFilter(options.status);
    return this.page(
      owned,
      after,
      options.limit,
      (record) => isOwnedBy(record, owner) && (keep === undefined || keep(record)),
    );
  }

  /** Walks the creation index of every task down from the cursor. */
  listAll(options: TaskStoreListAllOptions): TaskListPage {
    const after = cursorKey(options);
    return this.page(
      this.byCreation,
      after,
      options.limit,
      listingFilter(options.status, options.toolName),
    );
  }

  /**
   * One page from `index`, after the listing key `after`: O(log n) to find the place, then
   * O(entries looked at), at most LIST_LOOKS. An entry is skipped when its task is gone, was
   * re-created since, has expired, or `keep` refuses it. The walk stops at a match beyond the page
   * (more follow) or after LIST_LOOKS entries (the next page goes on after the last of them).
   */
  private page(
    index: CreationIndex,
    after: string | undefined,
    limit: number,
    keep: ((record: TaskRecord) => boolean) | undefined,
  ): TaskListPage {
    let from = index.size;
    if (after !== undefined) {
      const place = placeOfKey(after);
      from = index.below(place.createdAt, place.taskId);
    }
    const now = Date.now();
    const matches: TaskRecord[] = [];
    let looks = 0;
    let last = '';
    const stopped = index.walkDown(from, (createdAt, taskId) => {
      if (looks++ === LIST_LOOKS) return false;
      last = listingKey({ createdAt, taskId });
      const record = this.tasks.get(taskId);
      if (record === undefined || record.createdAt !== createdAt || isExpired(record, now)) {
        return true;
      }
      if (keep !== undefined && !keep(record)) return true;
      matches.push(record);
      return matches.length <= limit;
    });
    return endPage(matches, limit, stopped < 0 ? undefined : last);
  }

  /** Whether an entry of `byCreation` is a stored task's (not one removed, or since re-created). */
  private readonly listed = (createdAt: number, taskId: string): boolean =>
    this.tasks.get(taskId)?.createdAt === createdAt;

  /** The creation index of an owner (by its ownerKey), made on first use. */
  private ownedBy(key: string): CreationIndex {
    let index = this.byOwner.get(key);
    if (index === undefined) this.byOwner.set(key, (index = new CreationIndex()));
    return index;
  }
}
