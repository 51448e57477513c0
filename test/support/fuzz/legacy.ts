import fc from 'fast-check';
import { keyOfCursor } from '../../../src/store/task-listing.js';
import { ABSENT, type J, type Maybe, Obj, obj, put, Raw, ser, show } from './json.js';
import {
  ACCEPTED,
  EMPTY_PAGE,
  INVALID_PARAMS,
  INVALID_REQUEST,
  type Outcome,
  PARSE_ERROR,
  TOOL_ERROR,
} from './outcomes.js';
import { type Draft, type Header, type Targets, TASK_TOOLS } from './cases.js';
import { badArguments } from './params.js';
import { bearer } from './requests.js';
import { LEGACY_PROTOCOL_VERSION } from '../wire.js';
import {
  absentOr,
  anArray,
  anObject,
  idArb,
  json,
  key,
  longText,
  notObject,
  notString,
  number,
  strangers,
  text,
  unknownTaskIds,
} from './values.js';

/**
 * The 2025-11-25 era (SEP-1686 tasks, as the v1 SDK client speaks it): no `_meta` envelope, the
 * protocol version in the header only (or no header at all, which is that era too). Malformed
 * `params.task` on `tools/call`; `tasks/get|result|list|cancel` with malformed, unknown, expired
 * and foreign ids and params; `tasks/list` cursors; JSON-RPC responses whose id carries the
 * input-request prefix; malformed bodies.
 *
 * A foreign id is sent with a twin: the same request naming a made-up id, whose answer must be the
 * same to the byte (the id aside). `tasks/result` is sent only for ids the caller does not own (a
 * live own task's result waits by design): it must answer at once.
 */

const INPUT_PREFIX = 'nestjs-mcp-tasks/input:';
/** The made-up id of a foreign id's twin request. */
const MADE_UP = 'no-such-task';

export function legacyHeaders(auth: string | undefined, version: string | null): Header[] {
  const headers: Header[] = [
    ['content-type', 'application/json'],
    ['accept', 'application/json, text/event-stream'],
  ];
  if (version !== null) headers.push(['mcp-protocol-version', version]);
  if (auth !== undefined) headers.push(['authorization', auth]);
  return headers;
}

/** A 2025-11-25 request: `params` as given (none when ABSENT), no envelope. */
function call(method: string, params: Maybe<J>, id: J = 1): Obj {
  return put(obj({ jsonrpc: '2.0', id, method }), 'params', params);
}

/** Versions a 2025-era client may send: the revision, none at all, the one before. */
const version = fc.constantFrom<string | null>(
  LEGACY_PROTOCOL_VERSION,
  LEGACY_PROTOCOL_VERSION,
  null,
  '2025-06-18',
);

interface LegacyDraft {
  label: string;
  message: J;
  auth?: string;
  version?: string | null;
  expect: readonly Outcome[];
  twin?: LegacyDraft;
  slowMs?: number;
  sse?: boolean;
}

function draft(d: LegacyDraft): Draft {
  return {
    label: `[2025-11-25${d.version === null ? ', no version header' : d.version && d.version !== LEGACY_PROTOCOL_VERSION ? `, version ${d.version}` : ''}] ${d.label}`,
    message: d.message,
    auth: d.auth,
    headers: legacyHeaders(d.auth, d.version === undefined ? LEGACY_PROTOCOL_VERSION : d.version),
    expect: d.expect,
    ...(d.twin !== undefined && { twin: draft(d.twin) }),
    ...(d.slowMs !== undefined && { slowMs: d.slowMs }),
    ...(d.sse !== undefined && { sse: d.sse }),
  };
}

// ----- tools/call with a malformed `task` ---------------------------------------------------------

/**
 * A `ttl` that is not a positive integer (what JSON.parse makes of it). A positive integer of any
 * size is valid, capped by maxTtlMs (2^53 and past it, 1e300, 1e999 which parses to Infinity):
 * those are in `goodTask`.
 */
