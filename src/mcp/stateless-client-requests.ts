import {
  isJSONRPCRequest,
  type McpServer,
  SdkError,
  SdkErrorCode,
  type Transport,
} from '@modelcontextprotocol/server';

/**
 * Why a request to the client fails on the 2025-11-25 path: the SDK serves that revision without
 * sessions, with a fresh server per HTTP request, so the client's answer would come back on
 * another request, to a server that did not ask.
 */
export const clientRequestRefused = (method: string): SdkError =>
  new SdkError(
    SdkErrorCode.CapabilityNotSupported,
    `Cannot send ${method} to the client: this server serves protocol revision 2025-11-25 ` +
      'without sessions, so a request from the server to the client cannot be answered. A task ' +
      '(tools/call with params.task) asks through tasks/result; on revision 2026-07-28 a tool ' +
      'asks with an input_required result.',
    { method },
  );

/** The Server methods that send one request to the client, and the method each sends. */
const SENDERS = {
  createMessage: 'sampling/createMessage',
  elicitInput: 'elicitation/create',
  listRoots: 'roots/list',
  ping: 'ping',
} as const;

/**
 * Makes every request `server` would send to the client fail at once with
 * clientRequestRefused, for a server that serves one 2025-11-25 request statelessly.
 *
 * Left as they are, such requests hang: a request without a related request id (what
 * `ctx.mcpReq.requestSampling` sends) goes to a standalone stream the stateless transport does not
 * have, and is dropped; one sent on the call's own stream (`ctx.mcpReq.send`) reaches the client,
 * whose answer then arrives on a new HTTP request, served by a new server. Either way the call
 * waits for the SDK's request timeout (60 s by default) and holds its HTTP request open meanwhile.
 *
 * The push-style senders (`ctx.mcpReq.requestSampling`, `ctx.mcpReq.elicitInput`, `listRoots`,
 * `ping`) are refused before their own capability checks, which on a server that never saw the
 * client's `initialize` would wrongly blame the client ("Client does not support form
 * elicitation"). Anything else that sends a request (`ctx.mcpReq.send`, `server.server.request`)
 * is refused by the transport's `send`, which the SDK's request path awaits: it rejects the
 * pending request, clearing its timeout. Notifications and responses pass.
 *
 * A tool that does not catch the error ends with an `isError` result carrying its message (the
 * SDK's rule for an error thrown by a tool, and its own answer when an `input_required` result
 * cannot be fulfilled on this path); a prompt or resource handler answers a JSON-RPC error.
 */
export function refuseClientRequests(server: McpServer): void {
  const inner = server.server as unknown as Record<keyof typeof SENDERS, unknown> & {
    connect(transport: Transport): Promise<void>;
  };
  for (const [name, method] of Object.entries(SENDERS) as [keyof typeof SENDERS, string][]) {
    inner[name] = () => Promise.reject(clientRequestRefused(method));
  }
  const connect = inner.connect.bind(inner);
  inner.connect = (transport) => {
    const send = transport.send.bind(transport);
    transport.send = (message, options) =>
      isJSONRPCRequest(message)
        ? Promise.reject(clientRequestRefused(message.method))
        : send(message, options);
    return connect(transport);
  };
}
