import fc from 'fast-check';
import {
  CLIENT_CAPABILITIES_KEY,
  CLIENT_INFO_KEY,
  PROTOCOL_VERSION,
  PROTOCOL_VERSION_KEY,
  TASKS_EXTENSION,
} from './wire.js';

/**
 * Generators for fuzz.e2e-spec.ts: malformed requests to the MCP endpoint, each with the answers
 * the endpoint may give it. Every generated request is wrong in at least one way the endpoint must
 * refuse (or, for a notification, must accept without acting on); the expected answers are worked
 * out per case from the rules the endpoint implements (see errors.e2e-spec.ts and src/mcp).
 *
 * Bodies are built as JSON *text* (Obj keeps its entries in order, so `__proto__`, `constructor`
 * and `prototype` are real own keys once the server parses them, and keys may repeat); strings that
 * the server may echo back are drawn from an alphabet without `/`, `:`, `<`, `\` and newlines, so
 * the leak checks (stack traces, file paths, HTML) can only fire on what the server adds itself.
 */

export const TOOLS: readonly string[] = [
  'echo',
  'add_slowly',
  'greet',
  'wait_for_cancel',
  'fail_with',
];
const TASK_TOOLS: ReadonlySet<string> = new Set([
  'add_slowly',
  'greet',
  'wait_for_cancel',
  'fail_with',
]);

// ----- JSON text ------------------------------------------------------------------------------

/** A JSON object as its entries, in order: any key (`__proto__` included) stays an own key. */
export class Obj {
  constructor(readonly entries: ReadonlyArray<readonly [string, J]>) {}
}

/** JSON text written as is: deep nesting, numbers such as `1e999`. */
export class Raw {
  constructor(readonly text: string) {}
}

export type J = null | boolean | number | string | Obj | Raw | readonly J[];

/** Leaves the key out (see `put`). */
export const ABSENT = Symbol('absent');
export type Maybe<T> = T | typeof ABSENT;

export function obj(record: Readonly<Record<string, J>>): Obj {
  return new Obj(Object.entries(record));
}

/** The object with `key` set to `value` (replacing every entry of that key), or removed. */
export function put(target: Obj, key: string, value: Maybe<J>): Obj {
  const kept = target.entries.filter(([name]) => name !== key);
  return new Obj(value === ABSENT ? kept : [...kept, [key, value]]);
}

/** What `JSON.parse` makes of `value[key]` (the last entry wins); `undefined` when absent. */
export function get(value: J | undefined, key: string): J | undefined {
  if (!(value instanceof Obj)) return undefined;
  for (let i = value.entries.length - 1; i >= 0; i--) {
    if (value.entries[i]![0] === key) return value.entries[i]![1];
  }
  return undefined;
}

export function ser(value: J): string {
  if (value instanceof Raw) return value.text;
  if (value instanceof Obj) {
    return `{${value.entries.map(([key, item]) => `${JSON.stringify(key)}:${ser(item)}`).join(',')}}`;
  }
  if (Array.isArray(value)) return `[${(value as readonly J[]).map(ser).join(',')}]`;
  return JSON.stringify(value) ?? 'null';
}

function show(value: Maybe<J> | undefined, max = 60): string {
  if (value === ABSENT || value === undefined) return '(absent)';
  const text = ser(value);
  return text.length > max ? `${text.slice(0, max)}… (${text.length} chars)` : text;
}

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
  | { kind: 'http'; status: number };

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
  return `${outcome.code} ${CODE_NAMES[outcome.code] ?? ''}, HTTP ${outcome.status}`;
}

export function sameOutcome(a: Outcome, b: Outcome): boolean {
  if (a.kind !== b.kind) return false;
  if (a.kind === 'error' && b.kind === 'error') return a.code === b.code && a.status === b.status;
  if (a.kind === 'http' && b.kind === 'http') return a.status === b.status;
  return true;
}

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
  };
}

const family =
  (name: string) =>
  (drafts: fc.Arbitrary<Draft>): fc.Arbitrary<FuzzCase> =>
    drafts.map((draft) => finish(name, draft));

// ----- standard headers ------------------------------------------------------------------------

/** Which params field `Mcp-Name` mirrors, per method. */
const NAME_SOURCE: Readonly<Record<string, string>> = {
  'tools/call': 'name',
  'prompts/get': 'name',
  'resources/read': 'uri',
  'tasks/get': 'taskId',
  'tasks/update': 'taskId',
  'tasks/cancel': 'taskId',
};

function nameSource(method: string): string | undefined {
  return Object.hasOwn(NAME_SOURCE, method) ? NAME_SOURCE[method] : undefined;
}