const badTtl: fc.Arbitrary<J> = fc.oneof(
  fc.constant(0),
  fc.integer({ min: -2_000_000_000, max: -1 }),
  fc
    .double({ min: -1e12, max: 1e12, noNaN: true, noDefaultInfinity: true })
    .filter((n) => !Number.isInteger(n)),
  fc.constantFrom(
    new Raw('-0'),
    new Raw('0.5'),
    new Raw('-1e999'),
    new Raw('-9007199254740993'),
    new Raw('0.0000000000000000000001'),
    null,
    true,
    false,
    '60000',
    '',
    '1e3',
  ),
  text(0, 12),
  anArray,
  anObject,
);

/** A `task` that is not an object (the tool is never started). */
const notTask: fc.Arbitrary<J> = notObject;

const extraFields = fc.array(
  fc.tuple(
    key.filter((name) => name !== 'ttl'),
    json,
  ),
  { maxLength: 3 },
);

/** Valid arguments for each task tool: only `task` is wrong. */
const GOOD_ARGS: Readonly<Record<string, Obj>> = {
  add_slowly: obj({ a: 1, b: 2, delayMs: 0 }),
  greet: obj({}),
  wait_for_cancel: obj({}),
  fail_with: obj({ code: -32001, message: 'x' }),
};

function toolsCallTask(t: Targets): fc.Arbitrary<LegacyDraft> {
  const who = fc.constantFrom(undefined, bearer(t.owner), bearer('bob'));
  const taskTool = fc.constantFrom(...TASK_TOOLS);
  const goodTask = fc.oneof(
    fc.constant(obj({})),
    fc.integer({ min: 1, max: 3_600_000 }).map((ttl) => obj({ ttl })),
    fc
      .constantFrom(
        new Raw('9007199254740991'),
        new Raw('9007199254740993'),
        new Raw('1e300'),
        new Raw('1e999'),
        new Raw('123456789012345678901234567890'),
      )
      .map((ttl) => obj({ ttl })),
  );
  return fc.oneof(
    // A task tool, `task` not an object.
    fc
      .record({ tool: taskTool, task: notTask, auth: who, id: idArb, v: version })
      .map(({ tool, task, auth, id, v }) => ({
        label: `tools/call ${tool}, task: ${show(task)}`,
        message: call('tools/call', obj({ name: tool, arguments: GOOD_ARGS[tool]!, task }), id),
        auth,
        version: v,
        expect: [INVALID_PARAMS],
      })),
    // A task tool, `task.ttl` of a wrong type, sign or size, maybe beside extra fields.
    fc
      .record({ tool: taskTool, ttl: badTtl, extra: extraFields, auth: who, id: idArb, v: version })
      .map(({ tool, ttl, extra, auth, id, v }) => {
        let task = obj({});
        for (const [name, value] of extra) task = put(task, name, value);
        task = put(task, 'ttl', ttl);
        return {
          label: `tools/call ${tool}, task.ttl: ${show(ttl)}${extra.length > 0 ? ` (+${extra.length} extra fields)` : ''}`,
          message: call('tools/call', obj({ name: tool, arguments: GOOD_ARGS[tool]!, task }), id),
          auth,
          version: v,
          expect: [INVALID_PARAMS],
        };
      }),
    // A valid `task`, arguments that are no object or fail the tool's schema: no task either.
    fc
      .record({ tool: taskTool, args: notObject, task: goodTask, auth: who, id: idArb })
      .map(({ tool, args, task, auth, id }) => ({
        label: `tools/call ${tool} as a task, arguments: ${show(args)}`,
        message: call('tools/call', obj({ name: tool, arguments: args, task }), id),
        auth,
        expect: [INVALID_PARAMS],
      })),
    fc
      .record({
        bad: badArguments().filter((bad) => TASK_TOOLS.has(bad.tool)),
        task: goodTask,
        auth: who,
        id: idArb,
      })
      .map(({ bad, task, auth, id }) => ({
        label: `tools/call ${bad.tool} as a task, ${bad.what}`,
        message: call('tools/call', obj({ name: bad.tool, arguments: bad.args, task }), id),
        auth,
        expect: [TOOL_ERROR],
      })),
    // A plain tool or an unknown one with a `task` that is not an object: the SDK's answer.
    fc
      .record({
        name: fc.oneof(
          fc.constant('echo'),
          text(1, 20).filter((n) => n !== 'echo'),
        ),
        task: notTask,
        auth: who,
        id: idArb,
      })
      .filter(({ name }) => !TASK_TOOLS.has(name))
      .map(({ name, task, auth, id }) => ({
        label: `tools/call ${show(name)}, task: ${show(task)}`,
        message: call('tools/call', obj({ name, arguments: obj({ text: 'x' }), task }), id),
        auth,
        expect: [INVALID_PARAMS],
        sse: true,
      })),
  );
}

