/*
 * The sign-in form: shown when the API refuses this tab's credentials, it takes a bearer token
 * and starts the console again with it.
 */

import { auth, keepToken } from './console-api.js';
import { closeDetail } from './console-detail.js';
import { hideNotice, list } from './console-listing.js';
import { clearTable } from './console-rows.js';
import { $, state } from './console-state.js';
import { connect, live, setConnection, stopStream } from './console-stream.js';

/**
 * The API refused a request sent with `token` (this tab's token then, or none): the stored token
 * is dropped and the sign-in form shown, saying why. A refusal of a request sent before the last
 * sign-in, or while the form is already up, is ignored.
 */
export function refused(error, token) {
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
export function signIn(event) {
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

export function signOut() {
  keepToken(undefined);
  showSignIn('Signed out. The token is forgotten in this tab.');
}

/** Shows the console and starts listing and following (at start, and after a sign-in). */
export function enter() {
  auth.signingIn = false;
  $('sign-in').hidden = true;
  $('sign-in-error').hidden = true;
  $('main').hidden = false;
  $('sign-out').hidden = auth.token === undefined;
  live.attempt = 0;
  void list(true);
  connect();
}
