/*
 * The change stream: Server-Sent Events read with fetch (so they carry this tab's credentials),
 * reconnected with backoff and resumed with Last-Event-ID; each task heard updates the table.
 */

import { ApiError, auth, headersFor, isRefusal } from './console-api.js';
import { refreshDetail } from './console-detail.js';
import { list } from './console-listing.js';
import { beyondLoaded, matchesFilters, upsert } from './console-rows.js';
import { refused } from './console-sign-in.js';
import { $, API, state } from './console-state.js';

/** The stream's first reconnection delay until the server's `retry:` says otherwise. */
const RETRY_MS = 3000;
const MAX_RETRY_MS = 30000;

export function setConnection(which, text) {
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
export const live = {
  controller: undefined,
  timer: undefined,
  /** Failed connections in a row (the backoff grows with them). */
  attempt: 0,
  retryMs: RETRY_MS,
  /** The last `id:` heard, sent back as Last-Event-ID on reconnecting (as EventSource does). */
  lastEventId: '',
};

export function stopStream() {
  clearTimeout(live.timer);
  live.timer = undefined;
  live.controller?.abort();
  live.controller = undefined;
}

/** Opens the change stream with fetch (an EventSource could not send Authorization). */
export function connect() {
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
