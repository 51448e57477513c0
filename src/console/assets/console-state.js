/*
 * The task console's shared state: where its API is, what the page shows, and the page's elements.
 */

export const API = new URL('./api/', import.meta.url);
export const STATES = ['working', 'input_required', 'completed', 'failed', 'cancelled'];
export const TERMINAL = new Set(['completed', 'failed', 'cancelled']);

export const $ = (id) => document.getElementById(id);

export const state = {
  /** The filters applied: status, tool, owner, tenant (empty strings left out). */
  filters: {},
  /** taskId -> { task, row } for every row shown. */
  rows: new Map(),
  /** Where "Load more" goes on; undefined when the listing has ended. */
  nextCursor: undefined,
  /** Whether more than the first page was loaded (then refreshes leave the cursor alone). */
  loadedMore: false,
  /** The task whose detail is open. */
  selected: undefined,
  /** Bumped by each new listing, so a late answer to an old one is dropped. */
  generation: 0,
  /** New filters were applied and the table is not yet cleared for them. */
  resetPending: false,
  detailTimer: undefined,
};
