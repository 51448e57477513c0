import type { FetchLike } from '@modelcontextprotocol/client';
import type { JsonValue } from '@modelcontextprotocol/ext-tasks/core';
import {
  type ApplicationElicitResult,
  type ApplicationInputHandler,
  createApplicationInputHandler,
  type RawClientDispatch,
  type TaskEnabledSession,
} from '@modelcontextprotocol/ext-tasks/client';
import type { Client } from '@modelcontextprotocol/client';
import { createRawDispatch as createDispatch } from '../../src/client/raw-dispatch.js';
import { openTasksSession, realmSafeFetch } from '../../src/client/session.js';

/**
 * The official MCP client and Tasks session, connected to one of our endpoints. The connection
 * code lives in src/client (the `nestjs-mcp-tasks/client` entry); these are the lower-level pieces
 * under `connectTasksClient`, for tests that drive the official session directly.
 */
export { PROTOCOL_VERSION } from '../../src/client/raw-dispatch.js';
export { TASKS_EXTENSION_ID } from '../../src/tasks.constants.js';

/**
 * Jest runs a test file in its own VM context, but the global `fetch` belongs to Node's main one:
 * `Response.json()` builds objects whose prototype is the main context's `Object.prototype`, and
 * the Tasks session's JSON check (plain objects only) refuses them ("Expected a JSON value").
 * This fetch parses JSON bodies with the test context's own `JSON` (the client entry's own fix).
 */
export const testContextFetch: FetchLike = realmSafeFetch(fetch);

/** The raw HTTP path of the Tasks session (src/client/raw-dispatch.ts), with static headers. */
export function createRawDispatch(
  url: string | URL,
  headers: Readonly<Record<string, string>> = {},
  fetchImpl: FetchLike = testContextFetch,
): RawClientDispatch {
  return createDispatch(url, { headers, fetch: fetchImpl });
}

export interface OfficialClientOptions {
  /** Sent as `Authorization: Bearer <principal>` (the demo server's stand-in for auth). */
  principal?: string;
  /** Answers the input requests (elicitation, sampling, roots) of the tasks this session follows. */
  onInputRequest?: ApplicationInputHandler['handle'];
  /** Errors the session meets in the background (a failed input handler, for example). */
  onError?: (error: Error) => void;
  clientInfo?: { name: string; version: string };
  /** The fetch of both HTTP paths; `testContextFetch` by default. */
  fetch?: FetchLike;
}

export interface OfficialClient {
  /** The plain SDK client, connected (2026-07-28, after `server/discover`). */
  client: Client;
  /** The Tasks session over it: `callTool` follows a task to its end. */
  session: TaskEnabledSession;
  /** Closes the session, then the client. */
  close(): Promise<void>;
}

/**
 * Connects the official client to `url` at protocol 2026-07-28, declaring the tasks extension on
 * every request, and opens the official Tasks session over it (src/client/session.ts).
 */
export async function connectOfficialClient(
  url: string | URL,
  options: OfficialClientOptions = {},
): Promise<OfficialClient> {
  const { client, session, close } = await openTasksSession(url, {
    fetch: options.fetch ?? testContextFetch,
    clientInfo: options.clientInfo ?? { name: 'nestjs-mcp-tasks-e2e', version: '0.1.0' },
    ...(options.principal !== undefined && {
      headers: { Authorization: `Bearer ${options.principal}` },
    }),
    ...(options.onInputRequest !== undefined && { onInputRequest: options.onInputRequest }),
    ...(options.onError !== undefined && { onError: options.onError }),
  });
  return { client, session, close };
}

/**
 * An input handler that answers elicitations with `answer` and refuses sampling and roots
 * requests (the demo tools ask only for form input).
 */
export function elicitationHandler(
  answer: (
    params: Readonly<Record<string, JsonValue>>,
  ) => ApplicationElicitResult | Promise<ApplicationElicitResult>,
): ApplicationInputHandler['handle'] {
  return createApplicationInputHandler({
    elicitation: (request) => answer(request.params),
    sampling: () => {
      throw new Error('This client does not sample');
    },
    roots: () => {
      throw new Error('This client exposes no roots');
    },
  });
}

/** The text of a tool result's content blocks, joined. */
export function textOf(result: unknown): string {
  const isObject = (value: unknown): value is Record<string, unknown> =>
    value !== null && typeof value === 'object' && !Array.isArray(value);
  const content = isObject(result) && Array.isArray(result.content) ? result.content : [];
  return content
    .map((block: unknown) => (isObject(block) && typeof block.text === 'string' ? block.text : ''))
    .join('');
}
