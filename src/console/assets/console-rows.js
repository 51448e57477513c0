/*
 * The task table's rows: one per task listed or heard, newest first, updated in place.
 */

import { openDetail } from './console-detail.js';
import { el, ownerText, statusPill, time } from './console-format.js';
import { $, state } from './console-state.js';

/** Newest first: by creation, then id, as the API lists. */
function newer(a, b) {
  if (a.createdAt !== b.createdAt) return a.createdAt > b.createdAt;
  return a.taskId > b.taskId;
}

function fillRow(row, task) {
  const id = el('code', `${task.taskId.slice(0, 10)}…`, undefined, { title: task.taskId });
  const cells = [
    id,
    task.toolName ?? '—',
    ownerText(task.owner),
    statusPill(task.status),
    task.statusMessage ?? '',
    time(task.createdAt),
    time(task.lastUpdatedAt),
  ];
  row.replaceChildren(
    ...cells.map((content, index) => {
      const cell = el(
        'td',
        undefined,
        ['id', 'tool', 'owner', 'state', 'message', 'created', 'updated'][index],
      );
      if (typeof content === 'string') cell.textContent = content;
      else cell.append(content);
      return cell;
    }),
  );
  row.dataset.status = task.status;
  row.setAttribute(
    'aria-label',
    `Task ${task.taskId}, ${task.toolName ?? 'no tool'}, ${task.status}`,
  );
}

function makeRow(task) {
  const row = document.createElement('tr');
  row.tabIndex = 0;
  row.dataset.taskId = task.taskId;
  row.addEventListener('click', () => openDetail(task.taskId));
  row.addEventListener('keydown', (event) => {
    if (event.key === 'Enter' || event.key === ' ') {
      event.preventDefault();
      openDetail(task.taskId);
    }
  });
  if (task.taskId === state.selected) row.setAttribute('aria-current', 'true');
  fillRow(row, task);
  return row;
}

/** Shows `task`: updates its row, or adds one in order. `append`: at the end (a page's order). */
export function upsert(task, append = false) {
  const shown = state.rows.get(task.taskId);
  if (shown) {
    if (task.version < shown.task.version) return;
    const changed = task.status !== shown.task.status;
    shown.task = task;
    fillRow(shown.row, task);
    if (changed) flash(shown.row);
    return;
  }
  const row = makeRow(task);
  const body = $('task-rows');
  let before = null;
  if (!append) {
    for (const candidate of body.children) {
      const other = state.rows.get(candidate.dataset.taskId);
      if (other && newer(task, other.task)) {
        before = candidate;
        break;
      }
    }
  }
  body.insertBefore(row, before);
  state.rows.set(task.taskId, { task, row });
  if (!append) flash(row);
  $('empty').hidden = true;
}

function flash(row) {
  row.classList.remove('changed');
  void row.offsetWidth;
  row.classList.add('changed');
}

export function clearTable() {
  state.rows.clear();
  $('task-rows').replaceChildren();
  state.nextCursor = undefined;
  state.loadedMore = false;
}

export function matchesFilters(task) {
  const { status, tool, owner, tenant } = state.filters;
  if (status && !status.split(',').includes(task.status)) return false;
  if (tool && task.toolName !== tool) return false;
  if (owner && (task.owner.principal !== owner || task.owner.tenant !== (tenant || null))) {
    return false;
  }
  return true;
}

/** Whether a task would sit past the rows loaded while more pages remain (it comes with them). */
export function beyondLoaded(task) {
  if (state.nextCursor === undefined) return false;
  const rows = $('task-rows').children;
  const last = rows[rows.length - 1];
  const oldest = last && state.rows.get(last.dataset.taskId);
  return oldest !== undefined && newer(oldest.task, task);
}
