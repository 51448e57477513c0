/**
 * The v1 TypeScript SDK client (`@modelcontextprotocol/sdk` 1.32, 2025-11-25) as its README shows
 * it: one that answers elicitation with a name, on a Streamable HTTP transport acting for a
 * principal (the demo's `Authorization: Bearer <principal>` stand-in for auth).
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

/** A v1 client whose elicitation handler answers `answerName(message)`, or declines. */
export function v1Client(answerName?: (message: string) => string | undefined): Client {
  const client = new Client(
    { name: 'v1-client', version: '1.0.0' },
    { capabilities: { elicitation: { form: {} } } },
  );
  client.setRequestHandler(ElicitRequestSchema, async (request) => {
    const name = answerName?.(String(request.params.message));
    return name === undefined
      ? { action: 'decline' as const }
      : { action: 'accept' as const, content: { name } };
  });
  return client;
}

/** The v1 Streamable HTTP transport to `url`, acting for `principal`. */
export function v1Transport(
  url: string,
  principal: string,
  fetchImpl?: typeof fetch,
): StreamableHTTPClientTransport {
  return new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${principal}` } },
    ...(fetchImpl && { fetch: fetchImpl }),
  });
}
