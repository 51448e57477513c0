import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  Client,
  type FetchLike,
  StreamableHTTPClientTransport,
  type SubscriptionFilter,
} from '@modelcontextprotocol/client';
import type { JsonValue, TaskId } from '@modelcontextprotocol/ext-tasks/core';
import {
  type DetailedTaskV2,
  TaskStatusNotificationParamsV2Schema,
} from '@modelcontextprotocol/ext-tasks/core/v2';
import {
  type ApplicationElicitResult,
  type ApplicationInputHandler,
  createApplicationInputHandler,
  createTaskSessionEndpointId,
  createTaskSessionFromClient,
  DispatchError,
  type DispatchOptions,
  type JsonRpcResponse,
  type RawClientDispatch,
  type TaskEnabledSession,
  type TaskExecutionEvent,
  type V2RequestFraming,
} from '@modelcontextprotocol/ext-tasks/client';

/**
 * The demo client: the official MCP client (`@modelcontextprotocol/client`) with the official
 * Tasks session (`@modelcontextprotocol/ext-tasks/client`) against the demo server (`npm start`).
 * Run it with `npm run demo [name]`; `MCP_URL` names the endpoint. The connection code is
 * exported, and the end-to-end tests use it too.
 */

export const PROTOCOL_VERSION = '2026-07-28';
export const TASKS_EXTENSION_ID = 'io.modelcontextprotocol/tasks';

/** A JSON object as the official packages type it. */
type JsonObject = { readonly [key: string]: JsonValue };

/** Which params field `Mcp-Name` mirrors, for the methods the raw path sends. */
const NAME_FIELD: Readonly<Record<string, string>> = {
  'tools/call': 'name',
  'tasks/get': 'taskId',
  'tasks/update': 'taskId',
  'tasks/cancel': 'taskId',
};

/** Methods whose repetition changes nothing: a transport failure may be retried once. */
const IDEMPOTENT = new Set(['tasks/get', 'tasks/update', 'tasks/cancel']);

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** A header value as sent: plain when it is printable ASCII, else the `=?base64?…?=` form. */
function headerValue(value: string): string {
  return /^[\x20-\x7e]*$/.test(value) && value.trim() === value
    ? value
    : `=?base64?${Buffer.from(value, 'utf8').toString('base64')}?=`;
}

/** The JSON-RPC response with `id` in a reply body: plain JSON, or an SSE stream of messages. */
function findResponse(contentType: string, text: string, id: string): unknown {
  if (!/^text\/event-stream/i.test(contentType)) return JSON.parse(text) as unknown;
  for (const event of text.split(/\r?\n\r?\n/)) {
    const data = event
      .split(/\r?\n/)
      .filter((line) => line.startsWith('data:'))
      .map((line) => line.slice(5).replace(/^ /, ''))
      .join('\n');
    if (data === '') continue;
    const message = JSON.parse(data) as unknown;
    if (isObject(message) && message.id === id && ('result' in message || 'error' in message)) {
      return message;
    }
  }
  return undefined;
}

/** Turns a parsed reply into the session port's response shape, or explains why it cannot. */
function toPortResponse(reply: unknown, id: string, status: number): JsonRpcResponse {
  if (!isObject(reply) || reply.jsonrpc !== '2.0' || reply.id !== id) {
    throw new DispatchError(`The endpoint answered HTTP ${status} without a JSON-RPC response`);
  }
  const { error, result } = reply;
  if (isObject(error)) {
    if (!Number.isInteger(error.code) || typeof error.message !== 'string') {
      throw new DispatchError('The endpoint answered a malformed JSON-RPC error');
    }
    return {
      kind: 'error',
      error: {
        code: error.code as number,
        message: error.message,
        ...(error.data !== undefined && { data: error.data as JsonValue }),
      },
    };
  }
  if (!isObject(result))
    throw new DispatchError('The endpoint answered a result that is no object');
  return { kind: 'result', result: result as JsonObject };
}

