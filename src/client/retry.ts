/**
 * How the client rides out a server that restarts or blips: which failures say "the server is
 * away for now", the backoff between tries, and the error raised when it stayed away too long.
 */

/** How long, and how often, the client tries again when the server cannot be reached. */
export interface RetryOptions {
  /**
   * How long a request keeps being tried after its first failure, in ms. Default 60,000; 0 tries
   * once.
   */
  windowMs?: number;
  /** The delay before the first retry, in ms; each retry doubles it, with jitter. Default 250. */
  initialDelayMs?: number;
  /** The longest delay between two tries, in ms. Default 5,000. */
  maxDelayMs?: number;
}

/** The retry options with every default applied. */
export type RetryPolicy = Readonly<Required<RetryOptions>>;

export const DEFAULT_RETRY: RetryPolicy = {
  windowMs: 60_000,
  initialDelayMs: 250,
  maxDelayMs: 5_000,
};

/** `retry: false`: one try, no retry. */
const NO_RETRY: RetryPolicy = { ...DEFAULT_RETRY, windowMs: 0 };

/** Resolves the `retry` option, refusing a value that is no finite, non-negative number. */
export function resolveRetry(option: RetryOptions | false | undefined): RetryPolicy {
  if (option === false) return NO_RETRY;
  if (option === undefined) return DEFAULT_RETRY;
  if (option === null || typeof option !== 'object') {
    throw new TypeError(`retry must be an object or false, got ${String(option)}`);
  }
  const policy = { ...DEFAULT_RETRY };
  for (const key of ['windowMs', 'initialDelayMs', 'maxDelayMs'] as const) {
    const value = option[key];
    if (value === undefined) continue;
    if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
      throw new RangeError(`retry.${key} must be a finite number >= 0, got ${String(value)}`);
    }
    policy[key] = value;
  }
  if (policy.initialDelayMs > policy.maxDelayMs) {
    throw new RangeError(
      `retry.initialDelayMs (${policy.initialDelayMs}) must not exceed retry.maxDelayMs (${policy.maxDelayMs})`,
    );
  }
  return policy;
}

/** HTTP statuses a gateway answers while the server behind it is away. */
const GATEWAY_STATUSES: ReadonlySet<number> = new Set([502, 503, 504]);

/**
 * Error codes of a connection that failed or dropped: refused, reset, timed out, unreachable,
 * a name that does not resolve for now (a container's DNS name is gone while it restarts), and
 * undici's socket errors.
 */
const CONNECTION_CODES: ReadonlySet<string> = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'EHOSTDOWN',
  'ENETUNREACH',
  'ENETDOWN',
  'EAI_AGAIN',
  'ENOTFOUND',
  'UND_ERR_SOCKET',
  'UND_ERR_CLOSED',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
]);

/** Messages of a connection failure that carries no code (a custom fetch's, for example). */
const CONNECTION_MESSAGE = /fetch failed|socket hang up|other side closed|^terminated$/i;

/** Why a try failed in a way a later try may not: the server did not answer, or a gateway did. */
export interface Outage {
  /** The HTTP status a gateway answered (502, 503, 504). */
  readonly status?: number;
  /** The connection error's code (ECONNREFUSED, ECONNRESET, UND_ERR_SOCKET…). */
  readonly code?: string;
  /** The connection was refused: nothing was sent. */
  readonly refused: boolean;
  /** One line for messages: "HTTP 503" or the error and its causes. */
  readonly text: string;
}

/** The errors a failure is made of: the error, its causes and an aggregate's first error. */
function chainOf(error: unknown): unknown[] {
  const chain: unknown[] = [];
  let current = error;
  // Duck-typed: errors from another realm (Jest's VM contexts) are no `instanceof Error` here.
  for (let depth = 0; depth < 8 && current !== undefined && current !== null; depth++) {
    chain.push(current);
    const { cause, errors } = current as { cause?: unknown; errors?: unknown };
    current = Array.isArray(errors) && errors.length > 0 ? errors[0] : cause;
  }
  return chain;
}

