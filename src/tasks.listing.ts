import { InvalidTaskParamsError } from './errors.js';
import type { TaskListPage, TaskStoreListOptions } from './store/task-store.js';
import { type TaskRecord, type TaskState, validateStatusFilter } from './task.js';

/*
 * The listings of TasksService (`list`, and `listAll` for an operator's console): their options,
 * checked, and the status filter for a store that does not filter itself.
 */

export interface ListTasksOptions {
  /** The `nextCursor` of the previous page. */
  cursor?: string;
  /** Page size, 1–100. Default 50. */
  limit?: number;
  /** Only tasks in this state, or in one of these states. Default: every state. */
  status?: TaskState | TaskState[];
}

export interface ListAllTasksOptions extends ListTasksOptions {
  /** Only tasks made by this tool (their record's `toolName`). Default: every task. */
  toolName?: string;
}

/** Page size of `list` when none is asked for, and the most one page holds. */
export const DEFAULT_LIST_LIMIT = 50;
export const MAX_LIST_LIMIT = 100;
/** Store pages one `list` call reads at most when it filters by status for the store. */
const LIST_FILTER_READS = 4;

/** One read of the store's listing (its `list` or `listAll`). */
export type ListRead = (options: TaskStoreListOptions) => Promise<TaskListPage>;

/** What a listing asks for, checked. */
export interface ListQuery {
  cursor: string | undefined;
  limit: number;
  status: TaskState[] | undefined;
}

/** The cursor, page size and status filter of `list` and `listAll`, checked (else -32602). */
export function validateListOptions(options: ListTasksOptions): ListQuery {
  const { cursor, limit = DEFAULT_LIST_LIMIT } = options;
  if (cursor !== undefined && typeof cursor !== 'string') {
    throw new InvalidTaskParamsError('Invalid params: cursor must be a string');
  }
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIST_LIMIT) {
    throw new InvalidTaskParamsError(
      `Invalid params: limit must be an integer from 1 to ${MAX_LIST_LIMIT}`,
    );
  }
  return { cursor, limit, status: validateStatusFilter(options.status) };
}

/**
 * One page through `read` (the store's `list` or `listAll`): the store filters by `status`
 * when it says so (`listsByStatus`), else `listFiltering` does.
 */
export async function listThrough(
  read: ListRead,
  { cursor, limit, status }: ListQuery,
  listsByStatus: boolean,
): Promise<TaskListPage> {
  if (status !== undefined && !listsByStatus) {
    return await listFiltering(read, status, limit, cursor);
  }
  return await read({
    limit,
    ...(cursor !== undefined && { cursor }),
    ...(status !== undefined && { status }),
  });
}

/**
 * The status filter for a store that does not filter itself: reads the store's unfiltered
 * pages (`read`: its `list` or `listAll`) and keeps the matching tasks. Each read asks for no
 * more tasks than the page still lacks, so no page is cut short of what it read and the store's
 * own cursor is where the next page goes on (a cursor stays the store's, opaque here). At most
 * LIST_FILTER_READS reads per call; a page that is not full then ends with the cursor of the
 * last read.
 */
async function listFiltering(
  read: ListRead,
  status: readonly TaskState[],
  limit: number,
  cursor: string | undefined,
): Promise<TaskListPage> {
  const wanted = new Set(status);
  const tasks: TaskRecord[] = [];
  let next = cursor;
  for (let reads = 0; reads < LIST_FILTER_READS && tasks.length < limit; reads++) {
    const page = await read({
      limit: limit - tasks.length,
      ...(next !== undefined && { cursor: next }),
    });
    for (const task of page.tasks) if (wanted.has(task.status)) tasks.push(task);
    next = page.nextCursor;
    if (next === undefined) break;
  }
  return { tasks: tasks.slice(0, limit), ...(next !== undefined && { nextCursor: next }) };
}