// ----- tasks/get, tasks/result, tasks/cancel ------------------------------------------------------

const ID_METHODS = ['tasks/get', 'tasks/result', 'tasks/cancel'] as const;

/** `tasks/result` of a task the caller cannot see answers at once. */
const slowFor = (method: string): number | undefined =>
  method === 'tasks/result' ? 1_500 : undefined;

function taskIdMethods(t: Targets): fc.Arbitrary<LegacyDraft> {
  const method = fc.constantFrom(...ID_METHODS);
  const owner = bearer(t.owner);
  const any = fc.constantFrom(undefined, owner, bearer('bob'));
  const own = fc.constantFrom(...t.working, t.inputRequired, t.completed, t.failed, t.victim);
  const unknown = fc.oneof(
    unknownTaskIds(t),
    fc.constant(t.expired ?? MADE_UP),
    fc.constantFrom(`${INPUT_PREFIX}${t.working[0]}:name`, `${t.working[0]}:${t.inputKey}`),
  );
  const twinOf = (name: string, auth: string | undefined, id: J, v: string | null) => ({
    label: `${name} of the made-up id ${MADE_UP}`,
    message: call(name, obj({ taskId: MADE_UP }), id),
    auth,
    version: v,
    expect: [INVALID_PARAMS],
  });
  return fc.oneof(
    fc
      .record({ method, taskId: absentOr(notString), extra: extraFields, auth: any, id: idArb })
      .map(({ method: name, taskId, extra, auth, id }) => {
        let params = obj({});
        for (const [field, value] of extra)
          if (field !== 'taskId') params = put(params, field, value);
        return {
          label: `${name}, taskId: ${show(taskId)}`,
          message: call(name, put(params, 'taskId', taskId), id),
          auth,
          expect: [INVALID_PARAMS],
          slowMs: slowFor(name),
        };
      }),
    // `params` present but not an object: not a JSON-RPC request.
    fc
      .record({
        method,
        params: fc.oneof(number, fc.boolean(), fc.constant(null), text(), anArray),
        auth: any,
        id: idArb,
      })
      .map(({ method: name, params, auth, id }) => ({
        label: `${name}, params: ${show(params)}`,
        message: call(name, params, id),
        auth,
        expect: [INVALID_REQUEST],
      })),
    // Unknown and expired ids, any caller.
    fc
      .record({ method, taskId: unknown, auth: any, id: idArb, v: version })
      .map(({ method: name, taskId, auth, id, v }) => ({
        label: `${name} of ${taskId === t.expired ? 'an expired own task' : `an unknown task ${show(taskId, 40)}`}`,
        message: call(name, obj({ taskId }), id),
        auth,
        version: v,
        expect: [INVALID_PARAMS],
        twin: twinOf(name, auth, id, v),
        slowMs: slowFor(name),
      })),
    // Foreign ids: answered exactly as the made-up id is.
    fc
      .record({ method, taskId: own, auth: strangers(t), id: idArb, v: version })
      .map(({ method: name, taskId, auth, id, v }) => ({
        label: `${name} of another principal's task (as ${auth ?? 'anonymous'})`,
        message: call(name, obj({ taskId }), id),
        auth,
        version: v,
        expect: [INVALID_PARAMS],
        twin: twinOf(name, auth, id, v),
        slowMs: slowFor(name),
      })),
  );
}