/** An error and its causes in one line: "fetch failed: connect ECONNREFUSED … (ECONNREFUSED)". */
export function describeError(error: unknown): string {
  let text = '';
  for (const link of chainOf(error)) {
    const { message, code } = link as { message?: unknown; code?: unknown };
    const line = typeof message === 'string' ? message : String(link);
    if (line !== '' && !text.includes(line)) text = text === '' ? line : `${text}: ${line}`;
    if (typeof code === 'string' && /^E[A-Z]+$/.test(code) && !text.includes(code)) {
      text = `${text} (${code})`;
    }
  }
  return text;
}

/**
 * The outage a thrown error reports, or undefined when it is no connection failure (a TLS
 * certificate refused, a bug in a custom fetch): a known connection code anywhere in its causes,
 * or, when none of them has a code, a message such as "fetch failed" or "socket hang up".
 */
export function connectionOutage(error: unknown): Outage | undefined {
  const chain = chainOf(error);
  const codes = chain
    .map((link) => (link as { code?: unknown }).code)
    .filter((code): code is string => typeof code === 'string');
  const code = codes.find((candidate) => CONNECTION_CODES.has(candidate));
  if (code === undefined) {
    const plain =
      codes.length === 0 &&
      chain.some((link) =>
        CONNECTION_MESSAGE.test(String((link as { message?: unknown }).message)),
      );
    if (!plain) return undefined;
  }
  return {
    ...(code !== undefined && { code }),
    refused: codes.includes('ECONNREFUSED'),
    text: describeError(error),
  };
}

/** The outage an HTTP status reports (a gateway's 502, 503 or 504), or undefined. */
export function statusOutage(status: number): Outage | undefined {
  return GATEWAY_STATUSES.has(status)
    ? { status, refused: false, text: `HTTP ${status}` }
    : undefined;
}

/**
 * The outage behind a failed `subscriptions/listen`, or undefined when trying again would not
 * help: a JSON-RPC error (the server refused the filter or has no room), or an HTTP status other
 * than a gateway's. A stream that ended before its acknowledgement counts as an outage.
 */
export function listenOutage(error: unknown): Outage | undefined {
  const { code, status, data } = error as { code?: unknown; status?: unknown; data?: unknown };
  if (typeof code === 'number') return undefined;
  const httpStatus =
    typeof status === 'number'
      ? status
      : typeof (data as { status?: unknown } | undefined)?.status === 'number'
        ? (data as { status: number }).status
        : undefined;
  if (httpStatus !== undefined) return statusOutage(httpStatus);
  return (
    connectionOutage(error) ?? { refused: false, text: describeError(error) || 'the stream ended' }
  );
}

/**
 * The MCP server could not be reached for as long as the client was told to try (option
 * `retry.windowMs`): connections refused or dropped, or a gateway answering 502, 503 or 504. The
 * task, when there is one, may well have gone on on the server: read it again later with
 * `getTask(taskId)`, or follow it with `follow(taskId)`. Not a `TaskFailedError`: the task did not fail, the server was away.
 */
export class TaskServerUnreachableError extends Error {
  /** The endpoint. */
  readonly url: string;
  /** The request that could not be made (`tasks/get`, `tools/call`…). */
  readonly method: string;
  /** The task the request was about, when there is one. */
  readonly taskId: string | undefined;
  /** The HTTP status of the last try, when a gateway answered it (502, 503 or 504). */
  readonly status: number | undefined;
  /** The connection error code of the last try (ECONNREFUSED, ECONNRESET…), when it had one. */
  readonly errorCode: string | undefined;
  /** How many times the request was sent. */
  readonly attempts: number;
  /** How long the client tried, from the first failure to the last, in ms. */
  readonly waitedMs: number;

