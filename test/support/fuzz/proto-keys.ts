import fc from 'fast-check';
import {
  CLIENT_CAPABILITIES_KEY,
  PROTOCOL_VERSION,
  PROTOCOL_VERSION_KEY,
  TASKS_EXTENSION,
} from '../wire.js';
import { get, type J, Obj, obj, put, show } from './json.js';
import {
  INVALID_ENVELOPE,
  INVALID_PARAMS,
  INVALID_REQUEST,
  MISSING_CAPABILITY,
  type Outcome,
  TOOL_ERROR,
} from './outcomes.js';
import { type Draft, family, type FuzzCase, type Targets } from './cases.js';
import { type Base, bearer, envelope, rpc, TASKS_DECLARED, validBases } from './requests.js';
import { anObject, expectByName, idArb, json, unknownTaskIds } from './values.js';
import { envelopes } from './json-rpc.js';
import { listen, taskMethods, toolsCall } from './params.js';

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
