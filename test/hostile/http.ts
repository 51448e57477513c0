import { Agent, type ClientRequest, request } from 'node:http';
import { Readable } from 'node:stream';
import type { ReadableStream } from 'node:stream/web';
import { type ListenResponse, SseReader } from '../support/sse.js';
import {
  declaredCapabilities,
  envelope,
  type JsonRpcMessage,
  legacyHeaders,
  parseMessage,
  standardHeaders,
} from '../support/wire.js';

/**
 * Real HTTP for the hostile-tenant suite, over `node:http` and an Agent of the caller's: each
 * principal has its own, keep-alive with a bounded number of sockets, so thousands of concurrent
 * requests queue in the client instead of opening thousands of sockets (the test box has its own
 * file-descriptor limit). An idle socket is closed by the client after 2 s, before the server's
 * 5 s keep-alive timeout can close it under a request being written. A request that gets no
 * answer fails after `timeoutMs`: that is a hang, reported as such, not a measure of speed.
 */

/** A keep-alive Agent of at most `maxSockets` connections. */
export const agent = (maxSockets: number): Agent =>
  new Agent({ keepAlive: true, maxSockets, maxFreeSockets: maxSockets, timeout: 2_000 });

/** A response read to the end. */
export interface Answer {
  status: number;
  contentType: string;
  text: string;
  /** The body parsed, `undefined` when it is not JSON. */
  json: JsonRpcMessage | undefined;
}

/** A request that got no answer: the connection failed, or nothing came within the bound. */
export class NoAnswerError extends Error {}

/**
 * Rejects with NoAnswerError when `req` fails at the connection or gets no answer in `timeoutMs`
 * (`what` prefixes the message); returns the timer, for the caller to clear on an answer.
 */
function failAsNoAnswer(
  req: ClientRequest,
  timeoutMs: number,
  what: string,
  reject: (error: NoAnswerError) => void,
): NodeJS.Timeout {
  const timer = setTimeout(() => {
    req.destroy(new NoAnswerError(`${what}no answer in ${timeoutMs} ms`));
  }, timeoutMs);
  req.on('error', (error: NodeJS.ErrnoException) => {
    clearTimeout(timer);
    reject(
      error instanceof NoAnswerError
        ? error
        : new NoAnswerError(`${what}connection failed: ${error.code ?? error.message}`),
    );
  });
  return timer;
}

/** Which params field `Mcp-Name` mirrors on 2026-07-28. */
const NAME_FIELD: Readonly<Record<string, string>> = {
  'tools/call': 'name',
  'tasks/get': 'taskId',
  'tasks/update': 'taskId',
  'tasks/cancel': 'taskId',
};

const bearer = (principal: string): Record<string, string> => ({
  authorization: `Bearer ${principal}`,
});

/** One principal's HTTP client for an endpoint. */
export class Wire {
  private nextId = 1;

  constructor(
    readonly url: string,
    readonly principal: string,
    readonly agent: Agent,
  ) {}

