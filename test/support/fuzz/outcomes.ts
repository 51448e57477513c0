// ----- outcomes --------------------------------------------------------------------------------

export type Outcome =
  | { kind: 'error'; status: number; code: number }
  /** HTTP 202 without a body: a notification, accepted and not answered. */
  | { kind: 'accepted' }
  /** HTTP 200 with a CallToolResult `isError: true` (and no task): tool arguments that fail validation. */
  | { kind: 'toolError' }
  /**
   * An answer by HTTP status alone, body not read as JSON-RPC (still checked for leaks): what
   * Node's parser answers a request line it refuses (400), the app's 404 for a path the router
   * does not send to the endpoint, a HEAD's bodiless 405.
   */
  | { kind: 'http'; status: number }
  /** HTTP 200 with a `tasks/list` result listing nothing (no `nextCursor`): a caller owning no task. */
  | { kind: 'emptyPage' };

const error = (code: number, status: number): Outcome => ({ kind: 'error', code, status });
export const PARSE_ERROR = error(-32700, 400);
export const INVALID_REQUEST = error(-32600, 400);
export const TOO_LARGE = error(-32600, 413);
export const UNSUPPORTED_MEDIA = error(-32600, 415);
export const METHOD_NOT_FOUND = error(-32601, 404);
/** A params error from a handler: in-band, HTTP 200. */
export const INVALID_PARAMS = error(-32602, 200);
/** The classifier's envelope rung (`_meta` missing or malformed): HTTP 400. */
export const INVALID_ENVELOPE = error(-32602, 400);
export const HEADER_MISMATCH = error(-32020, 400);
export const MISSING_CAPABILITY = error(-32021, 400);
export const UNSUPPORTED_VERSION = error(-32022, 400);
export const FORBIDDEN = error(-32000, 403);
/** The SDK's legacy-era handler refusing a posted response or batch under a modern version header. */
export const LEGACY_REFUSED = error(-32000, 400);
export const ACCEPTED: Outcome = { kind: 'accepted' };
/** The endpoint's answer to a method it does not serve (as the SDK answers GET and DELETE). */
export const METHOD_NOT_ALLOWED = error(-32000, 405);
/** The endpoint's answer to a path the router sent it that is not its exact path. */
export const NOT_FOUND = error(-32000, 404);
export const httpStatus = (status: number): Outcome => ({ kind: 'http', status });
export const TOOL_ERROR: Outcome = { kind: 'toolError' };
export const EMPTY_PAGE: Outcome = { kind: 'emptyPage' };
/** What the endpoint's depth limit (64 levels) answers a body nested deeper than that. */
export const TOO_DEEP: readonly Outcome[] = [INVALID_REQUEST, PARSE_ERROR];

const CODE_NAMES: Readonly<Record<number, string>> = {
  [-32700]: 'parse error',
  [-32600]: 'invalid request',
  [-32601]: 'method not found',
  [-32602]: 'invalid params',
  [-32603]: 'internal error',
  [-32020]: 'header mismatch',
  [-32021]: 'missing capability',
  [-32022]: 'unsupported protocol version',
  [-32000]: 'server error (host/origin, legacy)',
};

export function describeOutcome(outcome: Outcome): string {
  if (outcome.kind === 'accepted') return 'HTTP 202 (notification)';
  if (outcome.kind === 'toolError') return 'HTTP 200 tool error result';
  if (outcome.kind === 'http') return `HTTP ${outcome.status} (any body)`;
  if (outcome.kind === 'emptyPage') return 'HTTP 200 tasks/list result listing no task';
  return `${outcome.code} ${CODE_NAMES[outcome.code] ?? ''}, HTTP ${outcome.status}`;
}

export function sameOutcome(a: Outcome, b: Outcome): boolean {
  if (a.kind !== b.kind) return false;
  if (a.kind === 'error' && b.kind === 'error') return a.code === b.code && a.status === b.status;
  if (a.kind === 'http' && b.kind === 'http') return a.status === b.status;
  return true;
}
