/*
 * How the console writes times, durations, owners and states, and the one way it makes elements:
 * with text content, never HTML.
 */

import { STATES } from './console-state.js';

export const timeFormat = new Intl.DateTimeFormat(undefined, {
  hour: '2-digit',
  minute: '2-digit',
  second: '2-digit',
});
export const dateTimeFormat = new Intl.DateTimeFormat(undefined, {
  dateStyle: 'medium',
  timeStyle: 'medium',
});

function shortTime(iso) {
  const date = new Date(iso);
  const today = new Date().toDateString() === date.toDateString();
  return today ? timeFormat.format(date) : dateTimeFormat.format(date);
}

export function duration(ms) {
  if (ms === null || ms === undefined) return 'none';
  if (ms < 1000) return `${ms} ms`;
  const seconds = ms / 1000;
  if (seconds < 120) return `${Number(seconds.toFixed(1))} s`;
  const minutes = seconds / 60;
  if (minutes < 120) return `${Number(minutes.toFixed(1))} min`;
  return `${Number((minutes / 60).toFixed(1))} h`;
}

export function ownerText(owner) {
  const principal = owner.principal === null ? 'anonymous' : owner.principal;
  return owner.tenant === null ? principal : `${principal} (${owner.tenant})`;
}

/** An element with text content (never HTML) and optional class and attributes. */
export function el(tag, text, className, attributes = {}) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (className) node.className = className;
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
  return node;
}

export function statusPill(status) {
  const known = STATES.includes(status) ? status : 'unknown';
  return el('span', status.replace('_', ' '), `status status-${known}`);
}

export function time(iso) {
  return el('time', shortTime(iso), undefined, { datetime: iso, title: iso });
}
