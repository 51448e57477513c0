import fc from 'fast-check';
import { get, type J, Raw, ser } from './json.js';
import type { Outcome } from './outcomes.js';
import { standardHeaders } from './requests.js';

export const TOOLS: readonly string[] = [
  'echo',
  'add_slowly',
  'greet',
  'wait_for_cancel',
  'fail_with',
];
export const TASK_TOOLS: ReadonlySet<string> = new Set([
  'add_slowly',
  'greet',
  'wait_for_cancel',
  'fail_with',
]);

// ----- cases -----------------------------------------------------------------------------------

export type Header = readonly [name: string, value: string];

export interface FuzzCase {
  family: string;
  /** What is wrong with the request, in a few words. */
  label: string;
  headers: readonly Header[];
  body: Buffer;
  /** Send the body with chunked transfer encoding (no Content-Length). */
  chunked: boolean;
  /** The answers the endpoint may give (any one of them). */
  expect: readonly Outcome[];
  /** The id an error answer may echo besides `null`. */
  id: string | number | null;
  /** Nested deeper than an MCP message needs: a depth-limit refusal is fine too (TOO_DEEP). */
  deep: boolean;
  /**
   * Sent byte for byte on a connection of its own (http-forms family): this method and request
   * target instead of `POST /mcp`; `{self}` in the target stands for the server's own authority
   * (`127.0.0.1:<port>`), as does `{self}` in a header value.
   */
  form?: { method: string; target: string };
  /**
   * A request that must get the very same answer (status, content type, error or result; the id
   * aside), sent right after this one: a made-up task id beside a foreign one, for instance.
   */
  twin?: FuzzCase;
  /** An answer slower than this (ms) is a violation; default the suite's SLOW_MS. */
  slowMs?: number;
  /**
   * The answer may come as an event stream holding one JSON-RPC message (the SDK's 2025-11-25
   * handler answers so a client that accepts `text/event-stream`): judged as that message.
   */
  sse?: boolean;
}

/** What the generators need to know about the app under test. */
export interface Targets {
  /** The principal (demo auth: `Authorization: Bearer <owner>`) owning every task below. */
  owner: string;
  /** At least two `working` tasks. */
  working: readonly string[];
  /** An `input_required` task and its outstanding key. */
  inputRequired: string;
  inputKey: string;
  completed: string;
  failed: string;
  /** An `input_required` task only the update-values family aims at, and its outstanding key. */
  victim: string;
  victimKey: string;
  maxBodyBytes: number;
  /** For each task above, the `tasks/list` cursor the store hands out right after it. */
  cursors?: readonly string[];
  /** A task of the owner's whose TTL has run out (not yet swept). */
  expired?: string;
}

/** A case before its headers and body text are settled. */
export interface Draft {
  label: string;
  message: J;
  /** `Authorization` header value; none = anonymous. */
  auth?: string;
  /** The headers as sent; default: the standard ones for the message. */
  headers?: readonly Header[];
  expect: readonly Outcome[];
  deep?: boolean;
  twin?: Draft;
  slowMs?: number;
  sse?: boolean;
}

export function finish(family: string, draft: Draft): FuzzCase {
  const written = get(draft.message, 'id');
  // What the server reads: `1e300` written as is is the number 1e300.
  const id: unknown =
    written instanceof Raw && written.text.length < 64 ? JSON.parse(written.text) : written;
  return {
    family,
    label: draft.label,
    headers: draft.headers ?? standardHeaders(draft.message, draft.auth),
    body: Buffer.from(ser(draft.message), 'utf8'),
    chunked: false,
    expect: draft.expect,
    id: typeof id === 'string' || (typeof id === 'number' && Number.isFinite(id)) ? id : null,
    deep: draft.deep ?? false,
    ...(draft.twin !== undefined && { twin: finish(family, draft.twin) }),
    ...(draft.slowMs !== undefined && { slowMs: draft.slowMs }),
    ...(draft.sse !== undefined && { sse: draft.sse }),
  };
}

export const family =
  (name: string) =>
  (drafts: fc.Arbitrary<Draft>): fc.Arbitrary<FuzzCase> =>
    drafts.map((draft) => finish(name, draft));
