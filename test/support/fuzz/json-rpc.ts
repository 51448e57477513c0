import fc from 'fast-check';
import {
  CLIENT_CAPABILITIES_KEY,
  CLIENT_INFO_KEY,
  PROTOCOL_VERSION,
  PROTOCOL_VERSION_KEY,
  TASKS_EXTENSION,
} from '../wire.js';
import { ABSENT, get, type J, type Maybe, Obj, obj, put, Raw, show } from './json.js';
import {
  ACCEPTED,
  HEADER_MISMATCH,
  INVALID_ENVELOPE,
  INVALID_REQUEST,
  LEGACY_REFUSED,
  METHOD_NOT_FOUND,
  UNSUPPORTED_VERSION,
} from './outcomes.js';
import type { Draft, Header, Targets } from './cases.js';
import {
  type Base,
  bearer,
  envelope,
  PLAIN_HEADER,
  rpc,
  standardHeaders,
  validBases,
} from './requests.js';
import {
  absentOr,
  anArray,
  anObject,
  idArb,
  json,
  key,
  notObject,
  notString,
  number,
  text,
} from './values.js';

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