/** A header value sent as is: printable ASCII without leading or trailing blanks. */
const PLAIN_HEADER = /^(?:[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?)?$/;

/** The `Mcp-Name` a client sends for `value`: plain, a Base64 sentinel, or none when too long. */
export function nameHeader(value: string): string | undefined {
  if (value.length <= 4096 && PLAIN_HEADER.test(value) && !value.startsWith('=?base64?')) {
    return value;
  }
  const bytes = Buffer.from(value, 'utf8');
  if (bytes.length > 3000 || bytes.toString('utf8') !== value) return undefined;
  return `=?base64?${bytes.toString('base64')}?=`;
}

/** What the endpoint makes of an `Mcp-Name` value (after trimming); `undefined`: a broken sentinel. */
function decodeName(value: string): string | undefined {
  if (!value.startsWith('=?base64?')) return value;
  const match = /^=\?base64\?([A-Za-z0-9+/]*={0,2})\?=$/.exec(value);
  if (!match || match[1]!.length % 4 !== 0) return undefined;
  const bytes = Buffer.from(match[1]!, 'base64');
  const text = bytes.toString('utf8');
  return Buffer.from(text, 'utf8').equals(bytes) ? text : undefined;
}

/** Headers whose repeated lines Node keeps the first of; others are joined with ", ". */
const FIRST_WINS: ReadonlySet<string> = new Set([
  'content-type',
  'content-length',
  'host',
  'authorization',
  'user-agent',
]);

/** The value the server reads for a header sent as these lines. */
export function headerValue(headers: readonly Header[], name: string): string | undefined {
  const values = headers.filter(([key]) => key.toLowerCase() === name).map(([, value]) => value);
  if (values.length === 0) return undefined;
  return FIRST_WINS.has(name) ? values[0] : values.join(', ');
}

const stripOws = (value: string): string => value.replace(/^[ \t]+|[ \t]+$/g, '');

export function standardHeaders(message: J, auth?: string): Header[] {
  const method = get(message, 'method');
  const params = get(message, 'params');
  const headers: Header[] = [
    ['content-type', 'application/json'],
    ['accept', 'application/json, text/event-stream'],
    ['mcp-protocol-version', PROTOCOL_VERSION],
  ];
  if (typeof method === 'string') {
    if (PLAIN_HEADER.test(method)) headers.push(['mcp-method', method]);
    const field = nameSource(method);
    const value = field === undefined ? undefined : get(params, field);
    if (typeof value === 'string') {
      const name = nameHeader(value);
      if (name !== undefined) headers.push(['mcp-name', name]);
    }
  }
  if (auth !== undefined) headers.push(['authorization', auth]);
  return headers;
}

const JSON_MEDIA_TYPE = /^application\/([\w.+-]+\+)?json\s*(;|$)/i;

/**
 * What the endpoint answers a modern request with a valid envelope for its headers alone, in the
 * order it checks them: host and origin (403), Content-Type (415), then the standard headers
 * (-32020). `undefined`: the headers are fine. `hostile`: the request carries a foreign Host or
 * Origin.
 */
export function headerVerdict(
  headers: readonly Header[],
  message: J,
  hostile: boolean,
): Outcome[] | undefined {
  const method = get(message, 'method') as string;
  const type = headerValue(headers, 'content-type');
  const badType = type === undefined || !JSON_MEDIA_TYPE.test(type);
  // Under Fastify the media type is settled before the guards run.
  if (hostile) return badType ? [FORBIDDEN, UNSUPPORTED_MEDIA] : [FORBIDDEN];
  if (badType) return [UNSUPPORTED_MEDIA];
  const version = headerValue(headers, 'mcp-protocol-version');
  const methodHeader = headerValue(headers, 'mcp-method');
  const name = headerValue(headers, 'mcp-name');
  if (version !== undefined && stripOws(version) !== PROTOCOL_VERSION) return [HEADER_MISMATCH];
  if (methodHeader !== undefined && stripOws(methodHeader) !== method) return [HEADER_MISMATCH];
  if (version === undefined || methodHeader === undefined) return [HEADER_MISMATCH];
  const field = nameSource(method);
  if (field !== undefined) {
    const raw = get(get(message, 'params'), field);
    const bodyValue = typeof raw === 'string' ? raw : undefined;
    if (name === undefined) {
      if (bodyValue !== undefined) return [HEADER_MISMATCH];
    } else {
      const decoded = decodeName(name.trim());
      if (decoded === undefined || (bodyValue !== undefined && decoded !== bodyValue)) {
        return [HEADER_MISMATCH];
      }
    }
  }
  return undefined;
}

// ----- messages --------------------------------------------------------------------------------

const TASKS_DECLARED = obj({ extensions: obj({ [TASKS_EXTENSION]: obj({}) }) });

export function envelope(tasks: boolean): Obj {
  return obj({
    [PROTOCOL_VERSION_KEY]: PROTOCOL_VERSION,
    [CLIENT_INFO_KEY]: obj({ name: 'fuzz', version: '1.0.0' }),
    [CLIENT_CAPABILITIES_KEY]: tasks ? TASKS_DECLARED : obj({}),
  });
}

/** A modern request: `params` plus the per-request envelope. */
export function rpc(
  method: string,
  params: Obj,
  { id = 1, tasks = true }: { id?: J; tasks?: boolean } = {},
): Obj {
  return obj({ jsonrpc: '2.0', id, method, params: put(params, '_meta', envelope(tasks)) });
}

/** A request that would succeed if sent as it is (faults are added on top of it). */
export interface Base {
  label: string;
  message: Obj;
  auth?: string;
}

export function validBases(t: Targets): Base[] {
  const auth = bearer(t.owner);
  return [
    {
      label: 'tools/call echo',
      message: rpc('tools/call', obj({ name: 'echo', arguments: obj({ text: 'hi' }) }), {
        tasks: false,
      }),
    },
    {
      label: 'tools/call add_slowly (would start a task)',
      message: rpc(
        'tools/call',
        obj({ name: 'add_slowly', arguments: obj({ a: 1, b: 2, delayMs: 0 }) }),
      ),
      auth,
    },
    {
      label: 'tasks/get of an own working task',
      message: rpc('tasks/get', obj({ taskId: t.working[0]! })),
      auth,
    },
    {
      label: 'tasks/cancel of an own working task (would cancel it)',
      message: rpc('tasks/cancel', obj({ taskId: t.working[1]! })),
      auth,
    },
    {
      label: 'tasks/update answering an own input_required task (would resume it)',
      message: rpc(
        'tasks/update',
        obj({
          taskId: t.inputRequired,
          inputResponses: obj({
            [t.inputKey]: obj({ action: 'accept', content: obj({ name: 'Ada' }) }),
          }),
        }),
      ),
      auth,
    },
    {
      label: 'subscriptions/listen to an own task (would open a stream)',
      message: rpc(
        'subscriptions/listen',
        obj({ notifications: obj({ taskIds: [t.working[0]!] }) }),
      ),
      auth,
    },
  ];
}

export const bearer = (principal: string): string => `Bearer ${principal}`;

// ----- values ----------------------------------------------------------------------------------

const UNITS = [
  ...'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789',
  ...'-_.~!$&()*+,;=@ "#%^`|?[]{}',
  "'",
  '\t',
  'é',
  'ß',
  '中',
  '😀',
  '\u00a0',
  '\u200b',
  '\u2028',
  '\ufeff',
];

/** Text safe to be echoed (no `/`, `:`, `<`, `\`, newline). */
export const text = (minLength = 0, maxLength = 24): fc.Arbitrary<string> =>
  fc.string({ unit: fc.constantFrom(...UNITS), minLength, maxLength });

/** A long text of `min`..`max` characters, built by repetition (cheap, no shrinking needed). */
export const longText = (min: number, max: number): fc.Arbitrary<string> =>
  fc
    .tuple(fc.integer({ min, max }), fc.constantFrom('x', 'é', 'ab ', '😀', 'Z9_'))
    .map(([length, unit]) => unit.repeat(Math.ceil(length / unit.length)).slice(0, length));

const key = fc.oneof(text(1, 10), fc.constantFrom('id', 'name', 'type', 'value', '0', '$ref'));

const oddNumbers = fc.constantFrom(
  new Raw('1e999'),
  new Raw('-1e999'),
  new Raw('1E+2'),
  new Raw('0.0000000000000000000001'),
  new Raw('123456789012345678901234567890'),
);
const number: fc.Arbitrary<J> = fc.oneof(
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  oddNumbers,
);
const scalar: fc.Arbitrary<J> = fc.oneof(number, fc.boolean(), fc.constant(null), text());

/** Any JSON value, a few levels deep. */
export const json: fc.Arbitrary<J> = fc.letrec<{ value: J; object: Obj }>((tie) => ({
  value: fc.oneof({ maxDepth: 3 }, scalar, fc.array(tie('value'), { maxLength: 4 }), tie('object')),
  object: fc
    .array(fc.tuple(key, tie('value')), { maxLength: 4 })
    .map((entries) => new Obj(entries)),
})).value;

const anObject: fc.Arbitrary<Obj> = json
  .filter((value): value is Obj => value instanceof Obj)
  .map((value) => value);
const anArray: fc.Arbitrary<J> = fc.array(json, { maxLength: 4 });

const notString: fc.Arbitrary<J> = fc.oneof(
  number,
  fc.boolean(),
  fc.constant(null),
  anArray,
  anObject,
);
const notObject: fc.Arbitrary<J> = fc.oneof(
  number,
  fc.boolean(),
  fc.constant(null),
  text(),
  anArray,
);
const notBoolean: fc.Arbitrary<J> = fc.oneof(
  number,
  fc.constant(null),
  fc.constantFrom('true', 'false', ''),
  anArray,
  anObject,
);
/** Not an array of strings: no array at all, or an array with a non-string in it. */
const notStringArray: fc.Arbitrary<J> = fc.oneof(
  number,
  fc.boolean(),
  fc.constant(null),
  text(),
  anObject,
  fc
    .tuple(fc.array(text(), { maxLength: 3 }), notString, fc.array(text(), { maxLength: 3 }))
    .map(([before, odd, after]) => [...before, odd, ...after]),
);
/** Not a finite number (class-validator's @IsNumber refuses it; nothing converts it). */
const notNumber: fc.Arbitrary<J> = fc.oneof(
  text(),
  fc.boolean(),
  fc.constant(null),
  anArray,
  anObject,
  fc.constantFrom(new Raw('1e999'), new Raw('-1e999')),
);
const notInteger: fc.Arbitrary<J> = fc.oneof(
  notNumber,
  fc
    .double({ noNaN: true, noDefaultInfinity: true, min: -1e9, max: 1e9 })
    .filter((value) => !Number.isInteger(value)),
);
const idArb: fc.Arbitrary<J> = fc.oneof(
  fc.integer({ min: -1_000_000, max: 1_000_000_000 }),
  text(0, 16),
);
const absentOr = <T>(arb: fc.Arbitrary<T>): fc.Arbitrary<Maybe<T>> =>
  fc.oneof(arb, fc.constant(ABSENT));

/** Principals other than the owner, as `Authorization` values (or anonymous). */
const strangers = (t: Targets): fc.Arbitrary<string | undefined> =>
  fc.constantFrom(
    undefined,
    bearer('bob'),
    bearer(t.owner.toUpperCase()),
    bearer(`${t.owner}2`),
    `Basic ${Buffer.from(`${t.owner}:x`).toString('base64')}`,
    'Bearer',
    `${t.owner}`,
  );

/** Task ids no task has: shapes near the real ones, prototype names, empty, long. */
const unknownTaskIds = (t: Targets): fc.Arbitrary<string> =>
  fc
    .oneof(
      text(0, 40),
      fc.constantFrom(
        '',
        '__proto__',
        'constructor',
        'prototype',
        'toString',
        'hasOwnProperty',
        `${t.working[0]}x`,
        t.working[0]!.slice(0, -1),
        t.working[0]!.toUpperCase(),
        t.working[0]!.toLowerCase(),
        `${t.working[0]} `,
        ` ${t.working[0]}`,
        `${t.working[0]}\u0000`,
        `${t.working[0]},${t.working[1]}`,
      ),
      longText(1000, 6000),
    )
    .filter((id) => ![...t.working, t.inputRequired, t.completed, t.failed, t.victim].includes(id));

const expectByName = (name: string, ok: readonly Outcome[]): readonly Outcome[] =>
  nameHeader(name) === undefined ? [HEADER_MISMATCH] : ok;

// ----- family: broken JSON ---------------------------------------------------------------------

function parses(bytes: Buffer): boolean {
  try {
    JSON.parse(bytes.toString('utf8'));
    return true;
  } catch {
    return false;
  }
}

const INVALID_JSON_TEXTS = [
  `{'jsonrpc':'2.0','id':1,'method':'tasks/get'}`,
  '{"jsonrpc":"2.0","id":1,}',
  '[1,2,]',
  '{"id":NaN}',
  '{"id":Infinity}',
  '{"id":-Infinity}',
  '{"id":undefined}',
  '{jsonrpc:"2.0"}',
  '{"id":01}',
  '{"id":0x10}',
  '{"id":1.}',
  '{"id":.5}',
  '{"id":+1}',
  '{"id":-}',
  '{"a":"\\x41"}',
  '{"a":"\\u12"}',
  '{"a":"\\q"}',
  '{"a":"tab\there"}',
  '{"a":"nul\u0000here"}',
  '/* comment */ {}',
  '{} // comment',
  '{"a" 1}',
  '{"a":1 "b":2}',
  '"unterminated',
  'nul',
  'tru',
  'True',
  'None',
  '{"a":[}',
  '{"a":{]}',
  '}{',
  '{}{}',
  '{"jsonrpc":"2.0"}\u0000',
  '\u0000',
  '\ufeff{"jsonrpc":"2.0","id":1,"method":"ping"}',
  ")]}'\n{}",
  '<?xml version="1.0"?><a/>',
  'jsonrpc=2.0&id=1',
  '   ',
  '\n',
];

/** Text that is not JSON: a request broken in one of many ways. */
export function brokenJson(t: Targets): fc.Arbitrary<FuzzCase> {
  const source = fc.constantFrom(...validBases(t));
  type Mutation = { label: string; body: Buffer };
  const mutate = (bytes: Buffer): fc.Arbitrary<Mutation> =>
    fc.oneof(
      fc.nat(bytes.length - 1).map((at) => ({
        label: `truncated to ${at} of ${bytes.length} bytes`,
        body: bytes.subarray(0, at),
      })),
      fc
        .tuple(fc.nat(bytes.length), fc.uint8Array({ minLength: 1, maxLength: 8 }))
        .map(([at, junk]) => ({
          label: `${junk.length} garbage bytes inserted at ${at}`,
          body: Buffer.concat([bytes.subarray(0, at), Buffer.from(junk), bytes.subarray(at)]),
        })),
      fc
        .tuple(fc.nat(bytes.length - 1), fc.uint8Array({ minLength: 1, maxLength: 4 }))
        .map(([at, junk]) => {
          const body = Buffer.from(bytes);
          body.set(junk.subarray(0, body.length - at), at);
          return { label: `bytes overwritten at ${at}`, body };
        }),
      fc.tuple(fc.nat(bytes.length - 1), fc.integer({ min: 1, max: 16 })).map(([at, length]) => ({
        label: `${length} bytes deleted at ${at}`,
        body: Buffer.concat([bytes.subarray(0, at), bytes.subarray(at + length)]),
      })),
      fc
        .constantFrom(',', '}', ']', 'x', ' garbage', '{}', ',{"jsonrpc":"2.0"}', '\u0000', '"')
        .map((tail) => ({
          label: `trailing ${JSON.stringify(tail)}`,
          body: Buffer.concat([bytes, Buffer.from(tail)]),
        })),
      fc.constantFrom('\ufeff', ")]}'", 'for(;;);', '\u0000', 'x').map((head) => ({
        label: `prefixed with ${JSON.stringify(head)}`,
        body: Buffer.concat([Buffer.from(head), bytes]),
      })),
      fc
        .tuple(fc.integer({ min: 1, max: 60_000 }), fc.constantFrom('[', '{"a":', '[{"a":'))
        .map(([depth, open]) => ({
          label: `${depth} × ${JSON.stringify(open)} never closed`,
          body: Buffer.from(open.repeat(depth)),
        })),
      fc.constantFrom(...INVALID_JSON_TEXTS).map((invalid) => ({
        label: `not JSON: ${JSON.stringify(invalid.slice(0, 40))}`,
        body: Buffer.from(invalid),
      })),
      fc.uint8Array({ minLength: 1, maxLength: 200 }).map((junk) => ({
        label: `${junk.length} random bytes`,
        body: Buffer.from(junk),
      })),
      fc.constant({ label: 'empty body', body: Buffer.alloc(0) }),
    );
  return source
    .chain((base) => mutate(Buffer.from(ser(base.message))).map((mutation) => ({ base, mutation })))
    .filter(({ mutation }) => !parses(mutation.body))
    .map(({ base, mutation }) => ({
      family: 'broken-json',
      label: `${base.label}: ${mutation.label}`,
      headers: standardHeaders(base.message, base.auth),
      body: mutation.body,
      chunked: false,
      // An empty body may count as "no message" rather than "bad JSON" (errors.e2e-spec.ts).
      expect: mutation.body.length === 0 ? [PARSE_ERROR, INVALID_REQUEST] : [PARSE_ERROR],
      id: null,
      deep: false,
    }));
}

// ----- family: bodies near and over the size limit ---------------------------------------------

/** Bodies padded to just under, at, just over and far over `maxBodyBytes`; some chunked. */
export function hugeBodies(t: Targets): fc.Arbitrary<FuzzCase> {
  const limit = t.maxBodyBytes;
  const bases: Array<{ label: string; message: (pad: string) => Obj; expect: Outcome }> = [
    {
      label: 'tasks/get, taskId: 5',
      message: (pad) => rpc('tasks/get', obj({ taskId: 5, pad })),
      expect: INVALID_PARAMS,
    },
    {
      label: 'tools/call echo, text: 5',
      message: (pad) => rpc('tools/call', obj({ name: 'echo', arguments: obj({ text: 5, pad }) })),
      expect: TOOL_ERROR,
    },
  ];
  return fc
    .record({
      base: fc.constantFrom(...bases),
      size: fc.oneof(
        fc.integer({ min: limit - 48, max: limit + 48 }),
        fc.integer({ min: limit + 1, max: 2 * limit }),
      ),
      chunked: fc.boolean(),
    })
    .map(({ base, size, chunked }) => {
      const bare = Buffer.byteLength(ser(base.message('')));
      const message = base.message('x'.repeat(Math.max(0, size - bare)));
      const body = Buffer.from(ser(message));
      return {
        family: 'huge-body',
        label: `${base.label}, ${body.length} bytes (limit ${limit})${chunked ? ', chunked' : ''}`,
        headers: standardHeaders(message),
        body,
        chunked,
        expect: [body.length > limit ? TOO_LARGE : base.expect],
        id: 1,
        deep: false,
      };
    });
}

// ----- family: JSON-RPC envelopes --------------------------------------------------------------

const BAD_JSONRPC: J[] = ['1.0', '2', '2.00', ' 2.0', '2.0 ', '', 2, null, true, [], obj({})];
const OLD_OR_ODD_VERSIONS = [
  '2025-11-25',
  '2025-06-18',
  '2024-11-05',
  'garbage',
  '2026-07-29',
  '9999',
];

/** Valid JSON that is not a valid modern JSON-RPC request: the envelope is wrong. */
export function envelopes(t: Targets): fc.Arbitrary<Draft> {
  const base = fc.constantFrom(...validBases(t));
  const withBase = <T>(
    fault: fc.Arbitrary<T>,
    make: (base: Base, fault: T) => Draft,
  ): fc.Arbitrary<Draft> => fc.tuple(base, fault).map(([b, f]) => make(b, f));
  const params = (b: Base): Obj => get(b.message, 'params') as Obj;
  const meta = (b: Base): Obj => get(params(b), '_meta') as Obj;
  const withMeta = (b: Base, value: Maybe<J>): Obj =>
    put(b.message, 'params', put(params(b), '_meta', value));
  const withMetaKey = (b: Base, name: string, value: Maybe<J>): Obj =>
    withMeta(b, put(meta(b), name, value));
  return fc.oneof(
    withBase(absentOr(fc.constantFrom(...BAD_JSONRPC)), (b, value) => ({
      label: `${b.label}, jsonrpc: ${show(value)}`,
      message: put(b.message, 'jsonrpc', value),
      auth: b.auth,
      expect: [INVALID_REQUEST],
    })),
    withBase(
      fc.oneof(
        fc.boolean(),
        fc.constant(null),
        anArray,
        anObject,
        fc.double({ noNaN: true, noDefaultInfinity: true }).filter((n) => !Number.isInteger(n)),
        fc.constantFrom(new Raw('1e999'), new Raw('1e300'), new Raw('-1e300')),
      ),
      (b, id) => ({
        label: `${b.label}, id: ${show(id)}`,
        message: put(b.message, 'id', id),
        auth: b.auth,
        expect: [INVALID_REQUEST],
      }),
    ),
    withBase(absentOr(notString), (b, method) => ({
      label: `${b.label}, method: ${show(method)}`,
      message: put(b.message, 'method', method),
      auth: b.auth,
      expect: [INVALID_REQUEST],
    })),
    withBase(notObject, (b, value) => ({
      label: `${b.label}, params: ${show(value)}`,
      message: put(b.message, 'params', value),
      auth: b.auth,
      expect: [INVALID_REQUEST],
    })),
    withBase(fc.constant(ABSENT), (b) => ({
      label: `${b.label}, no params`,
      message: put(b.message, 'params', ABSENT),
      auth: b.auth,
      expect: [INVALID_ENVELOPE],
    })),
    withBase(absentOr(notObject), (b, value) => ({
      label: `${b.label}, params._meta: ${show(value)}`,
      message: withMeta(b, value),
      auth: b.auth,
      // No _meta: the version header names an envelope the body lacks. A _meta that is not an
      // object fails the JSON-RPC request shape itself.
      expect: value === ABSENT ? [INVALID_ENVELOPE] : [INVALID_REQUEST, INVALID_ENVELOPE],
    })),
    withBase(fc.oneof(fc.constant(ABSENT), notString), (b, value) => ({
      label: `${b.label}, _meta protocolVersion: ${show(value)}`,
      message: withMetaKey(b, PROTOCOL_VERSION_KEY, value),
      auth: b.auth,
      expect: [INVALID_ENVELOPE],
    })),
    withBase(fc.oneof(text(), fc.constantFrom(...OLD_OR_ODD_VERSIONS)), (b, version) => ({
      label: `${b.label}, _meta protocolVersion ${JSON.stringify(version)} (header ${PROTOCOL_VERSION})`,
      message: withMetaKey(b, PROTOCOL_VERSION_KEY, version),
      auth: b.auth,
      expect: version === PROTOCOL_VERSION ? [] : [HEADER_MISMATCH],
    })).filter((draft) => draft.expect.length > 0),
    // Header and envelope agree on a version the server does not serve.
    withBase(fc.constantFrom(...OLD_OR_ODD_VERSIONS, ''), (b, version) => {
      const message = withMetaKey(b, PROTOCOL_VERSION_KEY, version);
      const headers = standardHeaders(message, b.auth).map(([name, value]): Header => [
        name,
        name === 'mcp-protocol-version' ? version : value,
      ]);
      return {
        label: `${b.label}, protocol version ${JSON.stringify(version)} in header and envelope`,
        message,
        headers,
        expect: [UNSUPPORTED_VERSION],
      };
    }),
    withBase(fc.oneof(notObject), (b, value) => ({
      label: `${b.label}, _meta clientInfo: ${show(value)}`,
      message: withMetaKey(b, CLIENT_INFO_KEY, value),
      auth: b.auth,
      expect: [INVALID_ENVELOPE],
    })),
    withBase(absentOr(notObject), (b, value) => ({
      label: `${b.label}, _meta clientCapabilities: ${show(value)}`,
      message: withMetaKey(b, CLIENT_CAPABILITIES_KEY, value),
      auth: b.auth,
      expect: [INVALID_ENVELOPE],
    })),
    withBase(notObject, (b, value) => ({
      label: `${b.label}, clientCapabilities.extensions: ${show(value)}`,
      message: withMetaKey(b, CLIENT_CAPABILITIES_KEY, obj({ extensions: value })),
      auth: b.auth,
      expect: [INVALID_ENVELOPE],
    })),
    withBase(notObject, (b, value) => ({
      label: `${b.label}, extensions["${TASKS_EXTENSION}"]: ${show(value)}`,
      message: withMetaKey(
        b,
        CLIENT_CAPABILITIES_KEY,
        obj({ extensions: obj({ [TASKS_EXTENSION]: value }) }),
      ),
      auth: b.auth,
      expect: [INVALID_ENVELOPE],
    })),
    // Responses posted to the server.
    withBase(fc.tuple(fc.boolean(), json), (b, [isError, payload]) => {
      const message = isError
        ? obj({
            jsonrpc: '2.0',
            id: get(b.message, 'id')!,
            error: obj({ code: -1, message: 'x', data: payload }),
          })
        : obj({ jsonrpc: '2.0', id: get(b.message, 'id')!, result: obj({ payload }) });
      return {
        label: `a JSON-RPC ${isError ? 'error' : 'result'} response posted`,
        message,
        headers: standardHeaders(b.message, b.auth),
        expect: [LEGACY_REFUSED, INVALID_REQUEST],
      };
    }),
    withBase(fc.constantFrom('result', 'error'), (b, extra) => ({
      label: `${b.label}, plus a "${extra}" member`,
      message: put(b.message, extra, extra === 'error' ? obj({ code: 1, message: 'x' }) : obj({})),
      auth: b.auth,
      expect: [INVALID_REQUEST, LEGACY_REFUSED],
    })),
    // Not an object at all.
    withBase(fc.oneof(number, fc.boolean(), fc.constant(null), text()), (b, value) => ({
      label: `body: ${show(value)}`,
      message: value,
      headers: standardHeaders(b.message, b.auth),
      expect: [INVALID_REQUEST],
    })),
    // Batches: empty, or with a modern or an invalid element (so never a valid legacy batch).
    withBase(
      fc.array(fc.oneof(json, fc.constantFrom(...validBases(t).map((v) => v.message as J))), {
        maxLength: 4,
      }),
      (b, items) => {
        const message = [...items, b.message];
        return {
          label: `a batch of ${message.length}`,
          message,
          headers: standardHeaders(b.message, b.auth),
          expect: [INVALID_REQUEST],
        };
      },
    ),
    withBase(fc.constant([]), (b) => ({
      label: 'an empty batch',
      message: [],
      headers: standardHeaders(b.message, b.auth),
      expect: [INVALID_REQUEST],
    })),
  );
}

// ----- family: notifications -------------------------------------------------------------------

/** Requests without an id are notifications: accepted (202), never acted on. */
export function notifications(t: Targets): fc.Arbitrary<Draft> {
  const base = fc.constantFrom(...validBases(t));
  const strip = (b: Base): Obj => put(b.message, 'id', ABSENT);
  return fc.oneof(
    fc.tuple(base, fc.array(fc.tuple(key, json), { maxLength: 3 })).map(([b, extra]) => {
      let params = get(b.message, 'params') as Obj;
      for (const [name, value] of extra) if (name !== '_meta') params = put(params, name, value);
      return {
        label: `${b.label}, as a notification (no id)`,
        message: put(strip(b), 'params', params),
        auth: b.auth,
        expect: [ACCEPTED],
      };
    }),
    fc
      .tuple(base, fc.constantFrom('mcp-protocol-version', 'mcp-method', 'mcp-name'))
      .map(([b, dropped]) => ({
        label: `${b.label}, as a notification without ${dropped}`,
        message: strip(b),
        headers: standardHeaders(strip(b), b.auth).filter(([name]) => name !== dropped),
        expect: [ACCEPTED],
      })),
    fc
      .tuple(
        fc.oneof(
          text(1, 30),
          fc.constantFrom(
            'notifications/tasks',
            'notifications/cancelled',
            'notifications/initialized',
            'tasks/cancel',
          ),
        ),
        json,
      )
      .map(([method, value]) => {
        const message = obj({
          jsonrpc: '2.0',
          method,
          params: obj({ value, _meta: envelope(true) }),
        });
        return {
          label: `notification ${JSON.stringify(method)}`,
          message,
          expect: PLAIN_HEADER.test(method) ? [ACCEPTED] : [ACCEPTED, HEADER_MISMATCH],
        };
      }),
    fc.tuple(base, notObject).map(([b, params]) => ({
      label: `${b.label}, as a notification with params ${show(params)}`,
      message: put(strip(b), 'params', params),
      headers: standardHeaders(strip(b), b.auth),
      expect: [INVALID_REQUEST],
    })),
    fc.tuple(base, notString).map(([b, version]) => {
      const params = get(b.message, 'params') as Obj;
      const message = put(
        strip(b),
        'params',
        put(params, '_meta', put(get(params, '_meta') as Obj, PROTOCOL_VERSION_KEY, version)),
      );
      return {
        label: `${b.label}, as a notification with _meta protocolVersion ${show(version)}`,
        message,
        headers: standardHeaders(strip(b), b.auth),
        expect: [INVALID_ENVELOPE],
      };
    }),
    fc
      .tuple(base, fc.constantFrom('tasks/get', 'tools/list', 'x'))
      .filter(([b, method]) => get(b.message, 'method') !== method)
      .map(([b, method]) => ({
        label: `${b.label}, as a notification under Mcp-Method ${method}`,
        message: strip(b),
        headers: standardHeaders(strip(b), b.auth).map(([name, value]): Header => [
          name,
          name === 'mcp-method' ? method : value,
        ]),
        expect: [HEADER_MISMATCH],
      })),
  );
}

// ----- family: unknown methods -----------------------------------------------------------------

const SERVED_METHODS: ReadonlySet<string> = new Set([
  'tools/call',
  'tools/list',
  'server/discover',
  'subscriptions/listen',
  'tasks/get',
  'tasks/update',
  'tasks/cancel',
]);

export function unknownMethods(t: Targets): fc.Arbitrary<Draft> {
  const method = fc
    .oneof(
      fc.constantFrom(
        'tasks/list',
        'tasks/result',
        'tasks/delete',
        'tasks/Get',
        'TASKS/GET',
        'tasks/get/',
        'tasks//get',
        'tools/Call',
        'tool/call',
        'subscriptions/Listen',
        'ping',
        'initialize',
        'notifications/tasks',
        '',
        '__proto__',
        'constructor',
        'prototype',
        'toString',
        'hasOwnProperty',
        'tasks/get ',
        ' tasks/get',
        'tasks/get\u0000',
        'tasks/get\ttasks/cancel',
      ),
      text(1, 40),
    )
    .filter((name) => !SERVED_METHODS.has(name));
  return fc
    .record({
      method,
      extra: fc.array(fc.tuple(key, json), { maxLength: 3 }),
      taskId: fc.constantFrom(...t.working, t.inputRequired),
      id: idArb,
      tasks: fc.boolean(),
    })
    .map(({ method: name, extra, taskId, id, tasks }) => {
      let params = obj({ taskId });
      for (const [field, value] of extra) params = put(params, field, value);
      return {
        label: `method ${JSON.stringify(name)}`,
        message: rpc(name, params, { id, tasks }),
        auth: bearer(t.owner),
        // A method name that cannot travel in Mcp-Method as is leaves the header out.
        expect: PLAIN_HEADER.test(name) ? [METHOD_NOT_FOUND] : [HEADER_MISMATCH],
      };
    });
}

// ----- family: tools/call params ---------------------------------------------------------------

/** Arguments that fail the tool's own schema (each with at least one fault; never valid). */
function badArguments(): fc.Arbitrary<{ tool: string; args: Obj; what: string }> {
  const junk = fc.array(
    fc.tuple(
      text(1, 10).filter(
        (name) => !['text', 'a', 'b', 'delayMs', 'code', 'message'].includes(name),
      ),
      json,
    ),
    { maxLength: 3 },
  );
  const build = (entries: Array<[string, Maybe<J>]>, extra: Array<[string, J]>): Obj => {
    let args = obj({});
    for (const [name, value] of entries) args = put(args, name, value);
    for (const [name, value] of extra) args = put(args, name, value);
    return args;
  };
  const validA = fc.oneof(fc.integer(), fc.double({ noNaN: true, noDefaultInfinity: true }));
  const badDelay: fc.Arbitrary<J> = fc.oneof(
    fc.integer({ min: -1_000_000_000, max: -1 }),
    fc.integer({ min: 60_001, max: 2_000_000_000 }),
    fc.double({ min: 0.01, max: 59_999, noNaN: true }).filter((n) => !Number.isInteger(n)),
    text(1, 8).map((word) => `x${word}`),
    anObject,
    fc.constant(new Raw('1e999')),
  );
  return fc.oneof(
    fc.tuple(absentOr(notString), junk).map(([value, extra]) => ({
      tool: 'echo',
      args: build([['text', value]], extra),
      what: `text: ${show(value)}`,
    })),
    fc
      .tuple(fc.constantFrom('a', 'b'), absentOr(notNumber), validA, junk)
      .map(([field, value, other, extra]) => ({
        tool: 'add_slowly',
        args: build(
          [
            [field, value],
            [field === 'a' ? 'b' : 'a', other],
          ],
          extra,
        ),
        what: `${field}: ${show(value)}`,
      })),
    fc
      .tuple(
        validA,
        validA,
        fc.array(
          fc.tuple(
            text(1, 10).filter((n) => !['a', 'b', 'delayMs'].includes(n)),
            json,
          ),
          { minLength: 1, maxLength: 3 },
        ),
      )
      .map(([a, b, extra]) => ({
        tool: 'add_slowly',
        args: build(
          [
            ['a', a],
            ['b', b],
          ],
          extra,
        ),
        what: `unknown key ${JSON.stringify(extra[0]![0])}`,
      })),
    fc.tuple(validA, validA, badDelay).map(([a, b, delayMs]) => ({
      tool: 'add_slowly',
      args: obj({ a, b, delayMs }),
      what: `delayMs: ${show(delayMs)}`,
    })),
    fc
      .tuple(absentOr(notInteger), fc.oneof(text(), fc.constant(ABSENT as Maybe<J>)), junk)
      .map(([code, message, extra]) => ({
        tool: 'fail_with',
        args: build(
          [
            ['code', code],
            ['message', message],
          ],
          extra,
        ),
        what: `code: ${show(code)}`,
      })),
    fc.tuple(fc.integer(), absentOr(notString)).map(([code, message]) => ({
      tool: 'fail_with',
      args: build(
        [
          ['code', code],
          ['message', message],
        ],
        [],
      ),
      what: `message: ${show(message)}`,
    })),
  );
}

export function toolsCall(t: Targets): fc.Arbitrary<Draft> {
  const who = fc.constantFrom(undefined, bearer(t.owner), bearer('bob'));
  const gate = (tool: string, tasks: boolean, otherwise: Outcome): Outcome[] =>
    TASK_TOOLS.has(tool) && !tasks ? [MISSING_CAPABILITY] : [otherwise];
  const unknownName = fc
    .oneof(
      text(0, 40),
      fc.constantFrom(
        '__proto__',
        'constructor',
        'prototype',
        'toString',
        'hasOwnProperty',
        'valueOf',
        'ECHO',
        'Echo',
        'echo ',
        ' echo',
        'echo\u0000',
        'add-slowly',
        'add_slowly ',
        'tools/call',
        '',
        'wait_for_cancel\u200b',
      ),
      longText(3000, 20_000),
    )
    .filter((name) => !TOOLS.includes(name));
  return fc.oneof(
    fc
      .record({
        name: absentOr(notString),
        args: absentOr(anObject),
        tasks: fc.boolean(),
        id: idArb,
        auth: who,
      })
      .map(({ name, args, tasks, id, auth }) => ({
        label: `tools/call, name: ${show(name)}`,
        message: rpc('tools/call', put(put(obj({}), 'name', name), 'arguments', args), {
          id,
          tasks,
        }),
        auth,
        expect: [INVALID_PARAMS],
      })),
    fc
      .record({
        name: unknownName,
        args: absentOr(json),
        tasks: fc.boolean(),
        id: idArb,
        auth: who,
      })
      .map(({ name, args, tasks, id, auth }) => ({
        label: `tools/call of an unknown tool ${show(name, 40)}`,
        message: rpc('tools/call', put(obj({ name }), 'arguments', args), { id, tasks }),
        auth,
        expect: expectByName(name, [INVALID_PARAMS]),
      })),
    fc
      .record({
        tool: fc.constantFrom(...TOOLS),
        args: notObject,
        tasks: fc.boolean(),
        id: idArb,
        auth: who,
      })
      .map(({ tool, args, tasks, id, auth }) => ({
        label: `tools/call ${tool}, arguments: ${show(args)}${tasks ? '' : ', tasks not declared'}`,
        message: rpc('tools/call', obj({ name: tool, arguments: args }), { id, tasks }),
        auth,
        expect: gate(tool, tasks, INVALID_PARAMS),
      })),
    fc
      .record({ bad: badArguments(), tasks: fc.boolean(), id: idArb, auth: who })
      .map(({ bad, tasks, id, auth }) => ({
        label: `tools/call ${bad.tool}, ${bad.what}${tasks ? '' : ', tasks not declared'}`,
        message: rpc('tools/call', obj({ name: bad.tool, arguments: bad.args }), { id, tasks }),
        auth,
        expect: gate(bad.tool, tasks, TOOL_ERROR),
      })),
  );
}

// ----- family: tasks/get, tasks/update, tasks/cancel -------------------------------------------

export function taskMethods(t: Targets): fc.Arbitrary<Draft> {
  const method = fc.constantFrom('tasks/get', 'tasks/update', 'tasks/cancel');
  const own = fc.constantFrom(...t.working, t.inputRequired, t.completed, t.failed);
  const goodResponses = obj({
    [t.inputKey]: obj({ action: 'accept', content: obj({ name: 'Ada' }) }),
  });
  const params = (name: string, taskId: Maybe<J>, responses: Maybe<J> = goodResponses): Obj => {
    const base = put(obj({}), 'taskId', taskId);
    return name === 'tasks/update' ? put(base, 'inputResponses', responses) : base;
  };
  const auth = bearer(t.owner);
  const hugeMap = fc
    .integer({ min: 1, max: 3000 })
    .map(
      (size) =>
        new Obj(
          Array.from({ length: size }, (_, i): [string, J] => [`k${i}`, obj({ action: 'accept' })]),
        ),
    );
  return fc.oneof(
    fc.record({ method, id: idArb }).map(({ method: name, id }) => ({
      label: `${name} of an own task, tasks not declared`,
      message: rpc(name, params(name, name === 'tasks/update' ? t.inputRequired : t.working[1]!), {
        id,
        tasks: false,
      }),
      auth,
      expect: [MISSING_CAPABILITY],
    })),
    fc
      .record({
        method,
        taskId: absentOr(notString),
        id: idArb,
        who: fc.constantFrom(auth, undefined),
      })
      .map(({ method: name, taskId, id, who }) => ({
        label: `${name}, taskId: ${show(taskId)}`,
        message: rpc(name, params(name, taskId), { id }),
        auth: who,
        expect: [INVALID_PARAMS],
      })),
    fc
      .record({
        method,
        taskId: unknownTaskIds(t),
        id: idArb,
        who: fc.constantFrom(auth, undefined, bearer('bob')),
      })
      .map(({ method: name, taskId, id, who }) => ({
        label: `${name} of an unknown task ${show(taskId, 40)}`,
        message: rpc(name, params(name, taskId), { id }),
        auth: who,
        expect: expectByName(taskId, [INVALID_PARAMS]),
      })),
    fc
      .record({ method, taskId: own, id: idArb, who: strangers(t) })
      .map(({ method: name, taskId, id, who }) => ({
        label: `${name} of another principal's task (as ${who ?? 'anonymous'})`,
        message: rpc(name, params(name, taskId), { id }),
        auth: who,
        expect: [INVALID_PARAMS],
      })),
    fc
      .record({ responses: absentOr(notObject), taskId: own, id: idArb })
      .map(({ responses, taskId, id }) => ({
        label: `tasks/update of an own task, inputResponses: ${show(responses)}`,
        message: rpc('tasks/update', params('tasks/update', taskId, responses), { id }),
        auth,
        expect: [INVALID_PARAMS],
      })),
    fc
      .record({
        responses: fc.oneof(hugeMap, anObject),
        target: fc.oneof(
          unknownTaskIds(t).map((taskId) => ({ taskId, who: auth as string | undefined })),
          fc.tuple(own, strangers(t)).map(([taskId, who]) => ({ taskId, who })),
        ),
        id: idArb,
      })
      .map(({ responses, target, id }) => ({
        label: `tasks/update with ${responses.entries.length} responses of a task that is not the caller's`,
        message: rpc('tasks/update', params('tasks/update', target.taskId, responses), { id }),
        auth: target.who,
        expect: expectByName(target.taskId, [INVALID_PARAMS]),
      })),
  );
}

/** Answers of the wrong shape for the outstanding key of an own input_required task. */
export function updateValues(t: Targets): fc.Arbitrary<Draft> {
  const wrong: fc.Arbitrary<J> = fc.oneof(
    number,
    text(),
    fc.boolean(),
    fc.constant(null),
    anArray,
    fc.constant(obj({})),
    text(0, 10)
      .filter((action) => !['accept', 'decline', 'cancel'].includes(action))
      .map((action) => obj({ action })),
    notObject.map((content) => obj({ action: 'accept', content })),
  );
  return fc
    .record({
      value: wrong,
      extra: fc.array(fc.tuple(text(1, 8), json), { maxLength: 2 }),
      id: idArb,
    })
    .map(({ value, extra, id }) => {
      let responses = obj({});
      for (const [name, item] of extra)
        if (name !== t.victimKey) responses = put(responses, name, item);
      responses = put(responses, t.victimKey, value);
      return {
        label: `tasks/update of an own input_required task, inputResponses.${t.victimKey}: ${show(value)}`,
        message: rpc('tasks/update', obj({ taskId: t.victim, inputResponses: responses }), { id }),
        auth: bearer(t.owner),
        expect: [INVALID_PARAMS],
      };
    });
}

// ----- family: subscriptions/listen ------------------------------------------------------------

const FLAGS = ['toolsListChanged', 'promptsListChanged', 'resourcesListChanged'] as const;

export function listen(t: Targets): fc.Arbitrary<Draft> {
  const realIds = fc.array(fc.constantFrom(...t.working, t.inputRequired, t.completed), {
    maxLength: 3,
  });
  const stringIds = fc.oneof(realIds, fc.array(text(0, 30), { maxLength: 4 }));
  /** Valid filter members, to go beside the fault. */
  const noise = fc.record(
    {
      toolsListChanged: fc.boolean(),
      promptsListChanged: fc.boolean(),
      resourcesListChanged: fc.boolean(),
      resourceSubscriptions: fc.array(text(0, 20), { maxLength: 3 }),
      extra: json,
    },
    { requiredKeys: [] },
  );
  const filterWith = (valid: Record<string, J | undefined>, name: string, value: Maybe<J>): Obj => {
    let filter = obj({});
    for (const [field, item] of Object.entries(valid))
      if (item !== undefined) filter = put(filter, field, item);
    return put(filter, name, value);
  };
  const message = (notificationsValue: Maybe<J>, tasks: boolean, id: J): Obj =>
    rpc('subscriptions/listen', put(obj({}), 'notifications', notificationsValue), { id, tasks });
  const auth = fc.constantFrom(bearer(t.owner), undefined);
  type Fault = { what: string; name: string; value: Maybe<J> };
  const fault: fc.Arbitrary<Fault> = fc.oneof(
    fc
      .tuple(fc.constantFrom(...FLAGS), notBoolean)
      .map(([name, value]) => ({ what: `${name}: ${show(value)}`, name, value })),
    notStringArray.map((value) => ({
      what: `resourceSubscriptions: ${show(value)}`,
      name: 'resourceSubscriptions',
      value,
    })),
    notStringArray.map((value) => ({ what: `taskIds: ${show(value)}`, name: 'taskIds', value })),
  );
  return fc.oneof(
    fc
      .record({ value: absentOr(notObject), tasks: fc.boolean(), id: idArb, who: auth })
      .map(({ value, tasks, id, who }) => ({
        label: `subscriptions/listen, notifications: ${show(value)}`,
        message: message(value, tasks, id),
        auth: who,
        expect: [INVALID_PARAMS],
      })),
    fc
      .record({
        fault,
        valid: noise,
        taskIds: absentOr(stringIds),
        tasks: fc.boolean(),
        id: idArb,
        who: auth,
      })
      .map(({ fault: f, valid, taskIds, tasks, id, who }) => {
        const filter = filterWith(
          { ...valid, ...(taskIds !== ABSENT && { taskIds }) },
          f.name,
          f.value,
        );
        return {
          label: `subscriptions/listen, notifications.${f.what}`,
          message: message(filter, tasks, id),
          auth: who,
          expect: [INVALID_PARAMS],
        };
      }),
    fc
      .record({ valid: noise, taskIds: stringIds, id: idArb, who: auth })
      .map(({ valid, taskIds, id, who }) => ({
        label: `subscriptions/listen, taskIds ${show(taskIds)}, tasks not declared`,
        message: message(filterWith(valid, 'taskIds', taskIds), false, id),
        auth: who,
        expect: [MISSING_CAPABILITY],
      })),
    fc
      .record({ count: fc.integer({ min: 257, max: 5000 }), valid: noise, id: idArb, who: auth })
      .map(({ count, valid, id, who }) => ({
        label: `subscriptions/listen naming ${count} tasks (max 256)`,
        message: message(
          filterWith(
            valid,
            'taskIds',
            Array.from({ length: count }, (_, i) => (i === 0 ? t.working[0]! : `t${i}`)),
          ),
          true,
          id,
        ),
        auth: who,
        expect: [INVALID_PARAMS],
      })),
  );
}

// ----- family: headers -------------------------------------------------------------------------

interface HeaderEdit {
  kind: string;
  what: string;
  apply(headers: Header[]): Header[];
  hostile?: boolean;
}

const without = (headers: Header[], name: string): Header[] =>
  headers.filter(([key]) => key.toLowerCase() !== name);
const replace =
  (name: string, ...values: string[]) =>
  (headers: Header[]): Header[] => [
    ...without(headers, name),
    ...values.map((value): Header => [name, value]),
  ];

/** Header text without `:` and `/` (it may be echoed) and within what Node sends. */
const headerText = (min: number, max: number): fc.Arbitrary<string> =>
  fc.string({
    unit: fc.constantFrom(...'abcXYZ019-_.,;=+*~!$&()[]{}@ "\'\tÿé'),
    minLength: min,
    maxLength: max,
  });

const NON_JSON_TYPES = [
  'text/plain',
  'text/html',
  'text/json',
  'application/xml',
  'application/octet-stream',
  'application/x-www-form-urlencoded',
  'multipart/form-data; boundary=fuzz',
  'application/jsonx',
  'application/json5',
  'application/javascript',
  'json',
  '*/*',
  'application',
  'application/',
  'x',
];

function headerFaults(base: Base): fc.Arbitrary<HeaderEdit[]> {
  const method = get(base.message, 'method') as string;
  const field = nameSource(method);
  const nameValue =
    field === undefined ? undefined : (get(get(base.message, 'params'), field) as string);
  const different = (right: string, decode: (v: string) => string | undefined) => (value: string) =>
    decode(value) !== right;
  const pv = fc
    .oneof(
      fc.constantFrom(
        '2025-11-25',
        '2025-06-18',
        '2026-07-27',
        '2026-07-28x',
        '2026-7-28',
        'garbage',
        '',
      ),
      headerText(0, 20),
    )
    .filter(different(PROTOCOL_VERSION, stripOws));
  const methods = fc
    .oneof(
      fc.constantFrom(
        'tasks/get',
        'tasks/cancel',
        'tasks/update',
        'tools/call',
        'tools/list',
        'subscriptions/listen',
        method.toUpperCase(),
        `${method}x`,
        '',
      ),
      headerText(0, 20),
    )
    .filter(different(method, stripOws));
  const edits: Array<fc.Arbitrary<HeaderEdit>> = [
    fc.constant({
      kind: 'pv',
      what: 'no MCP-Protocol-Version',
      apply: (h: Header[]) => without(h, 'mcp-protocol-version'),
    }),
    pv.map((value) => ({
      kind: 'pv',
      what: `MCP-Protocol-Version: ${JSON.stringify(value)}`,
      apply: replace('mcp-protocol-version', value),
    })),
    fc.option(pv).map((second) => ({
      kind: 'pv',
      what: `MCP-Protocol-Version sent twice (${JSON.stringify(second ?? PROTOCOL_VERSION)} second)`,
      apply: replace('mcp-protocol-version', PROTOCOL_VERSION, second ?? PROTOCOL_VERSION),
    })),
    fc.constant({
      kind: 'method',
      what: 'no Mcp-Method',
      apply: (h: Header[]) => without(h, 'mcp-method'),
    }),
    methods.map((value) => ({
      kind: 'method',
      what: `Mcp-Method: ${JSON.stringify(value)}`,
      apply: replace('mcp-method', value),
    })),
    fc.option(methods).map((second) => ({
      kind: 'method',
      what: `Mcp-Method sent twice (${JSON.stringify(second ?? method)} second)`,
      apply: replace('mcp-method', method, second ?? method),
    })),
    fc.constant({
      kind: 'type',
      what: 'no Content-Type',
      apply: (h: Header[]) => without(h, 'content-type'),
    }),
    fc.constantFrom(...NON_JSON_TYPES).map((value) => ({
      kind: 'type',
      what: `Content-Type: ${value}`,
      apply: replace('content-type', value),
    })),
    fc.constantFrom(...NON_JSON_TYPES).map((value) => ({
      kind: 'type',
      what: `Content-Type sent twice (${value} first)`,
      apply: replace('content-type', value, 'application/json'),
    })),
    fc
      .constantFrom(
        'application/json, application/json',
        'text/plain, application/json',
        'application/json,text/plain',
      )
      .map((value) => ({
        kind: 'type',
        what: `Content-Type: ${value}`,
        apply: replace('content-type', value),
      })),
    fc
      .tuple(
        fc.constantFrom('http', 'https'),
        text(1, 12).map((label) => label.replace(/[^a-z0-9]/gi, '') || 'evil'),
        fc.option(fc.integer({ min: 1, max: 65535 })),
      )
      .map(([scheme, label, port]) => {
        const origin = `${scheme}://${label}.example${port === null ? '' : `:${port}`}`;
        return {
          kind: 'origin',
          what: `Origin: ${origin}`,
          apply: replace('origin', origin),
          hostile: true,
        };
      }),
    fc
      .constantFrom('null', 'http://localhost.evil.example', 'http://127.0.0.1.evil.example')
      .map((origin) => ({
        kind: 'origin',
        what: `Origin: ${origin}`,
        apply: replace('origin', origin),
        hostile: true,
      })),
    fc.constant({
      kind: 'origin',
      what: 'Origin sent twice (http://localhost both times)',
      apply: replace('origin', 'http://localhost', 'http://localhost'),
      hostile: true,
    }),
    fc
      .constantFrom(
        'evil.example',
        'localhost.evil.example',
        '127.0.0.1.evil.example:80',
        'evil.example:1',
      )
      .map((host) => ({
        kind: 'host',
        what: `Host: ${host}`,
        apply: replace('host', host),
        hostile: true,
      })),
  ];
  if (nameValue !== undefined) {
    const names = fc
      .oneof(
        fc.constantFrom(
          nameValue.toUpperCase(),
          `${nameValue}x`,
          nameValue.slice(1),
          '',
          'echo',
          'add_slowly',
          '=?base64?!!!?=',
          '=?base64?ZWNob?=',
          '=?base64?ZWNobw?=',
          `=?base64?${Buffer.from(`${nameValue}x`).toString('base64')}?=`,
          `=?BASE64?${Buffer.from(nameValue).toString('base64')}?=`,
        ),
        headerText(0, 30),
      )
      .filter((value) => decodeName(value.trim()) !== nameValue);
    edits.push(
      fc.constant({
        kind: 'name',
        what: 'no Mcp-Name',
        apply: (h: Header[]) => without(h, 'mcp-name'),
      }),
      names.map((value) => ({
        kind: 'name',
        what: `Mcp-Name: ${JSON.stringify(value)}`,
        apply: replace('mcp-name', value),
      })),
      fc.option(names).map((second) => ({
        kind: 'name',
        what: `Mcp-Name sent twice (${JSON.stringify(second ?? nameValue)} second)`,
        apply: replace('mcp-name', nameValue, second ?? nameValue),
      })),
    );
  }
  return fc.uniqueArray(fc.oneof(...edits), {
    minLength: 1,
    maxLength: 3,
    selector: (edit) => edit.kind,
  });
}

/** Changes that keep the headers valid: name case, blanks around values, Base64 `Mcp-Name`. */
function headerNoise(base: Base): fc.Arbitrary<(headers: Header[]) => Header[]> {
  const method = get(base.message, 'method') as string;
  const field = nameSource(method);
  const nameValue =
    field === undefined ? undefined : (get(get(base.message, 'params'), field) as string);
  return fc
    .record({
      upper: fc.boolean(),
      blanks: fc.boolean(),
      base64: fc.boolean(),
      extra: fc.option(headerText(0, 20)),
      charset: fc.boolean(),
    })
    .map((noise) => (headers: Header[]): Header[] => {
      let out = headers.map(([name, value]): Header => {
        if (noise.blanks && (name === 'mcp-protocol-version' || name === 'mcp-method'))
          return [name, ` ${value}\t`];
        if (noise.base64 && name === 'mcp-name' && nameValue !== undefined) {
          return [name, `=?base64?${Buffer.from(nameValue).toString('base64')}?=`];
        }
        if (noise.charset && name === 'content-type')
          return [name, 'application/json; charset=utf-8'];
        return [name, value];
      });
      if (noise.upper) out = out.map(([name, value]): Header => [name.toUpperCase(), value]);
      if (noise.extra !== null) out.push(['x-fuzz', noise.extra]);
      return out;
    });
}

/** Requests that would succeed, made to fail by their headers alone. */
export function headers(t: Targets): fc.Arbitrary<FuzzCase> {
  return fc
    .constantFrom(...validBases(t))
    .chain((base) => fc.tuple(fc.constant(base), headerNoise(base), headerFaults(base), idArb))
    .map(([base, noise, faults, id]) => {
      const message = put(base.message, 'id', id);
      let sent = noise(standardHeaders(message, base.auth));
      for (const edit of faults)
        sent = edit.apply(sent.map(([n, v]): Header => [n.toLowerCase(), v]));
      const hostile = faults.some((edit) => edit.hostile === true);
      const expect = headerVerdict(sent, message, hostile);
      if (expect === undefined)
        throw new Error(`generator bug: headers ${JSON.stringify(sent)} are valid`);
      return finish('headers', {
        label: `${base.label}; ${faults.map((edit) => edit.what).join('; ')}`,
        message,
        headers: sent,
        expect,
      });
    });
}

// ----- family: content types -------------------------------------------------------------------

/** Media types the endpoint's own rule counts as JSON (`application/json` or `+json`). */
const JSONISH_TYPES = [
  'application/json; charset=utf-8',
  'APPLICATION/JSON',
  'Application/Json ; x=y',
  'application/vnd.api+json',
  'application/ld+json',
  'application/json-patch+json',
];

/** Malformed requests under every kind of Content-Type. */
export function contentTypes(t: Targets): fc.Arbitrary<FuzzCase> {
  const malformed: Array<{ label: string; message: Obj; expect: Outcome }> = [
    {
      label: 'tasks/get, taskId: 5',
      message: rpc('tasks/get', obj({ taskId: 5 })),
      expect: INVALID_PARAMS,
    },
    {
      label: 'tools/call echo, text: 5',
      message: rpc('tools/call', obj({ name: 'echo', arguments: obj({ text: 5 }) })),
      expect: TOOL_ERROR,
    },
    {
      label: 'subscriptions/listen, notifications: 5',
      message: rpc('subscriptions/listen', obj({ notifications: 5 })),
      expect: INVALID_PARAMS,
    },
    {
      label: 'tasks/cancel of another principal’s task',
      message: rpc('tasks/cancel', obj({ taskId: t.working[1]! })),
      expect: INVALID_PARAMS,
    },
  ];
  type TypeChoice = { what: string; lines: string[]; json: boolean };
  const choice: fc.Arbitrary<TypeChoice> = fc.oneof(
    fc.constantFrom(...NON_JSON_TYPES, '').map((value) => ({
      what: `Content-Type: ${JSON.stringify(value)}`,
      lines: [value],
      json: false,
    })),
    fc.constant<TypeChoice>({ what: 'no Content-Type', lines: [], json: false }),
    fc.constantFrom(...NON_JSON_TYPES).map((value) => ({
      what: `Content-Type twice, ${value} first`,
      lines: [value, 'application/json'],
      json: false,
    })),
    // Node keeps the first of repeated Content-Type lines.
    fc.constantFrom(...NON_JSON_TYPES).map((value) => ({
      what: `Content-Type twice, ${value} second`,
      lines: ['application/json', value],
      json: true,
    })),
    fc
      .constantFrom('application/json, application/json', 'text/plain, application/json')
      .map((value) => ({ what: `Content-Type: ${value}`, lines: [value], json: false })),
    fc
      .constantFrom(...JSONISH_TYPES)
      .map((value) => ({ what: `Content-Type: ${value}`, lines: [value], json: true })),
  );
  return fc.tuple(fc.constantFrom(...malformed), choice, idArb).map(([base, type, id]) => {
    const message = put(base.message, 'id', id);
    const sent: Header[] = [
      ...without(standardHeaders(message), 'content-type'),
      ...type.lines.map((value): Header => ['content-type', value]),
    ];
    return finish('content-type', {
      label: `${base.label}; ${type.what}`,
      message,
      headers: sent,
      // A media type the endpoint takes for JSON is served (or, should the endpoint narrow its
      // rule, refused with its own 415): never the SDK's 415 with another code.
      expect: type.json ? [base.expect, UNSUPPORTED_MEDIA] : [UNSUPPORTED_MEDIA],
    });
  });
}

// ----- family: __proto__, constructor, prototype ----------------------------------------------

const PROTO_KEYS = ['__proto__', 'constructor', 'prototype'] as const;

function protoPayloads(t: Targets): fc.Arbitrary<J> {
  return fc.oneof(
    fc.constantFrom<J>(
      obj({ polluted: 'yes' }),
      obj({
        polluted: 'yes',
        isAdmin: true,
        taskId: t.working[1]!,
        name: 'add_slowly',
        method: 'tasks/cancel',
        extensions: obj({ [TASKS_EXTENSION]: obj({}) }),
        notifications: obj({}),
        inputResponses: obj({}),
        [CLIENT_CAPABILITIES_KEY]: TASKS_DECLARED,
      }),
      new Obj([['__proto__', obj({ polluted: 'yes' })]]),
      obj({ prototype: obj({ polluted: 'yes' }) }),
      obj({ constructor: obj({ prototype: obj({ polluted: 'yes' }) }) }),
    ),
    json,
  );
}

interface Located {
  node: Obj;
  path: readonly string[];
}

function objectsIn(value: J, path: readonly string[] = [], out: Located[] = []): Located[] {
  if (value instanceof Obj) {
    out.push({ node: value, path });
    for (const [name, item] of value.entries) objectsIn(item, [...path, name], out);
  } else if (Array.isArray(value)) {
    (value as readonly J[]).forEach((item, index) =>
      objectsIn(item, [...path, String(index)], out),
    );
  }
  return out;
}

function rebuild(value: J, target: Obj, replacement: Obj): J {
  if (value === target) return replacement;
  if (value instanceof Obj) {
    return new Obj(value.entries.map(([name, item]) => [name, rebuild(item, target, replacement)]));
  }
  if (Array.isArray(value))
    return (value as readonly J[]).map((item) => rebuild(item, target, replacement));
  return value;
}

/** The draft with prototype keys inserted at random objects, at any depth. */
function injectProtoKeys(t: Targets, drafts: fc.Arbitrary<Draft>): fc.Arbitrary<Draft> {
  const insertion = fc.record({
    at: fc.nat(),
    position: fc.nat(),
    key: fc.constantFrom(...PROTO_KEYS),
    value: protoPayloads(t),
  });
  return fc
    .tuple(drafts, fc.array(insertion, { minLength: 1, maxLength: 3 }))
    .map(([draft, insertions]) => {
      let message = draft.message;
      const where: string[] = [];
      const widened: Outcome[] = [];
      for (const insertion of insertions) {
        const objects = objectsIn(message);
        if (objects.length === 0) break;
        const { node, path } = objects[insertion.at % objects.length]!;
        const entries = [...node.entries];
        entries.splice(insertion.position % (entries.length + 1), 0, [
          insertion.key,
          insertion.value,
        ]);
        message = rebuild(message, node, new Obj(entries));
        where.push(`${[...path, insertion.key].join('.')}`);
        // Inside the envelope an odd value may break it (the classifier's -32602, HTTP 400); a
        // member beside jsonrpc/id/method/params breaks the request shape (-32600).
        if (path.includes('_meta')) widened.push(INVALID_ENVELOPE);
        if (path.length === 0 && draft.message instanceof Obj) widened.push(INVALID_REQUEST);
      }
      return {
        ...draft,
        label: `${draft.label}; with ${where.join(', ')}`,
        message,
        expect: [...draft.expect, ...widened],
      };
    });
}

/** Declarations, params and members reachable only through a prototype: none may count. */
function protoOnly(t: Targets): fc.Arbitrary<Draft> {
  const auth = bearer(t.owner);
  const declarations: Array<{ how: string; capabilities: Obj; expect: Outcome[] }> = [
    {
      how: 'clientCapabilities.__proto__.extensions',
      capabilities: new Obj([['__proto__', TASKS_DECLARED]]),
      expect: [MISSING_CAPABILITY],
    },
    {
      how: 'clientCapabilities.extensions.__proto__',
      capabilities: obj({
        extensions: new Obj([['__proto__', obj({ [TASKS_EXTENSION]: obj({}) })]]),
      }),
      expect: [MISSING_CAPABILITY],
    },
    {
      how: 'clientCapabilities.constructor.prototype.extensions',
      capabilities: obj({ constructor: obj({ prototype: TASKS_DECLARED }) }),
      expect: [MISSING_CAPABILITY, INVALID_ENVELOPE],
    },
    {
      how: 'clientCapabilities.extensions.constructor.prototype',
      capabilities: obj({
        extensions: obj({ constructor: obj({ prototype: obj({ [TASKS_EXTENSION]: obj({}) }) }) }),
      }),
      expect: [MISSING_CAPABILITY, INVALID_ENVELOPE],
    },
  ];
  const needsTasks = validBases(t).filter((base) => base.label !== 'tools/call echo');
  const undeclared = (base: Base, capabilities: Obj): Obj => {
    const params = get(base.message, 'params') as Obj;
    const meta = put(get(params, '_meta') as Obj, CLIENT_CAPABILITIES_KEY, capabilities);
    return put(base.message, 'params', put(params, '_meta', meta));
  };
  const protoParams: Array<{ label: string; message: Obj; expect: Outcome[] }> = [
    ...(['tasks/get', 'tasks/cancel'] as const).map((method) => ({
      label: `${method}, taskId only in params.__proto__`,
      message: rpc(method, new Obj([['__proto__', obj({ taskId: t.working[1]! })]])),
      expect: [INVALID_PARAMS],
    })),
    {
      label: 'tasks/cancel, taskId only in params.constructor.prototype',
      message: rpc(
        'tasks/cancel',
        obj({ constructor: obj({ prototype: obj({ taskId: t.working[1]! }) }) }),
      ),
      expect: [INVALID_PARAMS],
    },
    {
      label: 'tasks/update, inputResponses only in params.__proto__',
      message: rpc(
        'tasks/update',
        new Obj([
          ['taskId', t.inputRequired],
          [
            '__proto__',
            obj({
              inputResponses: obj({
                [t.inputKey]: obj({ action: 'accept', content: obj({ name: 'Ada' }) }),
              }),
            }),
          ],
        ]),
      ),
      expect: [INVALID_PARAMS],
    },
    {
      label: 'tools/call, name only in params.__proto__',
      message: rpc(
        'tools/call',
        new Obj([
          ['__proto__', obj({ name: 'add_slowly' })],
          ['arguments', obj({ a: 1, b: 2, delayMs: 0 })],
        ]),
      ),
      expect: [INVALID_PARAMS],
    },
    {
      label: 'tools/call add_slowly, arguments only in params.__proto__',
      message: rpc(
        'tools/call',
        new Obj([
          ['name', 'add_slowly'],
          ['__proto__', obj({ arguments: obj({ a: 1, b: 2, delayMs: 0 }) })],
        ]),
      ),
      expect: [TOOL_ERROR],
    },
    {
      label: 'subscriptions/listen, notifications only in params.__proto__',
      message: rpc(
        'subscriptions/listen',
        new Obj([['__proto__', obj({ notifications: obj({ taskIds: [t.working[0]!] }) })]]),
      ),
      expect: [INVALID_PARAMS],
    },
    {
      label: 'tasks/cancel, method only in the message’s __proto__',
      message: new Obj([
        ['jsonrpc', '2.0'],
        ['id', 1],
        ['__proto__', obj({ method: 'tasks/cancel' })],
        ['params', put(obj({ taskId: t.working[1]! }), '_meta', envelope(true))],
      ]),
      expect: [INVALID_REQUEST],
    },
    {
      label: 'tasks/cancel, jsonrpc only in the message’s __proto__',
      message: new Obj([
        ['__proto__', obj({ jsonrpc: '2.0' })],
        ['id', 1],
        ['method', 'tasks/cancel'],
        ['params', put(obj({ taskId: t.working[1]! }), '_meta', envelope(true))],
      ]),
      expect: [INVALID_REQUEST],
    },
    {
      label: 'tasks/get, the whole envelope only in _meta.__proto__',
      message: obj({
        jsonrpc: '2.0',
        id: 1,
        method: 'tasks/get',
        params: obj({ taskId: t.working[0]!, _meta: new Obj([['__proto__', envelope(true)]]) }),
      }),
      expect: [INVALID_ENVELOPE],
    },
    {
      label: 'tasks/cancel, clientCapabilities only in _meta.__proto__',
      message: obj({
        jsonrpc: '2.0',
        id: 1,
        method: 'tasks/cancel',
        params: obj({
          taskId: t.working[1]!,
          _meta: new Obj([
            [PROTOCOL_VERSION_KEY, PROTOCOL_VERSION],
            ['__proto__', obj({ [CLIENT_CAPABILITIES_KEY]: TASKS_DECLARED })],
          ]),
        }),
      }),
      expect: [INVALID_ENVELOPE],
    },
  ];
  return fc.oneof(
    fc
      .tuple(fc.constantFrom(...needsTasks), fc.constantFrom(...declarations), idArb)
      .map(([base, declaration, id]) => {
        const message = put(undeclared(base, declaration.capabilities), 'id', id);
        return {
          label: `${base.label}, tasks declared only through ${declaration.how}`,
          message,
          auth: base.auth,
          expect: declaration.expect,
        };
      }),
    fc.tuple(fc.constantFrom(...protoParams), idArb).map(([item, id]) => ({
      label: item.label,
      message: put(item.message, 'id', id),
      auth,
      expect: item.expect,
    })),
  );
}

/** Valid arguments of a class-validator tool, plus a forbidden key: never a task. */
function dtoArgumentsWithProtoKeys(t: Targets): fc.Arbitrary<Draft> {
  const valid: Array<{ tool: string; args: Obj }> = [
    { tool: 'add_slowly', args: obj({ a: 1, b: 2, delayMs: 0 }) },
    { tool: 'add_slowly', args: obj({ a: -3.5, b: 1e300 }) },
    { tool: 'fail_with', args: obj({ code: -32001, message: 'boom' }) },
  ];
  return fc
    .record({
      base: fc.constantFrom(...valid),
      key: fc.constantFrom(...PROTO_KEYS),
      value: protoPayloads(t),
      position: fc.nat(),
      id: idArb,
    })
    .map(({ base, key: name, value, position, id }) => {
      const entries = [...base.args.entries];
      entries.splice(position % (entries.length + 1), 0, [name, value]);
      return {
        label: `tools/call ${base.tool} with valid arguments plus a "${name}" key`,
        message: rpc('tools/call', obj({ name: base.tool, arguments: new Obj(entries) }), { id }),
        auth: bearer(t.owner),
        expect: [TOOL_ERROR],
      };
    });
}

export function protoKeys(t: Targets): fc.Arbitrary<FuzzCase> {
  const structured = fc.oneof(
    toolsCall(t),
    taskMethods(t),
    listen(t),
    envelopes(t),
    updateValuesOnUnknown(t),
  );
  return family('proto-keys')(
    fc.oneof(
      { weight: 4, arbitrary: injectProtoKeys(t, structured) },
      { weight: 2, arbitrary: protoOnly(t) },
      { weight: 2, arbitrary: dtoArgumentsWithProtoKeys(t) },
    ),
  );
}

/** tasks/update with odd answers, aimed at a task id no one has (safe to decorate). */
function updateValuesOnUnknown(t: Targets): fc.Arbitrary<Draft> {
  return fc.tuple(unknownTaskIds(t), anObject).map(([taskId, responses]) => ({
    label: `tasks/update of an unknown task ${show(taskId, 30)}`,
    message: rpc('tasks/update', obj({ taskId, inputResponses: responses })),
    auth: bearer(t.owner),
    expect: expectByName(taskId, [INVALID_PARAMS]),
  }));
}

// ----- family: deep nesting --------------------------------------------------------------------

/** `[[[…1…]]]`, `depth` arrays deep. */
export const nestedArray = (depth: number): Raw =>
  new Raw(`${'['.repeat(depth)}1${']'.repeat(depth)}`);

/** Valid JSON nested `depth` levels deep. */
const nested = (depth: number, open: string, close: string, core = '1'): Raw =>
  new Raw(`${open.repeat(depth)}${core}${close.repeat(depth)}`);

/** Malformed requests with a deeply nested member somewhere: the member's depth must not matter. */
export function deepNesting(t: Targets): fc.Arbitrary<FuzzCase> {
  const shape = fc.constantFrom(['[', ']'], ['{"a":', '}'], ['[{"a":', '}]']);
  const depth = fc.oneof(fc.integer({ min: 100, max: 2000 }), fc.integer({ min: 2000, max: 6000 }));
  const auth = bearer(t.owner);
  const placements: Array<{
    label: string;
    make: (deep: Raw) => J;
    expect: Outcome[];
    headersFrom?: J;
  }> = [
    {
      label: 'tools/call echo, text: 5, in an extra argument',
      make: (deep) => rpc('tools/call', obj({ name: 'echo', arguments: obj({ text: 5, deep }) })),
      expect: [TOOL_ERROR],
    },
    {
      label: 'tools/call add_slowly, in an unknown argument',
      make: (deep) =>
        rpc('tools/call', obj({ name: 'add_slowly', arguments: obj({ a: 1, b: 2, deep }) })),
      expect: [TOOL_ERROR],
    },
    {
      label: 'tools/call echo, text: 5, in an extra params member',
      make: (deep) => rpc('tools/call', obj({ name: 'echo', arguments: obj({ text: 5 }), deep })),
      expect: [TOOL_ERROR],
    },
    {
      label: 'tools/call echo, text: 5, in _meta',
      make: (deep) => {
        const message = rpc('tools/call', obj({ name: 'echo', arguments: obj({ text: 5 }) }));
        const params = get(message, 'params') as Obj;
        return put(
          message,
          'params',
          put(params, '_meta', put(get(params, '_meta') as Obj, 'deep', deep)),
        );
      },
      expect: [TOOL_ERROR],
    },
    {
      label: 'tasks/get, as the taskId',
      make: (deep) => rpc('tasks/get', obj({ taskId: deep })),
      expect: [INVALID_PARAMS],
    },
    {
      label: 'tasks/update of an unknown task, in inputResponses',
      make: (deep) =>
        rpc('tasks/update', obj({ taskId: 'no-such-task', inputResponses: obj({ x: deep }) })),
      expect: [INVALID_PARAMS],
    },
    {
      label: 'subscriptions/listen, as notifications.taskIds',
      make: (deep) => rpc('subscriptions/listen', obj({ notifications: obj({ taskIds: deep }) })),
      expect: [INVALID_PARAMS],
    },
    {
      label: 'an unknown method, in params',
      make: (deep) => rpc('x/deep', obj({ deep })),
      expect: [METHOD_NOT_FOUND],
    },
    {
      label: 'a notification, in params',
      make: (deep) => put(rpc('notifications/deep', obj({ deep })), 'id', ABSENT),
      expect: [ACCEPTED],
    },
    {
      label: 'tasks/cancel of an own task, as the id',
      make: (deep) => rpc('tasks/cancel', obj({ taskId: t.working[1]! }), { id: deep }),
      expect: [INVALID_REQUEST],
    },
    {
      label: 'the whole body',
      make: (deep) => deep,
      expect: [INVALID_REQUEST],
      headersFrom: rpc('tasks/get', obj({ taskId: t.working[0]! })),
    },
  ];
  return fc
    .tuple(fc.constantFrom(...placements), shape, depth)
    .map(([placement, [open, close], levels]) => {
      const message = placement.make(nested(levels, open!, close!));
      const headerSource = placement.headersFrom ?? message;
      return finish('deep-nesting', {
        label: `${placement.label}: ${levels} levels of ${open}`,
        message,
        headers: standardHeaders(headerSource, auth),
        expect: placement.expect,
        // Every depth here (100+) is past the endpoint's limit of 64 levels.
        deep: true,
      });
    });
}

// ----- family: huge values ---------------------------------------------------------------------

/** Huge strings, maps and arrays in params, within the body limit. */
export function hugeValues(t: Targets): fc.Arbitrary<FuzzCase> {
  const auth = bearer(t.owner);
  const count = fc.integer({ min: 1000, max: 30_000 });
  const map = (size: number, value: (i: number) => J): Obj =>
    new Obj(Array.from({ length: size }, (_, i): [string, J] => [`k${i}`, value(i)]));
  const drafts: fc.Arbitrary<Draft> = fc.oneof(
    fc
      .tuple(
        fc.constantFrom('tasks/get', 'tasks/cancel', 'tasks/update'),
        longText(20_000, 380_000),
      )
      .map(([method, taskId]) => ({
        label: `${method}, a taskId of ${taskId.length} characters`,
        message: rpc(method, obj({ taskId, inputResponses: obj({}) })),
        auth,
        // Too long for an Mcp-Name header: sent without it.
        expect: [HEADER_MISMATCH],
      })),
    longText(20_000, 380_000).map((name) => ({
      label: `tools/call, a name of ${name.length} characters`,
      message: rpc('tools/call', obj({ name, arguments: obj({}) })),
      auth,
      expect: [HEADER_MISMATCH],
    })),
    fc.tuple(count, unknownTaskIds(t)).map(([size, taskId]) => ({
      label: `tasks/update of an unknown task, ${size} inputResponses`,
      message: rpc(
        'tasks/update',
        obj({ taskId, inputResponses: map(size, () => obj({ action: 'accept' })) }),
      ),
      auth,
      expect: expectByName(taskId, [INVALID_PARAMS]),
    })),
    count.map((size) => ({
      label: `tasks/update of another principal's task, ${size} inputResponses`,
      message: rpc(
        'tasks/update',
        obj({
          taskId: t.inputRequired,
          inputResponses: map(size, (i) =>
            i === 0 ? obj({ action: 'accept', content: obj({ name: 'x' }) }) : i,
          ),
        }),
      ),
      auth: bearer('bob'),
      expect: [INVALID_PARAMS],
    })),
    fc.tuple(count, fc.boolean()).map(([size, declared]) => ({
      label: `subscriptions/listen naming ${size} tasks${declared ? '' : ', tasks not declared'}`,
      message: rpc(
        'subscriptions/listen',
        obj({ notifications: obj({ taskIds: Array.from({ length: size }, (_, i) => `t${i}`) }) }),
        { tasks: declared },
      ),
      auth,
      expect: [declared ? INVALID_PARAMS : MISSING_CAPABILITY],
    })),
    count.map((size) => ({
      label: `subscriptions/listen, ${size} resourceSubscriptions and one number`,
      message: rpc(
        'subscriptions/listen',
        obj({
          notifications: obj({
            resourceSubscriptions: [...Array.from({ length: size }, (_, i) => `r${i}`), 5],
          }),
        }),
      ),
      auth,
      expect: [INVALID_PARAMS],
    })),
    count.map((size) => ({
      label: `tools/call echo, text: 5 and ${size} more arguments`,
      message: rpc(
        'tools/call',
        obj({
          name: 'echo',
          arguments: put(
            map(size, (i) => i),
            'text',
            5,
          ),
        }),
      ),
      expect: [TOOL_ERROR],
    })),
    fc.integer({ min: 10, max: 2000 }).map((size) => ({
      label: `tools/call add_slowly, ${size} unknown arguments`,
      message: rpc(
        'tools/call',
        obj({
          name: 'add_slowly',
          arguments: put(
            put(
              map(size, (i) => i),
              'a',
              1,
            ),
            'b',
            2,
          ),
        }),
      ),
      auth,
      expect: [TOOL_ERROR],
    })),
    longText(50_000, 380_000).map((value) => ({
      label: `tools/call echo, text: 5 and a string of ${value.length} characters`,
      message: rpc('tools/call', obj({ name: 'echo', arguments: obj({ text: 5, value }) })),
      expect: [TOOL_ERROR],
    })),
    longText(50_000, 380_000).map((id) => ({
      label: `tasks/get, taskId: 5, an id of ${id.length} characters`,
      message: rpc('tasks/get', obj({ taskId: 5 }), { id }),
      auth,
      expect: [INVALID_PARAMS],
    })),
    longText(50_000, 380_000).map((value) => ({
      label: `tasks/cancel of an own task, clientInfo.name of ${value.length} characters, tasks not declared`,
      message: (() => {
        const message = rpc('tasks/cancel', obj({ taskId: t.working[1]! }), { tasks: false });
        const params = get(message, 'params') as Obj;
        const meta = put(
          get(params, '_meta') as Obj,
          CLIENT_INFO_KEY,
          obj({ name: value, version: '1' }),
        );
        return put(message, 'params', put(params, '_meta', meta));
      })(),
      auth,
      expect: [MISSING_CAPABILITY],
    })),
  );
  return family('huge-values')(drafts);
}

// ----- family: HTTP forms ----------------------------------------------------------------------

/** Every method Node's HTTP parser takes but POST and CONNECT (answered by closing the socket). */
const OTHER_METHODS = [
  'GET',
  'HEAD',
  'PUT',
  'DELETE',
  'OPTIONS',
  'TRACE',
  'PATCH',
  'QUERY',
  'ACL',
  'BIND',
  'CHECKOUT',
  'COPY',
  'LINK',
  'LOCK',
  'M-SEARCH',
  'MERGE',
  'MKACTIVITY',
  'MKCALENDAR',
  'MKCOL',
  'MOVE',
  'NOTIFY',
  'PROPFIND',
  'PROPPATCH',
  'PURGE',
  'REBIND',
  'REPORT',
  'SEARCH',
  'SOURCE',
  'SUBSCRIBE',
  'UNBIND',
  'UNLINK',
  'UNLOCK',
  'UNSUBSCRIBE',
] as const;
/** Tokens Node's parser refuses (400 before the app sees them): made up, or in lower case. */
const REFUSED_METHODS = ['FROB', 'MCP', 'X-CALL', 'post', 'Post', 'get'] as const;

/** The endpoint's path exactly (origin or absolute form, an allowed authority). */
const SERVED_TARGETS = [
  '/mcp',
  '/mcp?x=1',
  'http://{self}/mcp',
  'http://localhost/mcp',
  'https://127.0.0.1:1/mcp?q',
  'HTTP://LOCALHOST:8080/mcp',
] as const;
/** The endpoint's path under a foreign authority: the allow-list refuses it like a foreign Host. */
const FOREIGN_TARGETS = [
  'http://evil.example/mcp',
  'http://evil.example:80/mcp',
  'https://localhost.evil.example/mcp',
  'http://127.0.0.1.evil.example:8080/mcp',
] as const;
/** Not the endpoint's path: case, trailing slash, encoding, dot segments, other forms. */
const OTHER_TARGETS = [
  '/MCP',
  '/Mcp',
  '/mcp/',
  '/MCP/',
  '//mcp',
  '/mcp//',
  '/m%63p',
  '/%6D%63%70',
  '/mcp%2F',
  '/./mcp',
  '/x/../mcp',
  '/mcp/x',
  '/mcp;x',
  'http://{self}/MCP',
  'http://{self}/mcp/',
  'http://{self}',
  '*',
  '{self}',
] as const;

/** Header names in another case; some lines sent twice (the same value, so only the form varies). */
function headerForms(headers: readonly Header[]): fc.Arbitrary<Header[]> {
  return fc
    .tuple(
      fc.array(fc.constantFrom('lower', 'upper', 'mixed'), {
        minLength: headers.length,
        maxLength: headers.length,
      }),
      fc.subarray(['accept', 'authorization', 'mcp-protocol-version', 'x-fuzz']),
    )
    .map(([cases, repeated]) => {
      const mixed = (name: string): string =>
        name.replace(
          /(^|-)([a-z])/g,
          (_, dash: string, letter: string) => dash + letter.toUpperCase(),
        );
      const out = headers.map(([name, value], index): Header => {
        const form = cases[index];
        return [
          form === 'upper' ? name.toUpperCase() : form === 'mixed' ? mixed(name) : name,
          value,
        ];
      });
      for (const name of repeated) {
        const line = out.find(([key]) => key.toLowerCase() === name);
        if (line) out.push([line[0].toLowerCase(), line[1]]);
        else if (name === 'x-fuzz') out.push(['X-Fuzz', 'a'], ['x-fuzz', 'b']);
      }
      return out;
    });
}

/**
 * Valid requests (they would succeed as `POST /mcp`) sent with another method, another request
 * target, or both; header names in any case, some lines repeated. None may be served: a method
 * the endpoint does not serve gets 405 (`Allow: POST`), a foreign authority 403, any path but the
 * exact one 404 (the endpoint's JSON-RPC 404 where the router sends it there, the app's
 * elsewhere), a method token Node's parser refuses 400.
 */
export function httpForms(t: Targets): fc.Arbitrary<FuzzCase> {
  const method = fc.oneof(
    { weight: 6, arbitrary: fc.constantFrom(...OTHER_METHODS) },
    { weight: 2, arbitrary: fc.constant('POST') },
    { weight: 1, arbitrary: fc.constantFrom(...REFUSED_METHODS) },
  );
  const target = fc.oneof(
    { weight: 3, arbitrary: fc.constantFrom(...SERVED_TARGETS) },
    { weight: 2, arbitrary: fc.constantFrom(...FOREIGN_TARGETS) },
    { weight: 4, arbitrary: fc.constantFrom(...OTHER_TARGETS) },
  );
  const host = fc.constantFrom('{self}', 'localhost', 'evil.example', '127.0.0.1');
  return fc
    .tuple(fc.constantFrom(...validBases(t)), method, target, host, fc.boolean(), idArb)
    .filter(([, m, tg]) => !(m === 'POST' && (SERVED_TARGETS as readonly string[]).includes(tg)))
    .chain(([base, m, tg, h, withBody, id]) => {
      const message = put(base.message, 'id', id);
      const headers: Header[] = [['host', h], ...standardHeaders(message, base.auth)];
      return headerForms(headers).map((sent) => {
        const foreignHost = h === 'evil.example';
        const absolute = /^[a-z]+:\/\//i.test(tg);
        const served = (SERVED_TARGETS as readonly string[]).includes(tg);
        const foreign = (FOREIGN_TARGETS as readonly string[]).includes(tg);
        let expect: Outcome[];
        if ((REFUSED_METHODS as readonly string[]).includes(m)) expect = [httpStatus(400)];
        else if (served || foreign) {
          // The authority of an absolute-form target replaces Host.
          const hostile = foreign || (!absolute && foreignHost);
          const notAllowed = m === 'HEAD' ? httpStatus(405) : METHOD_NOT_ALLOWED;
          // Fastify answers a method it cannot route in an onRequest hook, before the guards.
          expect = hostile
            ? m === 'POST'
              ? [FORBIDDEN]
              : [m === 'HEAD' ? httpStatus(403) : FORBIDDEN, notAllowed]
            : [notAllowed];
        } else {
          expect =
            m === 'HEAD'
              ? [httpStatus(404), httpStatus(400)]
              : [NOT_FOUND, httpStatus(404), httpStatus(400)];
        }
        const c = finish('http-forms', {
          label: `${m} ${tg} (Host: ${h}${withBody ? `, body: ${base.label}` : ', no body'})`,
          message,
          headers: sent,
          expect,
        });
        return {
          ...c,
          body: withBody ? c.body : Buffer.alloc(0),
          form: { method: m, target: tg },
        };
      });
    });
}

// ----- families, by name -----------------------------------------------------------------------

export const families = {
  brokenJson,
  hugeBodies,
  envelopes: (t: Targets) => family('envelope')(envelopes(t)),
  notifications: (t: Targets) => family('notifications')(notifications(t)),
  unknownMethods: (t: Targets) => family('unknown-method')(unknownMethods(t)),
  toolsCall: (t: Targets) => family('tools-call')(toolsCall(t)),
  taskMethods: (t: Targets) => family('task-methods')(taskMethods(t)),
  updateValues: (t: Targets) => family('update-values')(updateValues(t)),
  listen: (t: Targets) => family('listen')(listen(t)),
  headers,
  contentTypes,
  protoKeys,
  deepNesting,
  hugeValues,
  httpForms,
};
