import {
  CLIENT_CAPABILITIES_KEY,
  CLIENT_INFO_KEY,
  PROTOCOL_VERSION,
  PROTOCOL_VERSION_KEY,
  TASKS_EXTENSION,
} from '../wire.js';
import { get, type J, Obj, obj, put } from './json.js';
import { FORBIDDEN, HEADER_MISMATCH, type Outcome, UNSUPPORTED_MEDIA } from './outcomes.js';
import type { Header, Targets } from './cases.js';

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

export function nameSource(method: string): string | undefined {
  return Object.hasOwn(NAME_SOURCE, method) ? NAME_SOURCE[method] : undefined;
}

/** A header value sent as is: printable ASCII without leading or trailing blanks. */
export const PLAIN_HEADER = /^(?:[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?)?$/;

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
export function decodeName(value: string): string | undefined {
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

export const stripOws = (value: string): string => value.replace(/^[ \t]+|[ \t]+$/g, '');

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

export const TASKS_DECLARED = obj({ extensions: obj({ [TASKS_EXTENSION]: obj({}) }) });

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
