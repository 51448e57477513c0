/*
 * Listing tasks from the API into the table: the filters, the first page (again on each refresh),
 * "Load more", and the notice and footer that tell how it went.
 */

import { ApiError, isRefusal, request } from './console-api.js';
import { timeFormat } from './console-format.js';
import { clearTable, upsert } from './console-rows.js';
import { $, state } from './console-state.js';

const PAGE_SIZE = 50;

function listingPath(cursor) {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(state.filters)) params.set(key, value);
  params.set('limit', String(PAGE_SIZE));
  if (cursor !== undefined) params.set('cursor', cursor);
  return `tasks?${params}`;
}
function showNotice(text) {
  const notice = $('notice');
  notice.textContent = text;
  notice.hidden = false;
}

export function hideNotice() {
  $('notice').hidden = true;
}

function updateFooter() {
  $('more').hidden = state.nextCursor === undefined;
  $('empty').hidden = state.rows.size !== 0;
  $('listed').textContent = `Listed ${timeFormat.format(new Date())}`;
}

function listingFailed(error) {
  if (isRefusal(error)) return; // the sign-in form says why
  if (error instanceof ApiError && error.body && error.body.ownerRequired) {
    showNotice(
      `${error.message}. The task store cannot list every owner's tasks: enter an owner above.`,
    );
    $('filter-owner').focus();
  } else {
    showNotice(`Could not list tasks: ${error.message}`);
  }
}

/**
 * Lists from the top again: `reset` clears the table first (new filters); otherwise the first
 * page is merged into the rows shown (a refresh). A reset still pending when a refresh answers
 * first is done by that refresh.
 */
export async function list(reset) {
  if (reset) state.resetPending = true;
  const generation = ++state.generation;
  try {
    const page = await request(listingPath());
    if (generation !== state.generation) return;
    hideNotice();
    const resetting = state.resetPending;
    state.resetPending = false;
    if (resetting) clearTable();
    for (const task of page.tasks) upsert(task, resetting);
    if (resetting || !state.loadedMore) state.nextCursor = page.nextCursor;
    updateFooter();
  } catch (error) {
    if (generation !== state.generation) return;
    if (state.resetPending) clearTable();
    state.resetPending = false;
    listingFailed(error);
    updateFooter();
  }
}

export async function loadMore() {
  const button = $('more');
  if (state.nextCursor === undefined) return;
  button.disabled = true;
  const generation = state.generation;
  try {
    const page = await request(listingPath(state.nextCursor));
    if (generation !== state.generation) return;
    for (const task of page.tasks) upsert(task, true);
    state.nextCursor = page.nextCursor;
    state.loadedMore = true;
    updateFooter();
  } catch (error) {
    listingFailed(error);
  } finally {
    button.disabled = false;
  }
}

export function readFilters() {
  const filters = {};
  const status = $('filter-status').value;
  const tool = $('filter-tool').value.trim();
  const owner = $('filter-owner').value.trim();
  const tenant = $('filter-tenant').value.trim();
  if (status) filters.status = status;
  if (tool) filters.tool = tool;
  if (owner) filters.owner = owner;
  if (owner && tenant) filters.tenant = tenant;
  state.filters = filters;
}