// ----- tasks/list ---------------------------------------------------------------------------------

/** Whether the store would take the cursor (then the caller's own tasks before it are listed). */
function decodes(cursor: string): boolean {
  try {
    keyOfCursor(cursor);
    return true;
  } catch {
    return false;
  }
}

function tasksList(t: Targets): fc.Arbitrary<LegacyDraft> {
  const owner = bearer(t.owner);
  const real = t.cursors ?? [];
  const realCursor = fc.constantFrom(...(real.length > 0 ? real : ['MDAw']));
  const garbage = fc.oneof(
    text(0, 40),
    fc.constantFrom('', '=', 'null', 'undefined', '__proto__', 'MDAw', 'e30', '%00', '..'),
    realCursor.chain((cursor) =>
      fc.integer({ min: 1, max: cursor.length - 1 }).map((cut) => cursor.slice(0, cut)),
    ),
    fc.tuple(realCursor, text(1, 6)).map(([cursor, junk]) => `${cursor}${junk}`),
    realCursor.map((cursor) => `${cursor}=`),
    realCursor.map((cursor) => Buffer.from(cursor, 'base64url').toString('base64')),
    longText(1_000, 200_000),
  );
  /** A made-up cursor of the store's own shape: the owner's listing key with an unknown id. */
  const forged = (cursor: string): string => {
    const keyText = Buffer.from(cursor, 'base64url').toString('utf8');
    const at = keyText.slice(0, keyText.indexOf(':'));
    return Buffer.from(`${at}:${MADE_UP}`, 'utf8').toString('base64url');
  };
  return fc.oneof(
    fc
      .record({ cursor: fc.oneof(notString), auth: fc.constantFrom(undefined, owner), id: idArb })
      .map(({ cursor, auth, id }) => ({
        label: `tasks/list, cursor: ${show(cursor)}`,
        message: call('tasks/list', obj({ cursor }), id),
        auth,
        expect: [INVALID_PARAMS],
      })),
    fc
      .record({
        params: fc.oneof(number, fc.boolean(), fc.constant(null), text(), anArray),
        auth: fc.constantFrom(undefined, owner),
        id: idArb,
      })
      .map(({ params, auth, id }) => ({
        label: `tasks/list, params: ${show(params)}`,
        message: call('tasks/list', params, id),
        auth,
        expect: [INVALID_REQUEST],
      })),
    // Garbage, truncated, padded and huge cursors: refused; the few a store could have made list
    // the caller's own tasks before them (sent by callers owning none: an empty page).
    fc
      .record({ cursor: garbage, stranger: strangers(t), id: idArb, v: version })
      .map(({ cursor, stranger, id, v }) => {
        const taken = decodes(cursor);
        const auth = taken ? stranger : owner;
        return {
          label: `tasks/list, cursor ${show(cursor, 40)} (as ${auth ?? 'anonymous'})`,
          message: call('tasks/list', obj({ cursor }), id),
          auth,
          version: v,
          expect: [taken ? EMPTY_PAGE : INVALID_PARAMS],
        };
      }),
    // Another owner's cursor: answered as a made-up cursor of the same shape.
    fc
      .record({ cursor: realCursor, auth: strangers(t), id: idArb, v: version })
      .map(({ cursor, auth, id, v }) => ({
        label: `tasks/list with another principal's cursor (as ${auth ?? 'anonymous'})`,
        message: call('tasks/list', obj({ cursor }), id),
        auth,
        version: v,
        expect: [EMPTY_PAGE],
        twin: {
          label: 'tasks/list with a made-up cursor of the same shape',
          message: call('tasks/list', obj({ cursor: forged(cursor) }), id),
          auth,
          version: v,
          expect: [EMPTY_PAGE],
        },
      })),
  );
}

