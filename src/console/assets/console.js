/*
 * The task console's page script: plain ES module, no framework, no build step. It lists tasks
 * from the console's JSON API, follows its change stream (Server-Sent Events), and re-lists every
 * few seconds for what the stream cannot carry (a creation on another instance, an app without a
 * notifier). Task data is only ever put in the page as text (textContent), never as HTML.
 */

const API = new URL('./api/', import.meta.url);
const REFRESH_MS = 5000;
const RECONNECT_MS = 5000;
const PAGE_SIZE = 50;
const STATES = ['working', 'input_required', 'completed', 'failed', 'cancelled'];
const TERMINAL = new Set(['completed', 'failed', 'cancelled']);

const $ = (id) => document.getElementById(id);

const state = {
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

// ----- HTTP ---------------------------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, body) {
    super(body && typeof body.message === 'string' ? body.message : `HTTP ${status}`);
    this.status = status;
    this.body = body;
  }
}

async function request(path, { method = 'GET', json } = {}) {
  const headers = { accept: 'application/json' };
  if (json !== undefined) headers['content-type'] = 'application/json';
  const response = await fetch(new URL(path, API), {
    method,
    headers,
    credentials: 'same-origin',
    cache: 'no-store',
    ...(json !== undefined && { body: JSON.stringify(json) }),
  });
  let body;
  try {
    body = await response.json();
  } catch {
    body = undefined;
  }
  if (!response.ok) throw new ApiError(response.status, body);
  return body;
}

function listingPath(cursor) {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(state.filters)) params.set(key, value);
  params.set('limit', String(PAGE_SIZE));
  if (cursor !== undefined) params.set('cursor', cursor);
  return `tasks?${params}`;
}

// ----- Formatting -----------------------------------------------------------------------------------

const timeFormat = new Intl.DateTimeFormat(undefined, {
  hour: '2-digit',
  minute: '2-digit',
  second: '2-digit',
});
const dateTimeFormat = new Intl.DateTimeFormat(undefined, {
  dateStyle: 'medium',
  timeStyle: 'medium',
});

function shortTime(iso) {
  const date = new Date(iso);
  const today = new Date().toDateString() === date.toDateString();
  return today ? timeFormat.format(date) : dateTimeFormat.format(date);
}

function duration(ms) {
  if (ms === null || ms === undefined) return 'none';
  if (ms < 1000) return `${ms} ms`;
  const seconds = ms / 1000;
  if (seconds < 120) return `${Number(seconds.toFixed(1))} s`;
  const minutes = seconds / 60;
  if (minutes < 120) return `${Number(minutes.toFixed(1))} min`;
  return `${Number((minutes / 60).toFixed(1))} h`;
}

function ownerText(owner) {
  const principal = owner.principal === null ? 'anonymous' : owner.principal;
  return owner.tenant === null ? principal : `${principal} (${owner.tenant})`;
}

/** An element with text content (never HTML) and optional class and attributes. */
function el(tag, text, className, attributes = {}) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (className) node.className = className;
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
  return node;
}

function statusPill(status) {
  const known = STATES.includes(status) ? status : 'unknown';
  return el('span', status.replace('_', ' '), `status status-${known}`);
}

function time(iso) {
  return el('time', shortTime(iso), undefined, { datetime: iso, title: iso });
}

