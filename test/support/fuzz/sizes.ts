import fc from 'fast-check';
import { CLIENT_INFO_KEY } from '../wire.js';
import { ABSENT, get, type J, Obj, obj, put, Raw } from './json.js';
import {
  ACCEPTED,
  HEADER_MISMATCH,
  INVALID_PARAMS,
  INVALID_REQUEST,
  METHOD_NOT_FOUND,
  MISSING_CAPABILITY,
  type Outcome,
  TOOL_ERROR,
} from './outcomes.js';
import { type Draft, family, finish, type FuzzCase, type Targets } from './cases.js';
import { bearer, rpc, standardHeaders } from './requests.js';
import { expectByName, longText, unknownTaskIds } from './values.js';

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
      // A request id over MAX_REQUEST_ID_LENGTH is refused before the request is read.
      expect: [INVALID_REQUEST],
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
