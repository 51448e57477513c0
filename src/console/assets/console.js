/*
 * The task console's page script: plain ES module, no framework, no build step. It lists tasks
 * from the console's JSON API, follows its change stream (Server-Sent Events, read with fetch so
 * that it carries the same credentials as every other request), and re-lists every few seconds
 * for what the stream cannot carry (a creation on another instance, an app without a notifier).
 * Task data is only ever put in the page as text (textContent), never as HTML.
 *
 * Credentials: the browser's own (HTTP Basic, cookies) go with every request as they would with
 * any page. When the API refuses (401, 403), the page asks for a bearer token, keeps it in this
 * tab's sessionStorage (never localStorage, a cookie or a URL), and sends it as
 * `Authorization: Bearer …` on every API and stream request until Sign out or a refusal.
 */

const API = new URL('./api/', import.meta.url);
const REFRESH_MS = 5000;
/** The stream's first reconnection delay until the server's `retry:` says otherwise. */
const RETRY_MS = 3000;
const MAX_RETRY_MS = 30000;
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

// ----- Signing in ---------------------------------------------------------------------------------

/** Where this tab keeps its bearer token: sessionStorage, one key per console path. */
const TOKEN_KEY = `nestjs-mcp-tasks console token ${API.pathname}`;

const auth = {
  /** This tab's bearer token; undefined: the browser sends its own credentials (Basic, cookies). */
  token: readToken(),
  /** The sign-in form is up: nothing is listed or streamed until it is answered. */
  signingIn: false,
};

function readToken() {
  try {
    return sessionStorage.getItem(TOKEN_KEY) ?? undefined;
  } catch {
    return undefined;
  }
}

function keepToken(token) {
  auth.token = token;
  try {
    if (token === undefined) sessionStorage.removeItem(TOKEN_KEY);
    else sessionStorage.setItem(TOKEN_KEY, token);
  } catch {
    // No storage (a sandboxed frame): the token lives as long as the page.
  }
}

/** The request's headers, with `Authorization: Bearer` when this tab has a token. */
function headersFor(headers) {
  if (auth.token !== undefined) headers.authorization = `Bearer ${auth.token}`;
  return headers;
}

const isRefusal = (error) => error instanceof ApiError && [401, 403].includes(error.status);

/**
 * The API refused a request sent with `token` (this tab's token then, or none): the stored token
 * is dropped and the sign-in form shown, saying why. A refusal of a request sent before the last
 * sign-in, or while the form is already up, is ignored.
 */
function refused(error, token) {
  if (auth.signingIn || token !== auth.token) return;
  keepToken(undefined);
  const needed = 'This console needs a bearer token.';
  if (token !== undefined) {
    showSignIn(
      needed,
      error.status === 401
        ? `The token was refused (401: ${error.message}).`
        : `This token may not use this console (403: ${error.message}).`,
    );
  } else if (error.status === 401) {
    showSignIn(needed);
  } else {
    showSignIn(
      `You are not allowed to use this console (403: ${error.message}). Sign in with a token that is.`,
    );
  }
}

function showSignIn(why, problem) {
  auth.signingIn = true;
  stopStream();
  state.generation++;
  clearTable();
  closeDetail();
  hideNotice();
  $('main').hidden = true;
  $('sign-out').hidden = true;
  $('sign-in').hidden = false;
  $('sign-in-why').textContent = why;
  $('sign-in-error').textContent = problem ?? '';
  $('sign-in-error').hidden = problem === undefined;
  $('listed').textContent = '';
  setConnection('offline', 'Signed out');
  $('token').focus();
}

/** A pasted `Bearer ` prefix is dropped; a token is one word of printable ASCII (RFC 6750). */
function signIn(event) {
  event.preventDefault();
  const input = $('token');
  const token = input.value.trim().replace(/^Bearer\s+/i, '');
  input.value = '';
  if (!/^[\x21-\x7e]+$/.test(token)) {
    $('sign-in-error').textContent =
      'A bearer token is one word of printable ASCII characters, without spaces.';
    $('sign-in-error').hidden = false;
    input.focus();
    return;
  }
  keepToken(token);
  enter();
}

function signOut() {
  keepToken(undefined);
  showSignIn('Signed out. The token is forgotten in this tab.');
}

/** Shows the console and starts listing and following (at start, and after a sign-in). */
function enter() {
  auth.signingIn = false;
  $('sign-in').hidden = true;
  $('sign-in-error').hidden = true;
  $('main').hidden = false;
  $('sign-out').hidden = auth.token === undefined;
  live.attempt = 0;
  void list(true);
  connect();
}

// ----- HTTP ---------------------------------------------------------------------------------------