// ----- The table ----------------------------------------------------------------------------------

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
function upsert(task, append = false) {
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

function clearTable() {
  state.rows.clear();
  $('task-rows').replaceChildren();
  state.nextCursor = undefined;
  state.loadedMore = false;
}

function matchesFilters(task) {
  const { status, tool, owner, tenant } = state.filters;
  if (status && !status.split(',').includes(task.status)) return false;
  if (tool && task.toolName !== tool) return false;
  if (owner && (task.owner.principal !== owner || task.owner.tenant !== (tenant || null))) {
    return false;
  }
  return true;
}

/** Whether a task would sit past the rows loaded while more pages remain (it comes with them). */
function beyondLoaded(task) {
  if (state.nextCursor === undefined) return false;
  const rows = $('task-rows').children;
  const last = rows[rows.length - 1];
  const oldest = last && state.rows.get(last.dataset.taskId);
  return oldest !== undefined && newer(oldest.task, task);
}

// ----- Listing ------------------------------------------------------------------------------------

function showNotice(text) {
  const notice = $('notice');
  notice.textContent = text;
  notice.hidden = false;
}

function hideNotice() {
  $('notice').hidden = true;
}

function updateFooter() {
  $('more').hidden = state.nextCursor === undefined;
  $('empty').hidden = state.rows.size !== 0;
  $('listed').textContent = `Listed ${timeFormat.format(new Date())}`;
}

function listingFailed(error) {
  if (error instanceof ApiError && error.body && error.body.ownerRequired) {
    showNotice(
      `${error.message}. The task store cannot list every owner's tasks: enter an owner above.`,
    );
    $('filter-owner').focus();
  } else if (error instanceof ApiError && error.status === 403) {
    showNotice('You are not allowed to use this console.');
  } else {
    showNotice(`Could not list tasks: ${error.message}`);
  }
}

/**
 * Lists from the top again: `reset` clears the table first (new filters); otherwise the first
 * page is merged into the rows shown (a refresh). A reset still pending when a refresh answers
 * first is done by that refresh.
 */
async function list(reset) {
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

async function loadMore() {
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

function readFilters() {
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

// ----- Detail -------------------------------------------------------------------------------------

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

async function openDetail(taskId) {
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

async function refreshDetail() {
  const taskId = state.selected;
  if (taskId === undefined) return;
  try {
    const task = await request(`tasks/${encodeURIComponent(taskId)}`);
    if (state.selected !== taskId) return;
    renderDetail(task);
  } catch (error) {
    if (state.selected !== taskId) return;
    const message =
      error instanceof ApiError && error.status === 404
        ? 'This task no longer exists (it expired or was removed).'
        : `Could not load the task: ${error.message}`;
    $('detail-body').replaceChildren(el('p', message, 'notice'));
  }
}

function closeDetail() {
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
    button.disabled = false;
    button.textContent = 'Cancel task';
    const problem = el('p', `Could not cancel: ${error.message}`, 'notice', { role: 'alert' });
    button.parentElement.append(problem);
  }
}

// ----- Live updates -------------------------------------------------------------------------------

function setConnection(which, text) {
  const indicator = $('connection');
  indicator.dataset.state = which;
  $('connection-text').textContent = text;
}

function heard(task) {
  if (state.rows.has(task.taskId)) upsert(task);
  else if (matchesFilters(task) && !beyondLoaded(task)) upsert(task);
  if (state.selected === task.taskId) {
    clearTimeout(state.detailTimer);
    state.detailTimer = setTimeout(refreshDetail, 150);
  }
}

function connect() {
  setConnection('connecting', 'Connecting…');
  const source = new EventSource(new URL('stream', API));
  source.addEventListener('open', () => {
    setConnection('live', 'Live');
    void list(false);
  });
  source.addEventListener('task', (event) => {
    let task;
    try {
      task = JSON.parse(event.data);
    } catch {
      return;
    }
    heard(task);
  });
  source.addEventListener('error', () => {
    if (source.readyState === EventSource.CLOSED) {
      setConnection('offline', 'Offline, retrying');
      setTimeout(connect, RECONNECT_MS);
    } else {
      setConnection('reconnecting', 'Reconnecting…');
    }
  });
}

// ----- Start --------------------------------------------------------------------------------------

function start() {
  $('filters').addEventListener('submit', (event) => {
    event.preventDefault();
    readFilters();
    void list(true);
  });
  $('filters').addEventListener('reset', () => {
    setTimeout(() => {
      readFilters();
      void list(true);
    });
  });
  $('filter-status').addEventListener('change', () => {
    readFilters();
    void list(true);
  });
  $('more').addEventListener('click', () => void loadMore());
  $('close-detail').addEventListener('click', closeDetail);
  document.addEventListener('keydown', (event) => {
    if (event.key === 'Escape' && state.selected !== undefined) closeDetail();
  });
  readFilters();
  void list(true);
  connect();
  setInterval(() => {
    if (document.visibilityState === 'visible') void list(false);
  }, REFRESH_MS);
}

start();