  /** POSTs a body as is and reads the whole answer. */
  post(headers: Record<string, string>, body: string, timeoutMs = 60_000): Promise<Answer> {
    return new Promise((resolve, reject) => {
      const req = request(this.url, {
        method: 'POST',
        agent: this.agent,
        headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) },
      });
      const timer = failAsNoAnswer(req, timeoutMs, '', reject);
      req.on('response', (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('error', () => undefined);
        res.on('end', () => {
          clearTimeout(timer);
          const text = Buffer.concat(chunks).toString('utf8');
          const contentType = String(res.headers['content-type'] ?? '');
          const json = /^text\/event-stream/i.test(contentType)
            ? lastResponse(text)
            : parseMessage(text);
          resolve({ status: res.statusCode ?? 0, contentType, text, json });
        });
      });
      req.end(body);
    });
  }

  /** The body of a 2026-07-28 request, with the envelope declaring the tasks extension. */
  modernBody(method: string, params: Record<string, unknown>, id = this.nextId++): string {
    return JSON.stringify({
      jsonrpc: '2.0',
      id,
      method,
      params: { ...params, _meta: envelope(declaredCapabilities(true), 'hostile-e2e') },
    });
  }

  /** The headers of a 2026-07-28 request: the standard ones, as this principal. */
  modernHeaders(method: string, params: Record<string, unknown>): Record<string, string> {
    const field = NAME_FIELD[method];
    const name = field === undefined ? undefined : params[field];
    return {
      ...standardHeaders(method, typeof name === 'string' ? name : undefined),
      ...bearer(this.principal),
    };
  }

  /** A 2026-07-28 request. */
  modern(method: string, params: Record<string, unknown>, timeoutMs?: number): Promise<Answer> {
    return this.post(
      this.modernHeaders(method, params),
      this.modernBody(method, params),
      timeoutMs,
    );
  }

  /**
   * A 2025-11-25 request (no envelope, no standard headers). It accepts plain JSON only, as the
   * tasks methods answer; `{ stream: true }` accepts an event stream too, as the SDK requires for
   * what it serves (a plain tool's call).
   */
  legacy(
    method: string,
    params: Record<string, unknown>,
    { timeoutMs, stream = false }: { timeoutMs?: number; stream?: boolean } = {},
  ): Promise<Answer> {
    const body = JSON.stringify({ jsonrpc: '2.0', id: this.nextId++, method, params });
    const accept = stream ? 'application/json, text/event-stream' : 'application/json';
    return this.post(legacyHeaders(this.principal, accept), body, timeoutMs);
  }

  /**
   * `subscriptions/listen` for `taskIds` on a connection of `streams` (the Agent the stream holds
   * while it is open); resolves as soon as the response head is in, with the SSE reader of an
   * accepted stream or the JSON of a refusal.
   */
  listen(
    taskIds: string[],
    streams: Agent,
    id: string | number = `sub-${this.nextId++}`,
    timeoutMs = 60_000,
  ): Promise<ListenResponse> {
    const body = JSON.stringify({
      jsonrpc: '2.0',
      id,
      method: 'subscriptions/listen',
      params: {
        notifications: { taskIds },
        _meta: envelope(declaredCapabilities(true), 'hostile-e2e'),
      },
    });
    return new Promise((resolve, reject) => {
      const req = request(this.url, {
        method: 'POST',
        agent: streams,
        headers: {
          ...standardHeaders('subscriptions/listen'),
          ...bearer(this.principal),
          'content-length': String(Buffer.byteLength(body)),
        },
      });
      const timer = failAsNoAnswer(req, timeoutMs, 'listen: ', reject);
      req.on('response', (res) => {
        clearTimeout(timer);
        const headers = new Headers();
        for (const [key, value] of Object.entries(res.headers)) {
          if (value !== undefined)
            headers.set(key, Array.isArray(value) ? value.join(', ') : value);
        }
        const status = res.statusCode ?? 0;
        if (/^text\/event-stream/i.test(headers.get('content-type') ?? '')) {
          // The reader's close() aborts the controller, which ends the request and its socket.
          const controller = new AbortController();
          controller.signal.addEventListener('abort', () => req.destroy(), { once: true });
          res.on('error', () => undefined);
          const body = Readable.toWeb(res) as ReadableStream<Uint8Array>;
          resolve({
            status,
            headers,
            stream: new SseReader(
              body as unknown as globalThis.ReadableStream<Uint8Array>,
              controller,
            ),
          });
          return;
        }
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('error', () => undefined);
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          resolve({ status, headers, text, json: parseMessage(text) });
        });
      });
      req.end(body);
    });
  }
}

/** The last JSON-RPC response (a message with an id) of an event-stream body read to its end. */
function lastResponse(text: string): JsonRpcMessage | undefined {
  let found: JsonRpcMessage | undefined;
  for (const block of text.replace(/\r\n?/g, '\n').split('\n\n')) {
    const data = block
      .split('\n')
      .filter((line) => line.startsWith('data:'))
      .map((line) => line.slice(5).replace(/^ /, ''))
      .join('\n');
    const message = data === '' ? undefined : parseMessage(data);
    if (message?.id !== undefined && (message.result !== undefined || message.error)) {
      found = message;
    }
  }
  return found;
}

/** Runs `work` for each of `count` indexes, at most `concurrency` at a time. */
export async function pool(
  count: number,
  concurrency: number,
  work: (index: number) => Promise<void>,
): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < count) await work(next++);
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, worker));
}