async function request(path, { method = 'GET', json } = {}) {
  const token = auth.token;
  const headers = headersFor({ accept: 'application/json' });
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
  if (!response.ok) {
    const error = new ApiError(response.status, body);
    if (isRefusal(error)) refused(error, token);
    throw error;
  }
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
    if (state.selected !== taskId || isRefusal(error)) return;
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
    if (isRefusal(error)) return;
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

/** The change stream: the request open now, the reconnection planned, the resume point. */
const live = {
  controller: undefined,
  timer: undefined,
  /** Failed connections in a row (the backoff grows with them). */
  attempt: 0,
  retryMs: RETRY_MS,
  /** The last `id:` heard, sent back as Last-Event-ID on reconnecting (as EventSource does). */
  lastEventId: '',
};

function stopStream() {
  clearTimeout(live.timer);
  live.timer = undefined;
  live.controller?.abort();
  live.controller = undefined;
}

/** Opens the change stream with fetch (an EventSource could not send Authorization). */
function connect() {
  stopStream();
  const controller = new AbortController();
  live.controller = controller;
  if (live.attempt === 0) setConnection('connecting', 'Connecting…');
  void follow(controller);
}

async function follow(controller) {
  const token = auth.token;
  const headers = headersFor({ accept: 'text/event-stream' });
  if (live.lastEventId !== '') headers['last-event-id'] = live.lastEventId;
  let response;
  try {
    response = await fetch(new URL('stream', API), {
      headers,
      credentials: 'same-origin',
      cache: 'no-store',
      signal: controller.signal,
    });
  } catch {
    reconnect(controller);
    return;
  }
  const type = response.headers.get('content-type') ?? '';
  if (!response.ok || !response.body || !type.startsWith('text/event-stream')) {
    let body;
    try {
      body = await response.json();
    } catch {
      body = undefined;
    }
    const error = new ApiError(response.status, body);
    if (isRefusal(error)) {
      if (live.controller === controller) refused(error, token);
    } else {
      reconnect(controller);
    }
    return;
  }
  live.attempt = 0;
  setConnection('live', 'Live');
  void list(false);
  try {
    await readEvents(response.body, (event) => {
      if (event.type !== 'task') return;
      let task;
      try {
        task = JSON.parse(event.data);
      } catch {
        return;
      }
      heard(task);
    });
  } catch {
    // The connection dropped, or stopStream aborted it.
  }
  reconnect(controller);
}

/** Plans the next connection: the server's `retry:` delay, doubled per failure, at most 30 s. */
function reconnect(controller) {
  if (live.controller !== controller || controller.signal.aborted) return;
  live.controller = undefined;
  live.attempt += 1;
  const delay = Math.min(live.retryMs * 2 ** (live.attempt - 1), MAX_RETRY_MS);
  if (live.attempt === 1) setConnection('reconnecting', 'Reconnecting…');
  else setConnection('offline', 'Offline, retrying');
  live.timer = setTimeout(connect, delay / 2 + (Math.random() * delay) / 2);
}

/**
 * Reads Server-Sent Events from `body` as the HTML standard parses them (lines ending in CR, LF
 * or CRLF; `event`, `data`, `id`, `retry` fields; `:` comments) and calls `onEvent({ type, data })`
 * for each event; resolves when the stream ends.
 */
async function readEvents(body, onEvent) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  let first = true;
  let type = '';
  let data = [];
  const line = (text) => {
    if (text === '') {
      if (data.length) onEvent({ type: type || 'message', data: data.join('\n') });
      type = '';
      data = [];
      return;
    }
    if (text.startsWith(':')) return;
    const colon = text.indexOf(':');
    const name = colon === -1 ? text : text.slice(0, colon);
    let value = colon === -1 ? '' : text.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (name === 'event') type = value;
    else if (name === 'data') data.push(value);
    else if (name === 'id' && !value.includes('\0')) live.lastEventId = value;
    else if (name === 'retry' && /^\d+$/.test(value)) live.retryMs = Number(value);
  };
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    if (first && buffer.length) {
      if (buffer.startsWith('\uFEFF')) buffer = buffer.slice(1);
      first = false;
    }
    // A CR at the end may be the first half of a CRLF: keep it for the next chunk.
    const end = buffer.endsWith('\r') ? buffer.length - 1 : buffer.length;
    const lines = buffer.slice(0, end).split(/\r\n|\r|\n/);
    buffer = lines.pop() + buffer.slice(end);
    for (const text of lines) line(text);
  }
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
  $('sign-in-form').addEventListener('submit', signIn);
  $('sign-out').addEventListener('click', signOut);
  readFilters();
  enter();
  setInterval(() => {
    if (!auth.signingIn && document.visibilityState === 'visible') void list(false);
  }, REFRESH_MS);
}

start();