// ----- JSON-RPC responses naming our input requests -----------------------------------------------

function inputAnswers(t: Targets): fc.Arbitrary<LegacyDraft> {
  const owner = bearer(t.owner);
  const ownTasks = [...t.working, t.inputRequired, t.completed, t.failed, t.victim];
  const outstanding = new Set([t.inputKey, t.victimKey]);
  const anyKey = fc.oneof(
    fc.constantFrom(t.inputKey, t.victimKey, '__proto__', 'constructor', 'toString', 'x:y'),
    text(1, 12),
  );
  /** A response body: well formed (an object result, a `{code, message}` error) or not. */
  type Body = { what: string; result?: J; error?: J; wellFormed: boolean };
  const body: fc.Arbitrary<Body> = fc.oneof(
    anObject.map((result) => ({ what: `result ${show(result, 30)}`, result, wellFormed: true })),
    json.map((result) => ({
      what: `result ${show(result, 30)}`,
      result,
      wellFormed: result instanceof Obj,
    })),
    fc.record({ code: fc.integer(), message: text() }).map(({ code, message }) => ({
      what: `error ${code}`,
      error: obj({ code, message }),
      wellFormed: true,
    })),
    json.map((error) => ({ what: `error ${show(error, 30)}`, error, wellFormed: false })),
  );
  /**
   * A well-formed response is taken and answered 202 whatever it names; the SDK's classifier may
   * refuse one of the wrong shape first (-32600, HTTP 400).
   */
  const answered = (b: Body): Outcome[] =>
    b.wellFormed ? [ACCEPTED] : [ACCEPTED, INVALID_REQUEST];
  const answer = (id: J, b: Omit<Body, 'what' | 'wellFormed'>, jsonrpc = true): Obj => {
    let message = jsonrpc ? obj({ jsonrpc: '2.0', id }) : obj({ id });
    if (b.result !== undefined) message = put(message, 'result', b.result);
    if (b.error !== undefined) message = put(message, 'error', b.error);
    return message;
  };
  /** Who answers which task: strangers any task of the owner's; the owner only unknown tasks. */
  const target = fc.oneof(
    fc
      .tuple(fc.constantFrom(...ownTasks), strangers(t))
      .map(([taskId, auth]) => ({ taskId, auth, whose: 'another principal’s' })),
    fc
      .tuple(
        fc.oneof(unknownTaskIds(t), fc.constant(t.expired ?? MADE_UP)),
        fc.constantFrom(owner, undefined, bearer('bob')),
      )
      .map(([taskId, auth]) => ({ taskId, auth, whose: 'an unknown' })),
  );
  return fc.oneof(
    fc
      .record({ target, key: anyKey, body, v: version })
      .map(({ target: { taskId, auth, whose }, key: name, body: b, v }) => ({
        label: `a response to ${INPUT_PREFIX}<${whose} task>:${show(name, 20)}, ${b.what}`,
        message: answer(`${INPUT_PREFIX}${taskId}:${name}`, b),
        auth,
        version: v,
        expect: answered(b),
      })),
    // The owner answering a key its task does not ask (or a task that asks nothing).
    fc
      .record({
        taskId: fc.constantFrom(...ownTasks),
        key: anyKey.filter((name) => !outstanding.has(name)),
        body,
      })
      .map(({ taskId, key: name, body: b }) => ({
        label: `the owner's response to ${INPUT_PREFIX}<own task>:${show(name, 20)}, ${b.what}`,
        message: answer(`${INPUT_PREFIX}${taskId}:${name}`, b),
        auth: owner,
        expect: answered(b),
      })),
    // Ids near the prefix: not ours, or ours cut short.
    fc
      .record({
        id: fc.oneof(
          fc.constantFrom(
            INPUT_PREFIX,
            `${INPUT_PREFIX}:`,
            `${INPUT_PREFIX}::`,
            `${INPUT_PREFIX}${t.inputRequired}`,
            `${INPUT_PREFIX}${t.inputRequired}:`,
            `${INPUT_PREFIX}:${t.inputKey}`,
            INPUT_PREFIX.toUpperCase() + `${t.inputRequired}:${t.inputKey}`,
            `nestjs-mcp-tasks/input${t.inputRequired}:${t.inputKey}`,
            ` ${INPUT_PREFIX}${t.inputRequired}:${t.inputKey}`,
          ),
          text(0, 20),
          fc.integer(),
        ),
        auth: fc.constantFrom(undefined, bearer('bob')),
        body,
      })
      .map(({ id, auth, body: b }) => ({
        label: `a response to the id ${show(id, 60)}, ${b.what}`,
        message: answer(id, b),
        auth,
        expect: answered(b),
      })),
    // Both result and error, or no jsonrpc member: not a valid response; never delivered.
    fc
      .record({
        taskId: fc.constantFrom(...ownTasks),
        auth: strangers(t),
        result: anObject,
        error: json,
        jsonrpc: fc.boolean(),
      })
      .map(({ taskId, auth, result, error, jsonrpc }) => ({
        label: `a response to ${INPUT_PREFIX}<another principal’s task>:${t.inputKey} ${jsonrpc ? 'with both result and error' : 'without jsonrpc'}`,
        message: answer(
          `${INPUT_PREFIX}${taskId}:${t.inputKey}`,
          jsonrpc ? { result, error } : { result },
          jsonrpc,
        ),
        auth,
        expect: [ACCEPTED, INVALID_REQUEST],
      })),
  );
}

