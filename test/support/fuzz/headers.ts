import fc from 'fast-check';
import { PROTOCOL_VERSION } from '../wire.js';
import { get, obj, Obj, put } from './json.js';
import { INVALID_PARAMS, type Outcome, TOOL_ERROR, UNSUPPORTED_MEDIA } from './outcomes.js';
import { finish, type FuzzCase, type Header, type Targets } from './cases.js';
import {
  type Base,
  decodeName,
  headerVerdict,
  nameSource,
  rpc,
  standardHeaders,
  stripOws,
  validBases,
} from './requests.js';
import { idArb, text } from './values.js';

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
