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
 *
 * This module wires the page's controls and starts; the others, imported from beside it, each
 * hold one part: state, API requests, sign-in, formatting, rows, listing, detail, the stream.
 */

import { auth } from './console-api.js';
import { closeDetail } from './console-detail.js';
import { list, loadMore, readFilters } from './console-listing.js';
import { enter, signIn, signOut } from './console-sign-in.js';
import { $, state } from './console-state.js';

const REFRESH_MS = 5000;

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
