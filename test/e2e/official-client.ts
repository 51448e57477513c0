import type { FetchLike } from '@modelcontextprotocol/client';
import {
  connectOfficialClient as connect,
  type OfficialClient,
  type OfficialClientOptions,
} from '../../examples/demo-client.js';

/**
 * The official MCP client and Tasks session, connected to one of our endpoints. The connection
 * code lives with the demo client (examples/demo-client.ts), which `npm run demo` runs against a
 * live server; the end-to-end tests use the same code against an app on loopback.
 */
export {
  createRawDispatch,
  elicitationHandler,
  type OfficialClient,
  type OfficialClientOptions,
  PROTOCOL_VERSION,
  TASKS_EXTENSION_ID,
  textOf,
} from '../../examples/demo-client.js';

/**
 * Jest runs a test file in its own VM context, but the global `fetch` belongs to Node's main one:
 * `Response.json()` builds objects whose prototype is the main context's `Object.prototype`, and
 * the Tasks session's JSON check (plain objects only) refuses them ("Expected a JSON value").
 * This fetch parses JSON bodies with the test context's own `JSON`.
 */
export const testContextFetch: FetchLike = async (url, init) => {
  const response = await fetch(url, init);
  if (!/^application\/(?:[\w.+-]+\+)?json\b/i.test(response.headers.get('content-type') ?? '')) {
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

/** Connects the official client and Tasks session to `url` (see examples/demo-client.ts). */
export function connectOfficialClient(
  url: string | URL,
  options: OfficialClientOptions = {},
): Promise<OfficialClient> {
  return connect(url, { fetch: testContextFetch, ...options });
}
