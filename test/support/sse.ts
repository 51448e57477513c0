import {
  declaredCapabilities,
  envelope,
  type JsonRpcMessage,
  parseMessage,
  standardHeaders,
} from './wire.js';

/**
 * Raw HTTP for listen streams: `subscriptions/listen` and plain JSON-RPC requests written by
 * hand (standard headers, `params._meta` envelope), and a reader that turns a `text/event-stream`
 * body into frames as they arrive, so tests can look at every message (and comment) the server
 * writes, in order, and see when the stream ends.
 *
 * Every body is parsed here or in wire.ts, with the test context's own `JSON` (Jest runs a test
 * file in its own VM context; see official-client.ts).
 */

/** One SSE event block (the text between blank lines). */
export interface SseFrame {
  /** The block as written, without the blank line that ends it. */
  raw: string;
  event?: string;
  data?: string;
  /** The text of comment lines (`: keepalive` → `keepalive`), when the block has any. */
  comments: string[];
  /** `data` parsed as JSON, when the block has data. */
  message?: JsonRpcMessage;
}

/** The envelope of the requests written here (the tasks extension declared unless told). */
const listenEnvelope = (declareTasks = true): Record<string, unknown> =>
  envelope(declaredCapabilities(declareTasks), 'listen-e2e');

const sleep = (ms: number): Promise<void> => new Promise((done) => setTimeout(done, ms));

/** Reads an SSE body as it arrives. Never rejects on its own: `done` and `error` tell the end. */
export class SseReader {
  /** Every frame received so far, comments included, in order. */
  readonly frames: SseFrame[] = [];
  /** True once the body has ended (or failed, or was aborted). */
  done = false;
  /** Why the body failed, when it did not end cleanly (an abort by `close()` is no failure). */
  error: unknown;
  /** Resolves when the body has ended. */
  readonly ended: Promise<void>;
  private buffer = '';
  private cursor = 0;
  private closing = false;
  private readonly waiters = new Set<() => void>();

  constructor(
    body: ReadableStream<Uint8Array>,
    private readonly controller: AbortController,
  ) {
    this.ended = this.pump(body);
  }

  /** The JSON-RPC messages received so far, in order (comment-only frames left out). */
  get messages(): JsonRpcMessage[] {
    return this.frames.flatMap((frame) => (frame.message === undefined ? [] : [frame.message]));
  }

  /**
   * The next message not yet returned by `next`. Rejects when none arrives within `timeoutMs`, or
   * when the stream ends first.
   */
  async next(timeoutMs = 3_000): Promise<JsonRpcMessage> {
    return this.until(
      () => {
        const messages = this.messages;
        if (this.cursor < messages.length) return messages[this.cursor++];
        return undefined;
      },
      timeoutMs,
      'the next message',
    );
  }

  /** The first frame (of all received, old ones included) that satisfies `matches`. */
  waitForFrame(matches: (frame: SseFrame) => boolean, timeoutMs = 3_000): Promise<SseFrame> {
    return this.until(() => this.frames.find(matches), timeoutMs, 'a matching frame');
  }

  /** Waits for the body to end; rejects when it is still open after `timeoutMs`. */
  async waitForEnd(timeoutMs = 3_000): Promise<void> {
    await this.until(() => (this.done ? true : undefined), timeoutMs, 'the end of the stream', {
      endIsFine: true,
    });
  }

  /** Closes the stream from the client side (aborts the request) and waits for the reader. */
  async close(): Promise<void> {
    this.closing = true;
    this.controller.abort();
    await this.ended;
  }

  private async until<T>(
    check: () => T | undefined,
    timeoutMs: number,
    what: string,
    { endIsFine = false } = {},
  ): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = check();
      if (found !== undefined) return found;
      if (this.done && !endIsFine) {
        throw new Error(
          `The stream ended while waiting for ${what}; frames: ${JSON.stringify(this.frames.map((frame) => frame.raw))}`,
        );
      }
      const left = deadline - Date.now();
      if (left <= 0) {
        throw new Error(
          `Timed out waiting for ${what}; frames: ${JSON.stringify(this.frames.map((frame) => frame.raw))}`,
        );
      }
      await new Promise<void>((resolve) => {
        const wake = (): void => {
          clearTimeout(timer);
          this.waiters.delete(wake);
          resolve();
        };
        const timer = setTimeout(wake, left);
        this.waiters.add(wake);
      });
    }
  }

  private wake(): void {
    for (const waiter of [...this.waiters]) waiter();
  }

  private async pump(body: ReadableStream<Uint8Array>): Promise<void> {
    const reader = body.getReader();
    const decoder = new TextDecoder();
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        this.buffer += decoder.decode(value, { stream: true });
        this.parse();
      }
      this.buffer += decoder.decode();
      this.parse();
    } catch (error) {
      if (!this.closing) this.error = error;
    } finally {
      this.done = true;
      this.wake();
    }
  }

  private parse(): void {
    this.buffer = this.buffer.replace(/\r\n?/g, '\n');
    let end: number;
    while ((end = this.buffer.indexOf('\n\n')) !== -1) {
      const raw = this.buffer.slice(0, end);
      this.buffer = this.buffer.slice(end + 2);
      if (raw === '') continue;
      this.frames.push(parseFrame(raw));
    }
    this.wake();
  }
}

