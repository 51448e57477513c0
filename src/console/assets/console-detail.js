/*
 * The detail panel of one task: its facts, the history this instance heard, its input requests,
 * result or error, and the Cancel button.
 */

import { ApiError, isRefusal, request } from './console-api.js';
import { dateTimeFormat, duration, el, statusPill, time } from './console-format.js';
import { upsert } from './console-rows.js';
import { $, state, TERMINAL } from './console-state.js';

function field(list, label, value) {
  list.append(el('dt', label));
  const dd = el('dd');
  if (value instanceof Node) dd.append(value);
  else dd.textContent = value === null || value === undefined || value === '' ? '—' : String(value);
  list.append(dd);
}

function jsonBlock(value) {
  return el('pre', JSON.stringify(value, null, 2), 'json');
}

function section(title, ...content) {
  const part = el('section', undefined, 'detail-section');
  part.append(el('h3', title), ...content);
  return part;
}

function renderDetail(task) {
  const body = $('detail-body');
  const facts = el('dl', undefined, 'facts');
  field(facts, 'Task id', el('code', task.taskId, 'task-id'));
  field(facts, 'Tool', task.toolName);
  field(facts, 'Owner', task.owner.principal === null ? 'anonymous' : task.owner.principal);
  field(facts, 'Tenant', task.owner.tenant);
  field(facts, 'Status', statusPill(task.status));
  field(facts, 'Status message', task.statusMessage);
  field(facts, 'Created', dateTimeFormat.format(new Date(task.createdAt)));
  field(facts, 'Last updated', dateTimeFormat.format(new Date(task.lastUpdatedAt)));
  field(facts, 'TTL', duration(task.ttlMs));
  field(
    facts,
    'Expires',
    task.expiresAt ? dateTimeFormat.format(new Date(task.expiresAt)) : 'never',
  );
  if (task.cancelRequested)
    field(facts, 'Cancellation', 'requested, the worker has not honoured it yet');

  const parts = [facts];
  if (!TERMINAL.has(task.status)) {
    const cancel = el('button', 'Cancel task', 'danger', { type: 'button', id: 'cancel-task' });
    cancel.addEventListener('click', () => cancelTask(task.taskId, cancel));
    parts.push(el('div', undefined, 'actions'));
    parts[parts.length - 1].append(cancel);
  }

  const history = el('ol', undefined, 'history');
  for (const change of task.history) {
    const item = el('li');
    item.append(time(change.at), ' ', statusPill(change.status));
    if (change.statusMessage) item.append(' ', el('span', change.statusMessage, 'history-message'));
    history.append(item);
  }
  const historyNote = el(
    'p',
    'The changes this server instance heard since it started (the last 20). Tasks keep no ' +
      'history of their own: earlier changes, and changes made on other instances that were not ' +
      'shared with this one, are not listed.',
    'note',
  );
  parts.push(
    section(
      'Status history, as seen by this instance',
      historyNote,
      task.history.length ? history : el('p', 'Nothing heard yet.', 'muted'),
    ),
  );

  if (task.inputRequests && Object.keys(task.inputRequests).length) {
    const requests = el('dl', undefined, 'requests');
    for (const [key, inputRequest] of Object.entries(task.inputRequests)) {
      requests.append(el('dt', `${key} · ${inputRequest.method ?? 'request'}`));
      const dd = el('dd');
      dd.append(jsonBlock(inputRequest.params ?? inputRequest));
      requests.append(dd);
    }
    parts.push(section('Waiting for input', requests));
  }
  if (task.result !== null) parts.push(section('Result', jsonBlock(task.result)));
  if (task.error !== null) parts.push(section('Error', jsonBlock(task.error)));
  if (task.argumentsKept)
    parts.push(section('Arguments (as the tool kept them)', jsonBlock(task.arguments)));

  body.replaceChildren(...parts);
  $('detail-heading').textContent = task.toolName ? `Task · ${task.toolName}` : 'Task';
}

export async function openDetail(taskId) {
  state.selected = taskId;
  for (const { row } of state.rows.values()) {
    if (row.dataset.taskId === taskId) row.setAttribute('aria-current', 'true');
    else row.removeAttribute('aria-current');
  }
  const detail = $('detail');
  detail.hidden = false;
  document.body.classList.add('with-detail');
  await refreshDetail();
}

export async function refreshDetail() {
  const taskId = state.selected;
  if (taskId === undefined) return;
  try {
    const task = await request(`tasks/${encodeURIComponent(taskId)}`);
    if (state.selected !== taskId) return;
    renderDetail(task);
  } catch (error) {
    if (state.selected !== taskId || isRefusal(error)) return;
    const message =
      error instanceof ApiError && error.status === 404
        ? 'This task no longer exists (it expired or was removed).'
        : `Could not load the task: ${error.message}`;
    $('detail-body').replaceChildren(el('p', message, 'notice'));
  }
}

export function closeDetail() {
  state.selected = undefined;
  $('detail').hidden = true;
  document.body.classList.remove('with-detail');
  for (const { row } of state.rows.values()) row.removeAttribute('aria-current');
}

async function cancelTask(taskId, button) {
  button.disabled = true;
  button.textContent = 'Cancelling…';
  try {
    const task = await request(`tasks/${encodeURIComponent(taskId)}/cancel`, {
      method: 'POST',
      json: {},
    });
    upsert(task);
    if (state.selected === taskId) renderDetail(task);
  } catch (error) {
    if (isRefusal(error)) return;
    button.disabled = false;
    button.textContent = 'Cancel task';
    const problem = el('p', `Could not cancel: ${error.message}`, 'notice', { role: 'alert' });
    button.parentElement.append(problem);
  }
}