/**
 * The raw HTTP path the Tasks session needs on a 2026-07-28 server: the SDK client refuses a
 * `resultType: "task"`, so `tools/call` and `tasks/*` are POSTed here. The session hands over the
 * framed request (method and params, `_meta` envelope included); this adds the JSON-RPC id and the
 * standard headers (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`) to `headers` and the
 * session's own, and returns the JSON-RPC response of a JSON or SSE reply.
 */
export function createRawDispatch(
  url: string | URL,
  headers: Readonly<Record<string, string>> = {},
  fetchImpl: FetchLike = fetch,
): RawClientDispatch {
  let sequence = 0;
  return async (request: JsonValue, options: DispatchOptions = {}): Promise<JsonRpcResponse> => {
    if (!isObject(request) || typeof request.method !== 'string') {
      throw new DispatchError('A JSON-RPC request needs a method');
    }
    const method = request.method;
    const params = isObject(request.params) ? request.params : undefined;
    const id = `tasks-${++sequence}`;

    const sent = new Headers(headers);
    for (const [name, value] of Object.entries(options.context?.headers ?? {})) {
      sent.set(name, value);
    }
    sent.set('Content-Type', 'application/json');
    sent.set('Accept', 'application/json, text/event-stream');
    sent.set('MCP-Protocol-Version', PROTOCOL_VERSION);
    sent.set('Mcp-Method', method);
    const field = Object.hasOwn(NAME_FIELD, method) ? NAME_FIELD[method] : undefined;
    const name = field === undefined ? undefined : params?.[field];
    if (typeof name === 'string') sent.set('Mcp-Name', headerValue(name));
    else sent.delete('Mcp-Name');

    let response: Response;
    let text: string;
    try {
      response = await fetchImpl(url, {
        method: 'POST',
        headers: sent,
        body: JSON.stringify({ jsonrpc: '2.0', id, ...request }),
        ...(options.signal !== undefined && { signal: options.signal }),
      });
      text = await response.text();
    } catch (error) {
      if (options.signal?.aborted) throw error;
      throw new DispatchError(
        `${method}: the request to ${String(url)} failed`,
        IDEMPOTENT.has(method),
        {
          cause: error,
        },
      );
    }
    let reply: unknown;
    try {
      reply = findResponse(response.headers.get('content-type') ?? '', text, id);
    } catch (error) {
      throw new DispatchError(
        `${method}: the endpoint answered HTTP ${response.status} that is no JSON`,
        false,
        {
          cause: error,
        },
      );
    }
    return toPortResponse(reply, id, response.status);
  };
}