function parseFrame(raw: string): SseFrame {
  const frame: SseFrame = { raw, comments: [] };
  const data: string[] = [];
  for (const line of raw.split('\n')) {
    if (line.startsWith(':')) {
      frame.comments.push(line.slice(1).trim());
      continue;
    }
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    const value = colon === -1 ? '' : line.slice(colon + 1).replace(/^ /, '');
    if (field === 'event') frame.event = value;
    else if (field === 'data') data.push(value);
  }
  if (data.length > 0) {
    frame.data = data.join('\n');
    frame.message = JSON.parse(frame.data) as JsonRpcMessage;
  }
  return frame;
}

export interface ListenOptions {
  /** The JSON-RPC id (the subscription id). Default `'sub-1'`. */
  id?: string | number;
  /** `params.notifications.taskIds`. */
  taskIds?: unknown;
  /** The whole `params.notifications` (overrides `taskIds`); `undefined` with `omitNotifications`. */
  notifications?: unknown;
  /** Leave `params.notifications` out. */
  omitNotifications?: boolean;
  /** Declare the tasks extension in the envelope. Default true. */
  declareTasks?: boolean;
  /** `Authorization: Bearer <principal>`; none = anonymous. */
  principal?: string;
}

/** What a listen request got: an SSE stream, or a plain (JSON) answer. */
export interface ListenResponse {
  status: number;
  headers: Headers;
  /** The SSE reader, when the answer is `text/event-stream`. */
  stream?: SseReader;
  /** The body, when the answer is not an event stream. */
  text?: string;
  /** `text` parsed, when it is JSON. */
  json?: JsonRpcMessage;
}

/** POSTs `subscriptions/listen` and returns as soon as the response head is in. */
export async function openListen(
  url: string,
  options: ListenOptions = {},
): Promise<ListenResponse> {
  const notifications =
    options.notifications !== undefined ? options.notifications : { taskIds: options.taskIds };
  const params: Record<string, unknown> = { _meta: listenEnvelope(options.declareTasks) };
  if (!options.omitNotifications) params.notifications = notifications;
  const controller = new AbortController();
  const response = await fetch(url, {
    method: 'POST',
    headers: {
      ...standardHeaders('subscriptions/listen'),
      ...(options.principal !== undefined && { authorization: `Bearer ${options.principal}` }),
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: options.id ?? 'sub-1',
      method: 'subscriptions/listen',
      params,
    }),
    signal: controller.signal,
  });
  if (/^text\/event-stream/i.test(response.headers.get('content-type') ?? '') && response.body) {
    return {
      status: response.status,
      headers: response.headers,
      stream: new SseReader(response.body, controller),
    };
  }
  const text = await response.text();
  return { status: response.status, headers: response.headers, text, json: parseMessage(text) };
}

/** A JSON-RPC answer read to the end. */
export interface RpcAnswer {
  status: number;
  headers: Headers;
  body: JsonRpcMessage;
}

/** Which params field `Mcp-Name` mirrors. */
const NAME_FIELD: Readonly<Record<string, string>> = {
  'tools/call': 'name',
  'tasks/get': 'taskId',
  'tasks/update': 'taskId',
  'tasks/cancel': 'taskId',
};

/** A well-formed 2026-07-28 JSON-RPC request over plain `fetch`, answered with JSON. */
export async function rpc(
  url: string,
  method: string,
  params: Record<string, unknown>,
  options: { principal?: string; declareTasks?: boolean; id?: string | number } = {},
): Promise<RpcAnswer> {
  const field = NAME_FIELD[method];
  const name = field === undefined ? undefined : params[field];
  const response = await fetch(url, {
    method: 'POST',
    headers: {
      ...standardHeaders(method, typeof name === 'string' ? name : undefined),
      ...(options.principal !== undefined && { authorization: `Bearer ${options.principal}` }),
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: options.id ?? 1,
      method,
      params: { ...params, _meta: listenEnvelope(options.declareTasks) },
    }),
  });
  const text = await response.text();
  const body = parseMessage(text);
  if (body === undefined) {
    throw new Error(`${method} answered HTTP ${response.status} with no JSON: ${text}`);
  }
  return { status: response.status, headers: response.headers, body };
}

/** Polls `read` until it returns something other than `undefined` (fails after `timeoutMs`). */
export async function eventually<T>(
  read: () => T | undefined | Promise<T | undefined>,
  timeoutMs = 2_000,
  what = 'the condition',
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`Timed out waiting for ${what}`);
    await sleep(10);
  }
}