// ----- malformed bodies ---------------------------------------------------------------------------

function bodies(t: Targets): fc.Arbitrary<LegacyDraft> {
  const auth = fc.constantFrom(undefined, bearer(t.owner));
  const valid = (method: string): Obj =>
    call(method, method === 'tasks/list' ? obj({}) : obj({ taskId: t.completed }));
  const methodName = fc.constantFrom('tasks/get', 'tasks/result', 'tasks/list', 'tasks/cancel');
  return fc.oneof(
    // Cut short or spoiled JSON text.
    fc.record({ method: methodName, cut: fc.nat(), auth }).map(({ method, cut, auth: who }) => {
      const textBody = ser(valid(method));
      return {
        label: `${method} cut short at ${cut % (textBody.length - 1)}`,
        message: new Raw(textBody.slice(0, cut % (textBody.length - 1))),
        auth: who,
        expect: [PARSE_ERROR],
      };
    }),
    // Envelope members of the wrong kind.
    fc
      .record({
        method: methodName,
        field: fc.constantFrom('id', 'jsonrpc', 'method'),
        value: fc.oneof(fc.constant(null), fc.boolean(), anArray, anObject, fc.constant(ABSENT)),
        auth,
      })
      .filter(({ field, value }) => !(field === 'id' && value === ABSENT))
      .map(({ method, field, value, auth: who }) => ({
        label: `${method}, ${field}: ${show(value)}`,
        message: put(valid(method), field, value),
        auth: who,
        expect: [INVALID_REQUEST],
      })),
    // A task method as a notification: accepted, not acted upon.
    fc
      .record({ method: fc.constantFrom('tasks/cancel', 'tasks/get', 'tasks/result'), auth })
      .map(({ method, auth: who }) => ({
        label: `${method} of an own task as a notification`,
        message: put(call(method, obj({ taskId: t.working[1]! })), 'id', ABSENT),
        auth: who,
        expect: [ACCEPTED],
      })),
  );
}

// ----- the family ---------------------------------------------------------------------------------

export function legacyTasks(t: Targets): fc.Arbitrary<Draft> {
  return fc
    .oneof(
      { arbitrary: toolsCallTask(t), weight: 3 },
      { arbitrary: taskIdMethods(t), weight: 4 },
      { arbitrary: tasksList(t), weight: 2 },
      { arbitrary: inputAnswers(t), weight: 3 },
      { arbitrary: bodies(t), weight: 1 },
    )
    .map(draft);
}
