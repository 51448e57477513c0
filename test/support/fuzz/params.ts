import fc from 'fast-check';
import { ABSENT, type J, type Maybe, Obj, obj, put, Raw, show } from './json.js';
import { INVALID_PARAMS, MISSING_CAPABILITY, type Outcome, TOOL_ERROR } from './outcomes.js';
import { type Draft, type Targets, TASK_TOOLS, TOOLS } from './cases.js';
import { bearer, rpc } from './requests.js';
import {
  absentOr,
  anArray,
  anObject,
  expectByName,
  idArb,
  json,
  longText,
  notBoolean,
  notInteger,
  notNumber,
  notObject,
  notString,
  notStringArray,
  number,
  strangers,
  text,
  unknownTaskIds,
} from './values.js';

// ----- family: tools/call params ---------------------------------------------------------------

/** Arguments that fail the tool's own schema (each with at least one fault; never valid). */
export function badArguments(): fc.Arbitrary<{ tool: string; args: Obj; what: string }> {
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
