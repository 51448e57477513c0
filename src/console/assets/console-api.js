/*
 * Requests to the console's JSON API, with this tab's bearer token (kept in sessionStorage) when
 * it has one; a refusal (401, 403) brings up the sign-in form.
 */

import { refused } from './console-sign-in.js';
import { API } from './console-state.js';

export class ApiError extends Error {
  constructor(status, body) {
    super(body && typeof body.message === 'string' ? body.message : `HTTP ${status}`);
    this.status = status;
    this.body = body;
  }
}

/** Where this tab keeps its bearer token: sessionStorage, one key per console path. */
const TOKEN_KEY = `nestjs-mcp-tasks console token ${API.pathname}`;

export const auth = {
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

export function keepToken(token) {
  auth.token = token;
  try {
    if (token === undefined) sessionStorage.removeItem(TOKEN_KEY);
    else sessionStorage.setItem(TOKEN_KEY, token);
  } catch {
    // No storage (a sandboxed frame): the token lives as long as the page.
  }
}

/** The request's headers, with `Authorization: Bearer` when this tab has a token. */
export function headersFor(headers) {
  if (auth.token !== undefined) headers.authorization = `Bearer ${auth.token}`;
  return headers;
}

export const isRefusal = (error) => error instanceof ApiError && [401, 403].includes(error.status);

export async function request(path, { method = 'GET', json } = {}) {
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