export interface OfficialClientOptions {
  /** Sent as `Authorization: Bearer <principal>` (the demo server's stand-in for auth). */
  principal?: string;
  /** Answers the input requests (elicitation, sampling, roots) of the tasks this session follows. */
  onInputRequest?: ApplicationInputHandler['handle'];
  /** Errors the session meets in the background (a failed input handler, for example). */
  onError?: (error: Error) => void;
  clientInfo?: { name: string; version: string };
  /** The fetch of both HTTP paths (the SDK transport's and the raw one); the global one by default. */
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
 * Connects the official client to the MCP endpoint at `url` at protocol 2026-07-28, declaring the
 * tasks extension on every request, and opens the official Tasks session over it.
 */
export async function connectOfficialClient(
  url: string | URL,
  options: OfficialClientOptions = {},
): Promise<OfficialClient> {
  const clientInfo = options.clientInfo ?? {
    name: 'nestjs-mcp-tasks-demo-client',
    version: '0.1.0',
  };
  const headers: Record<string, string> =
    options.principal === undefined ? {} : { Authorization: `Bearer ${options.principal}` };
  const clientCapabilities = { extensions: { [TASKS_EXTENSION_ID]: {} } };
  const client = new Client(clientInfo, {
    capabilities: clientCapabilities,
    versionNegotiation: { mode: { pin: PROTOCOL_VERSION } },
  });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(url), {
      requestInit: { headers },
      ...(options.fetch !== undefined && { fetch: options.fetch }),
    }),
  );
  try {
    const framing: V2RequestFraming = {
      protocolVersion: PROTOCOL_VERSION,
      clientInfo,
      clientCapabilities,
    };
    const session = createTaskSessionFromClient(client, {
      endpointId: await createTaskSessionEndpointId('nestjs-mcp-tasks', {
        url: String(url),
        principal: options.principal ?? null,
      }),
      rawDispatch: createRawDispatch(url, headers, options.fetch),
      v2RequestFraming: framing,
      ...(options.onInputRequest !== undefined && { onInputRequest: options.onInputRequest }),
      ...(options.onError !== undefined && { onError: options.onError }),
    });
    return {
      client,
      session,
      close: async () => {
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
  const content = isObject(result) && Array.isArray(result.content) ? result.content : [];
  return content
    .map((block: unknown) => (isObject(block) && typeof block.text === 'string' ? block.text : ''))
    .join('');
}

// ---------------------------------------------------------------------------------------------
// The demo itself.

/** Prints each new status (and status message) of a task as it changes. */
function printChanges(label: string): (event: TaskExecutionEvent<unknown>) => void {
  let last = '';
  return (event) => {
    if (event.type !== 'task') return;
    const { status, statusMessage } = event.task;
    const line = statusMessage === undefined ? status : `${status}: ${statusMessage}`;
    if (line === last) return;
    last = line;
    console.log(`  [${label}] ${line}`);
  };
}

/**
 * One status line that each change rewrites in place (`\r`) on a terminal; elsewhere (a pipe, a
 * log) each new line is printed on its own.
 */
function liveLine(label: string): { show(text: string): void; end(): void } {
  const tty = process.stdout.isTTY === true;
  let last: string | undefined;
  return {
    show(text) {
      if (text === last) return;
      last = text;
      const line = `  [${label}] ${text}`;
      if (tty) process.stdout.write(`\r\x1b[2K${line}`);
      else console.log(line);
    },
    end() {
      if (tty && last !== undefined) process.stdout.write('\n');
    },
  };
}

const statusText = (task: { status: string; statusMessage?: string }): string =>
  task.statusMessage === undefined ? task.status : `${task.status}: ${task.statusMessage}`;

/**
 * Follows a task over a listen stream instead of polling: `subscriptions/listen` with
 * `taskIds: [taskId]` through the SDK client's `listen()`, and a handler for the
 * `notifications/tasks` it delivers. Each change rewrites one status line. After the
 * acknowledgement one `tasks/get` catches up on what changed before the stream was open; from then
 * on only the stream speaks. Resolves with the tool result, or throws when the task fails, is
 * cancelled, or the stream ends first.
 */
async function followByListen(
  client: Client,
  session: TaskEnabledSession,
  taskId: TaskId,
  label: string,
): Promise<unknown> {
  const line = liveLine(label);
  let settle!: { resolve: (task: DetailedTaskV2) => void; reject: (error: Error) => void };
  const terminal = new Promise<DetailedTaskV2>((resolve, reject) => {
    settle = { resolve, reject };
  });
  // Not awaited when the catch-up read already finds the task finished.
  void terminal.catch(() => undefined);
  let heard = false;
  client.setNotificationHandler(
    'notifications/tasks',
    { params: TaskStatusNotificationParamsV2Schema },
    (task) => {
      if (task.taskId !== taskId) return;
      heard = true;
      line.show(statusText(task));
      if (task.status === 'completed' || task.status === 'failed' || task.status === 'cancelled') {
        settle.resolve(task);
      }
    },
  );
  try {
    // The filter field `taskIds` belongs to the tasks extension, not to the SDK's own type.
    const filter: SubscriptionFilter & { taskIds: string[] } = { taskIds: [taskId] };
    const subscription = await client.listen(filter);
    try {
      void subscription.closed.then((how) =>
        settle.reject(new Error(`the listen stream ended (${how}) before the task did`)),
      );
      const now = await session.task(taskId).snapshot();
      if (!heard) line.show(statusText(now));
      if (now.status === 'completed' || now.status === 'failed' || now.status === 'cancelled') {
        const outcome = await session.task(taskId).result();
        line.end();
        if (outcome.status === 'completed') return outcome.result;
        throw new Error(`${label} ended ${outcome.status}`);
      }
      const last = await terminal;
      line.end();
      if (last.status === 'completed') return last.result;
      if (last.status === 'failed') {
        throw new Error(`${label} failed: ${last.error.code} ${last.error.message}`);
      }
      throw new Error(`${label} ended ${last.status}`);
    } finally {
      await subscription.close();
    }
  } finally {
    client.removeNotificationHandler('notifications/tasks');
  }
}

async function runDemo(url: string, name: string): Promise<void> {
  console.log(`Connecting to ${url}`);
  const { client, session, close } = await connectOfficialClient(url, {
    principal: 'demo',
    onInputRequest: elicitationHandler((params) => {
      console.log(`  [greet] the server asks: ${String(params.message)}`);
      console.log(`  [greet] answering: ${name}`);
      return { action: 'accept', content: { name } };
    }),
    onError: (error) => console.error(`  (session) ${error.message}`),
  });
  try {
    const extension = client.getServerCapabilities()?.extensions?.[TASKS_EXTENSION_ID];
    console.log(
      `Connected at ${client.getNegotiatedProtocolVersion()}; tasks extension: ${JSON.stringify(extension)}`,
    );
    const { tools } = await client.listTools();
    console.log(`Tools: ${tools.map((tool) => tool.name).join(', ')}`);

    console.log('\nadd_slowly {a: 2, b: 3}, followed over a listen stream');
    const add = await session.callTool('add_slowly', { a: 2, b: 3, delayMs: 1000 });
    if (add.kind !== 'task') throw new Error('add_slowly did not answer with a task');
    const addId = add.handle.taskId;
    console.log(`  task ${addId}`);
    // The session would poll this task; the listen stream follows it instead.
    await add.detach();
    const sum = await followByListen(client, session, addId, 'add_slowly');
    console.log(`  result: ${textOf(sum)}`);

    console.log('\ngreet');
    const greet = await session.callTool('greet', {});
    const greeted = await greet.settle({ onEvent: printChanges('greet') });
    if (greeted.outcome.status !== 'completed') {
      throw new Error(`greet ended ${greeted.outcome.status}`);
    }
    console.log(`  result: ${textOf(greeted.outcome.result)}`);

    console.log('\nwait_for_cancel (cancelled after 1 s)');
    const waiting = await session.callTool('wait_for_cancel', {});
    if (waiting.kind !== 'task') throw new Error('wait_for_cancel did not answer with a task');
    const watched = waiting.settle({ onEvent: printChanges('wait_for_cancel') });
    await new Promise((done) => setTimeout(done, 1000));
    console.log('  cancelling');
    await waiting.cancel();
    await watched;
    const final = await session.task(waiting.handle.taskId).snapshot();
    console.log(`  final status on the server: ${final.status}`);
    if (final.status !== 'cancelled') throw new Error(`wait_for_cancel is ${final.status}`);

    console.log('\nfail_with {code: -32042, message: "Nope"}');
    const failing = await session.callTool('fail_with', { code: -32042, message: 'Nope' });
    const failed = await failing.settle({ onEvent: printChanges('fail_with') });
    if (failed.outcome.status !== 'failed') {
      throw new Error(`fail_with ended ${failed.outcome.status}`);
    }
    console.log(`  error ${failed.outcome.error.code}: ${failed.outcome.error.message}`);

    console.log('\necho {text: "hi"}');
    const echoed = await client.callTool({ name: 'echo', arguments: { text: 'hi' } });
    console.log(`  result: ${textOf(echoed)}`);
  } finally {
    await close();
  }
}

const isEntryPoint =
  process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url);

if (isEntryPoint) {
  runDemo(process.env.MCP_URL ?? 'http://127.0.0.1:3000/mcp', process.argv[2] ?? 'Luca').then(
    () => console.log('\nDone.'),
    (error: unknown) => {
      console.error(`\nDemo failed: ${error instanceof Error ? error.message : String(error)}`);
      process.exitCode = 1;
    },
  );
}
