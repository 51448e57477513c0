import type { TaskStore } from '../store/task-store.js';
import { isOwnedBy, type TaskOwner, type TaskRecord } from '../task.js';

/**
 * The two ownership checks of a listen stream, in one place. A stream only ever hears about tasks
 * its principal owns:
 *
 * 1. when the filter is honoured, the requested ids are narrowed to the caller's own tasks,
 *    through the store port (unknown, expired and foreign ids are dropped alike, so the
 *    acknowledgement reveals nothing about other principals' tasks);
 * 2. when a change is delivered, its record's owner is compared with the stream's again, so a
 *    change that reaches the feed for a watched id can still only go to its owner.
 */
export const ListenOwnership = {
  async ownTaskIds(
    store: TaskStore,
    taskIds: readonly string[],
    owner: TaskOwner,
  ): Promise<string[]> {
    const unique = [...new Set(taskIds)];
    const found = await Promise.all(unique.map((taskId) => store.get(taskId, owner)));
    return unique.filter((_, i) => found[i] !== null);
  },

  mayReceive(record: TaskRecord, owner: TaskOwner): boolean {
    return isOwnedBy(record, owner);
  },
} as const;
