import {
  type AuthProvider,
  Client,
  type FetchLike,
  StreamableHTTPClientTransport,
} from '@modelcontextprotocol/client';
import {
  type ApplicationInputHandler,
  createTaskSessionEndpointId,
  createTaskSessionFromClient,
  type RawClientDispatch,
  type TaskEnabledSession,
  type V2RequestFraming,
} from '@modelcontextprotocol/ext-tasks/client';
import { TASKS_EXTENSION_ID } from '../tasks.constants.js';
import { createRawDispatch, PROTOCOL_VERSION } from './raw-dispatch.js';
import type { RetryPolicy } from './retry.js';

/** How to reach the endpoint and who the client is: shared by both HTTP paths. */
export interface ConnectionOptions {
  /** Sent on every request, e.g. `{ Authorization: 'Bearer …' }`. */
  headers?: Readonly<Record<string, string>>;
  /**
   * Bearer tokens for every request: `token()` is asked before each one (a token wins over a
   * static `Authorization` header); on HTTP 401, `onUnauthorized()` is awaited and the request
   * retried once.
   */
  authProvider?: AuthProvider;
  /** The fetch of both HTTP paths (the SDK transport's and the raw one); the global one by default. */
  fetch?: FetchLike;
  /** `clientInfo` sent in every request's envelope. */
  clientInfo?: { name: string; version: string };
  /** Errors met in the background (a failing input handler, for example); `console.error` by default. */
  onError?: (error: Error) => void;
}

export interface SessionOptions extends ConnectionOptions {
  /** Answers the input requests of the tasks this session follows. */
  onInputRequest?: ApplicationInputHandler['handle'];
  /** How the raw path tries again while the server is away (`DEFAULT_RETRY` when not given). */
  retry?: RetryPolicy;
}

/** The SDK client and the official Tasks session over it. */
export interface OpenSession {
  client: Client;
  session: TaskEnabledSession;
  rawDispatch: RawClientDispatch;
  /** Closes the session, then the client. */
  close(): Promise<void>;
}

/**
 * Whether `Response.json()` builds objects of this module's realm. Under Jest a test file runs in
 * its own VM context while the global `fetch` belongs to Node's main one; the Tasks session's JSON
 * check (plain objects only) then refuses every parsed reply ("Expected a JSON value").
 */
let sameRealm: Promise<boolean> | undefined;
const jsonIsSameRealm = (): Promise<boolean> =>
  (sameRealm ??= new Response('{}')
    .json()
    .then((probe) => Object.getPrototypeOf(probe) === Object.prototype));

const NULL_BODY_STATUS = new Set([101, 204, 205, 304]);

/**
 * `fetch`, with JSON bodies parsed by this realm's `JSON` when `Response.json()` would build
 * another realm's objects (only then: in plain Node the responses pass through untouched).
 */
export function realmSafeFetch(fetchImpl: FetchLike): FetchLike {
  return async (url, init) => {
    const response = await fetchImpl(url, init);
    if (
      NULL_BODY_STATUS.has(response.status) ||
      !/^application\/(?:[\w.+-]+\+)?json\b/i.test(response.headers.get('content-type') ?? '') ||
      (await jsonIsSameRealm())
    ) {
      return response;
    }
    const text = await response.text();
    const copy = new Response(text, {
      status: response.status,
      statusText: response.statusText,
      headers: response.headers,
    });
    Object.defineProperty(copy, 'json', { value: async () => JSON.parse(text) as unknown });
    return copy;
  };
}

export const DEFAULT_CLIENT_INFO = { name: 'nestjs-mcp-tasks-client', version: '0.1.0' } as const;

/**
 * Connects the SDK client to `url` pinned to 2026-07-28, declaring the tasks extension on every
 * request, and opens the official Tasks session over it with the raw HTTP path it needs. Throws
 * what the SDK throws; the public entry wraps it with clearer messages.
 */
export async function openTasksSession(
  url: string | URL,
  options: SessionOptions = {},
): Promise<OpenSession> {
  const endpoint = new URL(url);
  const clientInfo = options.clientInfo ?? DEFAULT_CLIENT_INFO;
  const headers = { ...options.headers };
  const fetchImpl = realmSafeFetch(options.fetch ?? ((input, init) => fetch(input, init)));
  const clientCapabilities = { extensions: { [TASKS_EXTENSION_ID]: {} } };
  const client = new Client(clientInfo, {
    capabilities: clientCapabilities,
    versionNegotiation: { mode: { pin: PROTOCOL_VERSION } },
  });
  await client.connect(
    new StreamableHTTPClientTransport(endpoint, {
      requestInit: { headers },
      ...(options.authProvider !== undefined && { authProvider: options.authProvider }),
      fetch: fetchImpl,
    }),
  );
  try {
    const framing: V2RequestFraming = {
      protocolVersion: PROTOCOL_VERSION,
      clientInfo,
      clientCapabilities,
    };
    const closing = new AbortController();
    const rawDispatch = createRawDispatch(endpoint, {
      headers,
      ...(options.authProvider !== undefined && { authProvider: options.authProvider }),
      fetch: fetchImpl,
      ...(options.retry !== undefined && { retry: options.retry }),
      stopRetries: closing.signal,
    });
    const session = createTaskSessionFromClient(client, {
      endpointId: await createTaskSessionEndpointId('nestjs-mcp-tasks', { url: endpoint.href }),
      rawDispatch,
      v2RequestFraming: framing,
      ...(options.onInputRequest !== undefined && { onInputRequest: options.onInputRequest }),
      ...(options.onError !== undefined && { onError: options.onError }),
    });
    return {
      client,
      session,
      rawDispatch,
      close: async () => {
        // What closing sends (the cancels of the tasks still followed) is tried once.
        closing.abort();
        try {
          await session.close();
        } finally {
          await client.close();
        }
      },
    };
  } catch (error) {
    await client.close();
    throw error;
  }
}