  constructor(
    details: {
      url: string;
      method: string;
      taskId?: string | undefined;
      outage: Outage;
      attempts: number;
      waitedMs: number;
    },
    options?: ErrorOptions,
  ) {
    const { url, method, taskId, outage, attempts, waitedMs } = details;
    const tries = `${attempts} ${attempts === 1 ? 'attempt' : 'attempts'}`;
    const span = waitedMs > 0 ? ` for ${(waitedMs / 1000).toFixed(1)} s (${tries})` : ` (${tries})`;
    super(
      `${method}: the MCP server at ${url} was unreachable${span}; last: ${outage.text}`,
      options,
    );
    this.name = 'TaskServerUnreachableError';
    this.url = url;
    this.method = method;
    this.taskId = taskId;
    this.status = outage.status;
    this.errorCode = outage.code;
    this.attempts = attempts;
    this.waitedMs = waitedMs;
  }
}

/** The TaskServerUnreachableError behind an error (itself, or one of its causes). */
export function findUnreachable(error: unknown): TaskServerUnreachableError | undefined {
  return chainOf(error).find(
    (link): link is TaskServerUnreachableError => link instanceof TaskServerUnreachableError,
  );
}

/** Rethrows the TaskServerUnreachableError behind `error` when there is one, else `error`. */
export function rethrowUnreachable(error: unknown): never {
  throw findUnreachable(error) ?? error;
}

/**
 * The tries of one request: exponential backoff with jitter (each delay between half and all of
 * `initialDelayMs × 2^n`, at most `maxDelayMs`), inside a window that opens at the first failure
 * and lasts `windowMs`. The last delay is cut to end with the window, so the last try comes at its
 * end.
 */
export class Backoff {
  private failures = 0;
  private since: number | undefined;

  constructor(
    private readonly policy: RetryPolicy,
    private readonly random: () => number = Math.random,
  ) {}

  /** How many tries have failed since the window opened. */
  get failed(): number {
    return this.failures;
  }

  /**
   * How long since the window opened (the first failure), in ms; 0 before a second try (no wait
   * came between tries, however long the first failure took to be counted).
   */
  get waitedMs(): number {
    return this.since === undefined || this.failures < 2 ? 0 : Date.now() - this.since;
  }

  /**
   * Counts a failed try, then waits before the next one. Resolves true when the next try may go,
   * false when the window is over or `stop` was aborted (before or during the wait); rejects with
   * `signal`'s reason when it is aborted.
   */
  async next(signal?: AbortSignal, stop?: AbortSignal): Promise<boolean> {
    const now = Date.now();
    this.since ??= now;
    const step = this.failures;
    this.failures += 1;
    const left = this.since + this.policy.windowMs - now;
    if (left <= 0 || stop?.aborted === true) return false;
    const ceiling = Math.min(this.policy.maxDelayMs, this.policy.initialDelayMs * 2 ** step);
    const delay = Math.min(left, ceiling / 2 + (this.random() * ceiling) / 2);
    return pause(delay, signal, stop);
  }

  /** The server answered: the next failure opens a new window. */
  answered(): void {
    this.since = undefined;
  }

  /** Things went well for a while: the delays start again from `initialDelayMs`. */
  calm(): void {
    this.failures = 0;
  }
}

/** Waits `ms`; false when `stop` is aborted first, a rejection with `signal`'s reason. */
function pause(ms: number, signal?: AbortSignal, stop?: AbortSignal): Promise<boolean> {
  return new Promise<boolean>((resolve, reject) => {
    if (signal?.aborted === true) {
      reject(signal.reason);
      return;
    }
    const finish = (): void => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      stop?.removeEventListener('abort', onStop);
    };
    const onAbort = (): void => {
      finish();
      reject(signal!.reason);
    };
    const onStop = (): void => {
      finish();
      resolve(false);
    };
    const timer = setTimeout(() => {
      finish();
      resolve(true);
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
    stop?.addEventListener('abort', onStop, { once: true });
  });
}
