import {
  CreateTaskResultV2Schema,
  DetailedTaskV2Schema,
  GetTaskResultV2Schema,
} from '@modelcontextprotocol/ext-tasks/core/v2';
import {
  DuplicateInputKeyError,
  InvalidTaskParamsError,
  TaskError,
  TaskTerminalError,
} from '../src/errors.js';
import {
  cancelTask,
  completeTask,
  failTask,
  type InputRequest,
  type InputResponse,
  isCancellationRequested,
  markCancelledTask,
  newTask,
  parkId,
  parkTask,
  progressTask,
  recordStepTask,
  requireInputTask,
  resumeTask,
  takeInputResponsesTask,
  nextVersion,
  deliveryMark,
  isNews,
  type TaskRecord,
  terminalSince,
  thrownJsonRpcError,
  type TransitionResult,
  toCallToolResult,
  toJsonRpcError,
  toStoredResult,
  toWireTask,
  toWire,
  inputResponseProblem,
  isAnswered,
  resolveTtlMs,
  updateTask,
  validateInputRequests,
  validateInputResponses,
  validateNewTaskParams,
  validateProgressMessage,
  validateStatusMessage,
  validateTaskId,
} from '../src/task.js';
import { elicit } from './support/helpers.js';

const T0 = Date.UTC(2026, 6, 28, 12, 0, 0);
const ok = (result: TransitionResult): TaskRecord => {
  if (result instanceof TaskError) throw result;
  return result;
};
const fresh = (): TaskRecord => newTask('task-1', { principal: 'alice' }, { ttlMs: 60_000 }, T0);
const ask = (message: string): InputRequest => elicit(message);
const answer = (name: string): InputResponse => ({ action: 'accept', content: { name } });
const result = toStoredResult({
  content: [{ type: 'text', text: '3' }],
  structuredContent: { sum: 3 },
});

function inputRequired(keys: string[]): TaskRecord {
  return ok(
    requireInputTask(fresh(), Object.fromEntries(keys.map((k) => [k, ask(k)])), {}, T0 + 1),
  );
}

function terminals(): TaskRecord[] {
  return [
    ok(completeTask(fresh(), result, {}, T0 + 1)),
    ok(failTask(fresh(), { code: -32000, message: 'no' }, {}, T0 + 1)),
    ok(cancelTask(fresh(), 'immediate', T0 + 1)),
  ];
}

describe('task model: a new task', () => {
  it('is working, version 1, with both timestamps at creation and the owner normalized', () => {
    const task = fresh();
    expect(task).toMatchObject({ status: 'working', version: 1, createdAt: T0, lastUpdatedAt: T0 });
    expect(task.owner).toEqual({ principal: 'alice', tenant: null });
  });
});

describe('task model: a finished task without TTL is kept until terminalTtlMs', () => {
  const unlimited = (): TaskRecord =>
    newTask('task-2', { principal: 'alice' }, { ttlMs: null }, T0);

  it('counts from the instant it finished: its last update', () => {
    const done = ok(completeTask(unlimited(), result, {}, T0 + 5));
    expect(terminalSince(done)).toBe(T0 + 5);
    expect(terminalSince(ok(failTask(unlimited(), { code: 1, message: 'x' }, {}, T0 + 6)))).toBe(
      T0 + 6,
    );
    expect(terminalSince(ok(cancelTask(unlimited(), 'immediate', T0 + 7)))).toBe(T0 + 7);
  });

  it('does not apply to a live task, nor to a task with a TTL (live or finished)', () => {
    expect(terminalSince(unlimited())).toBeNull();
    expect(terminalSince(ok(progressTask(unlimited(), 'busy', T0 + 1)))).toBeNull();
    expect(terminalSince(ok(cancelTask(unlimited(), 'cooperative', T0 + 1)))).toBeNull();
    expect(terminalSince(fresh())).toBeNull();
    for (const task of terminals()) expect(terminalSince(task)).toBeNull();
  });
});

describe('task model: transitions', () => {
  it('working → input_required → working (when every key is answered)', () => {
    const asked = inputRequired(['name']);
    expect(asked.status).toBe('input_required');
    const answered = ok(updateTask(asked, { name: answer('Luca') }, T0 + 2));
    expect(answered.status).toBe('working');
    expect(answered.inputRequests).toBeUndefined();
    expect(answered.inputResponses).toEqual({ name: answer('Luca') });
  });

  it.each(['working', 'input_required'] as const)('%s → completed, failed or cancelled', (from) => {
    const start = from === 'working' ? fresh() : inputRequired(['k']);
    expect(ok(completeTask(start, result, {}, T0 + 5)).status).toBe('completed');
    expect(ok(failTask(start, { code: 1, message: 'x' }, {}, T0 + 5)).status).toBe('failed');
    expect(ok(cancelTask(start, 'immediate', T0 + 5)).status).toBe('cancelled');
    expect(ok(markCancelledTask(start, T0 + 5)).status).toBe('cancelled');
  });

  it('a terminal task is final: complete, fail, requireInput, progress are refused', () => {
    for (const done of terminals()) {
      expect(completeTask(done, result, {}, T0 + 9)).toBeInstanceOf(TaskTerminalError);
      expect(failTask(done, { code: 1, message: 'x' }, {}, T0 + 9)).toBeInstanceOf(
        TaskTerminalError,
      );
      expect(requireInputTask(done, { k: ask('k') }, {}, T0 + 9)).toBeInstanceOf(TaskTerminalError);
      expect(progressTask(done, 'late', T0 + 9)).toBeInstanceOf(TaskTerminalError);
    }
  });

  it('a terminal task is final: cancel and update change nothing (same record back)', () => {
    for (const done of terminals()) {
      expect(cancelTask(done, 'immediate', T0 + 9)).toBe(done);
      expect(cancelTask(done, 'cooperative', T0 + 9)).toBe(done);
      expect(updateTask(done, { k: answer('x') }, T0 + 9)).toBe(done);
    }
  });

  it('markCancelled on a cancelled task is a no-op; on another terminal task it is refused', () => {
    const [completed, failed, cancelled] = terminals();
    expect(markCancelledTask(cancelled!, T0 + 9)).toBe(cancelled);
    expect(markCancelledTask(completed!, T0 + 9)).toBeInstanceOf(TaskTerminalError);
    expect(markCancelledTask(failed!, T0 + 9)).toBeInstanceOf(TaskTerminalError);
  });

  it('progress(null) removes the status message; without one it returns the task as it is', () => {
    const task = ok(progressTask(fresh(), 'Half way', T0 + 1));
    const cleared = ok(progressTask(task, null, T0 + 2));
    expect(cleared).not.toHaveProperty('statusMessage');
    expect(cleared.version).toBe(nextVersion(task.version, T0 + 2));
    expect(cleared.lastUpdatedAt).toBe(T0 + 2);
    expect(progressTask(cleared, null, T0 + 3)).toBe(cleared);
    const [completed] = terminals();
    expect(progressTask(completed!, null, T0 + 9)).toBeInstanceOf(TaskTerminalError);
  });

  it('every change bumps the version and lastUpdatedAt, which never goes back', () => {
    const task = fresh();
    const later = ok(progressTask(task, 'half', T0 + 10));
    // The writer's clock in microseconds, above the previous version.
    expect(later.version).toBe((T0 + 10) * 1_000);
    expect(later.lastUpdatedAt).toBe(T0 + 10);
    const skewed = ok(progressTask(later, 'more', T0 + 3));
    expect(skewed.lastUpdatedAt).toBe(T0 + 10);
    expect(skewed.version).toBe(later.version + 1);
  });

  it('a version is never given to two states, even after a store lost its latest writes', () => {
    // 30 writes within one millisecond, then the store loses all but the first (a failover to a
    // replica that had not received them); the next write, a millisecond later, is above them all.
    const first = ok(progressTask(fresh(), 'step 0', T0 + 1));
    let latest = first;
    for (let i = 1; i < 30; i++) latest = ok(progressTask(latest, `step ${i}`, T0 + 1));
    const lost = latest.version;
    const after = ok(completeTask(first, result, {}, T0 + 2));
    expect(after.version).toBeGreaterThan(lost);
    expect(nextVersion(5, 0)).toBe(6);
    expect(Number.isSafeInteger(nextVersion(1, 8.64e15))).toBe(true);
  });

  it('deliveryMark: a terminal state is news after any live one, nothing is after a terminal one', () => {
    const live = ok(progressTask(fresh(), 'late', T0 + 100));
    const done = { ...ok(completeTask(fresh(), result, {}, T0 + 1)), version: 4 };
    expect(isNews(done, deliveryMark(live))).toBe(true);
    expect(isNews(live, deliveryMark(done))).toBe(false);
    expect(isNews(done, deliveryMark(done))).toBe(false);
    expect(isNews(live, undefined)).toBe(true);
    expect(isNews(fresh(), deliveryMark(live))).toBe(false);
  });

  it('does not mutate its input', () => {
    const task = Object.freeze(fresh());
    expect(() => completeTask(task, result, {}, T0 + 1)).not.toThrow();
    expect(task.status).toBe('working');
  });
});

describe('task model: input requests and answers', () => {
  it('input keys are unique over the whole life of the task, naming the duplicates', () => {
    const asked = inputRequired(['a', 'b']);
    const back = ok(updateTask(asked, { a: answer('1'), b: answer('2') }, T0 + 2));
    const refused = requireInputTask(
      back,
      { b: ask('again'), c: ask('c'), a: ask('x') },
      {},
      T0 + 3,
    );
    expect(refused).toBeInstanceOf(DuplicateInputKeyError);
    expect((refused as DuplicateInputKeyError).keys).toEqual(['b', 'a']);
    expect((refused as Error).message).toContain('b, a');
    expect((refused as DuplicateInputKeyError).code).toBe(-32602);
    expect(ok(requireInputTask(back, { c: ask('c') }, {}, T0 + 3)).status).toBe('input_required');
  });

  it('a stay in input_required is dated from its start (inputRequiredSince), across more requests and partial answers, and the date goes when it ends; never on the wire', () => {
    const asked = inputRequired(['a', 'b']);
    expect(asked.inputRequiredSince).toBe(T0 + 1);
    const more = ok(requireInputTask(asked, { c: ask('c') }, {}, T0 + 5));
    expect(more.inputRequiredSince).toBe(T0 + 1);
    const partial = ok(updateTask(more, { a: answer('1') }, T0 + 6));
    expect(partial.inputRequiredSince).toBe(T0 + 1);
    expect(Object.keys(toWire(partial))).not.toContain('inputRequiredSince');
    const back = ok(updateTask(partial, { b: answer('2'), c: answer('3') }, T0 + 7));
    expect(back.status).toBe('working');
    expect('inputRequiredSince' in back).toBe(false);
    const again = ok(requireInputTask(back, { d: ask('d') }, {}, T0 + 9));
    expect(again.inputRequiredSince).toBe(T0 + 9);
    for (const end of [
      ok(completeTask(again, result, {}, T0 + 10)),
      ok(failTask(again, { code: -32000, message: 'no' }, {}, T0 + 10)),
      ok(cancelTask(again, 'immediate', T0 + 10)),
    ]) {
      expect('inputRequiredSince' in end).toBe(false);
    }
  });

  it('a key still outstanding cannot be requested again either', () => {
    expect(requireInputTask(inputRequired(['a']), { a: ask('a') }, {}, T0 + 2)).toBeInstanceOf(
      DuplicateInputKeyError,
    );
  });

  it('requireInput while input_required adds to the outstanding requests', () => {
    const more = ok(requireInputTask(inputRequired(['a']), { b: ask('b') }, {}, T0 + 2));
    expect(Object.keys(more.inputRequests ?? {})).toEqual(['a', 'b']);
    expect(more.usedInputKeys).toEqual(['a', 'b']);
  });

  it('answering every key clears the status message that described the wait', () => {
    const asked = ok(
      requireInputTask(fresh(), { a: ask('a') }, { statusMessage: 'Waiting' }, T0 + 1),
    );
    expect(asked.statusMessage).toBe('Waiting');
    const partial = ok(requireInputTask(asked, { b: ask('b') }, {}, T0 + 2));
    expect(ok(updateTask(partial, { a: answer('1') }, T0 + 3)).statusMessage).toBe('Waiting');
    expect(ok(updateTask(asked, { a: answer('1') }, T0 + 3)).statusMessage).toBeUndefined();
  });

  it('a partial answer keeps input_required with the rest outstanding', () => {
    const partial = ok(updateTask(inputRequired(['a', 'b']), { a: answer('1') }, T0 + 2));
    expect(partial.status).toBe('input_required');
    expect(Object.keys(partial.inputRequests ?? {})).toEqual(['b']);
    expect(partial.inputResponses).toEqual({ a: answer('1') });
    const done = ok(updateTask(partial, { b: answer('2') }, T0 + 3));
    expect(done.status).toBe('working');
    expect(done.inputResponses).toEqual({ a: answer('1'), b: answer('2') });
  });

  it('unknown and already answered keys are ignored; only unknown keys change nothing', () => {
    const asked = inputRequired(['a', 'b']);
    expect(updateTask(asked, { zzz: answer('?') }, T0 + 2)).toBe(asked);
    const partial = ok(updateTask(asked, { a: answer('1'), zzz: answer('?') }, T0 + 2));
    expect(partial.inputResponses).toEqual({ a: answer('1') });
    expect(updateTask(partial, { a: answer('changed') }, T0 + 3)).toBe(partial);
  });

  it('an answer that does not fit its request is refused and changes nothing', () => {
    const asked = inputRequired(['a']);
    for (const bad of [
      null,
      5,
      'x',
      [],
      {},
      { action: 'maybe' },
      { action: 'accept', content: true },
    ]) {
      const refused = updateTask(asked, { a: bad as never }, T0 + 2);
      expect(refused).toBeInstanceOf(InvalidTaskParamsError);
      expect((refused as Error).message).toContain('input response "a"');
    }
    expect(
      inputResponseProblem({ method: 'roots/list' }, { roots: [{ uri: 'file:///x' }] }),
    ).toBeUndefined();
    expect(inputResponseProblem({ method: 'roots/list' }, { roots: [{}] })).toBe(
      'needs roots, each with a uri',
    );
    // Params are checked at the wire, so this test hands the rule an incomplete request on purpose.
    const sampling = { method: 'sampling/createMessage', params: {} } as unknown as InputRequest;
    expect(
      inputResponseProblem(sampling, {
        model: 'm',
        role: 'assistant',
        content: { type: 'text', text: 'hi' },
      }),
    ).toBeUndefined();
    expect(inputResponseProblem(sampling, { model: 'm' })).toBe('needs model, role and content');
  });

  it('update is idempotent', () => {
    const asked = inputRequired(['a']);
    const once = ok(updateTask(asked, { a: answer('1') }, T0 + 2));
    expect(updateTask(once, { a: answer('1') }, T0 + 3)).toBe(once);
  });

  it('update on a working task changes nothing', () => {
    const task = fresh();
    expect(updateTask(task, { a: answer('1') }, T0 + 2)).toBe(task);
  });

  it('keys named like Object.prototype members are plain keys', () => {
    const asked = inputRequired(['constructor', '__proto__']);
    expect(updateTask(asked, { toString: answer('x') }, T0 + 2)).toBe(asked);
    const responses = JSON.parse('{"__proto__": {"action": "accept"}}') as Record<string, never>;
    const partial = ok(updateTask(asked, responses, T0 + 2));
    expect(Object.keys(partial.inputRequests ?? {})).toEqual(['constructor']);
    expect(Object.getPrototypeOf(partial.inputResponses)).toBe(Object.prototype);
  });

  it('isAnswered: every key asked is answered once none of them is outstanding', () => {
    const waiting = inputRequired(['a', 'b']);
    expect(isAnswered(waiting, ['a'])).toBe(false);
    expect(isAnswered(waiting, ['a', 'b'])).toBe(false);
    expect(isAnswered(waiting, ['c'])).toBe(true);
    expect(isAnswered(waiting, [])).toBe(true);
    const half = ok(updateTask(waiting, { a: answer('1') }, T0 + 2));
    expect(isAnswered(half, ['a'])).toBe(true);
    expect(isAnswered(half, ['a', 'b'])).toBe(false);
    const all = ok(updateTask(half, { b: answer('2') }, T0 + 3));
    expect(all.inputRequests).toBeUndefined();
    expect(isAnswered(all, ['a', 'b'])).toBe(true);
    expect(isAnswered(fresh(), ['a'])).toBe(true);
    // Own keys only: a key named like an Object.prototype member is not outstanding by inheritance.
    expect(isAnswered(waiting, ['constructor', 'toString'])).toBe(true);
  });

  it('takeInputResponses removes the answers and leaves a task without any as it is', () => {
    const answered = ok(updateTask(inputRequired(['a']), { a: answer('1') }, T0 + 2));
    const taken = takeInputResponsesTask(answered);
    expect(taken.inputResponses).toBeUndefined();
    expect(taken.version).toBeGreaterThan(answered.version);
    expect(takeInputResponsesTask(taken)).toBe(taken);
  });

  it('malformed input requests are refused with a message that says what is wrong', () => {
    const bad: [unknown, RegExp][] = [
      [null, /must be an object/],
      [[], /must be an object/],
      [{}, /must not be empty/],
      [{ '': ask('x') }, /keys must not be empty/],
      [{ a: 'text' }, /"a" must be an object with a method/],
      [{ a: { method: 'tools/call', params: {} } }, /"a" has method "tools\/call"/],
      [{ a: { method: 'elicitation/create' } }, /"a" needs params/],
      [{ a: { method: 'elicitation/create', params: { message: 'x' } } }, /requestedSchema/],
      [
        { a: { method: 'elicitation/create', params: { mode: 'url', message: 'x' } } },
        /params.url/,
      ],
      [{ a: { method: 'sampling/createMessage', params: { messages: [] } } }, /maxTokens/],
      [{ a: { method: 'roots/list', params: 3 } }, /params must be an object/],
    ];
    for (const [requests, message] of bad) {
      expect(() => validateInputRequests(requests)).toThrow(InvalidTaskParamsError);
      expect(() => validateInputRequests(requests)).toThrow(message);
    }
    expect(() =>
      validateInputRequests({
        a: ask('a'),
        b: { method: 'roots/list' },
        c: { method: 'sampling/createMessage', params: { messages: [], maxTokens: 5 } },
        d: {
          method: 'elicitation/create',
          params: { mode: 'url', message: 'x', url: 'https://x' },
        },
      }),
    ).not.toThrow();
  });
});

describe('task model: what callers and workers hand in', () => {
  /** The JSON-RPC error a call throws, to assert its exact code and message. */
  const thrown = (call: () => unknown): unknown => {
    try {
      call();
    } catch (error) {
      expect(error).toBeInstanceOf(TaskError);
      return (error as TaskError).toJsonRpcError();
    }
    throw new Error('expected a throw');
  };
  const invalid = (message: string) => ({ code: -32602, message });

  it('a task id is a string; anything else is invalid params (one rule for the wire and the service)', () => {
    expect(validateTaskId('abc')).toBe('abc');
    expect(validateTaskId('')).toBe('');
    for (const id of [undefined, null, 7, {}, ['abc']]) {
      expect(() => validateTaskId(id)).toThrow(InvalidTaskParamsError);
      expect(thrown(() => validateTaskId(id))).toEqual(
        invalid('Invalid params: taskId must be a string'),
      );
    }
  });

  it('the TTL: the default when none is asked, capped by maxTtlMs, unlimited only without a cap', () => {
    const open = { defaultTtlMs: 3_600_000, maxTtlMs: null };
    expect(resolveTtlMs(undefined, open)).toBe(3_600_000);
    expect(resolveTtlMs(5000, open)).toBe(5000);
    expect(resolveTtlMs(null, open)).toBeNull();
    expect(resolveTtlMs(undefined, { defaultTtlMs: null, maxTtlMs: null })).toBeNull();
    const capped = { defaultTtlMs: 30_000, maxTtlMs: 60_000 };
    expect(resolveTtlMs(undefined, capped)).toBe(30_000);
    expect(resolveTtlMs(500, capped)).toBe(500);
    expect(resolveTtlMs(60_000, capped)).toBe(60_000);
    expect(resolveTtlMs(120_000, capped)).toBe(60_000);
    expect(resolveTtlMs(null, capped)).toBe(60_000);
    // Every TTL rule, hostile values included, is in ttl.spec.ts.
    for (const [ttl, got] of [
      [0, '0'],
      [-1, '-1'],
      [1.5, '1.5'],
      ['5000', 'a string'],
      [Number.NaN, 'NaN'],
    ] as const) {
      expect(thrown(() => resolveTtlMs(ttl, capped))).toEqual(
        invalid(`ttlMs must be a positive integer or null, got ${got}`),
      );
    }
  });

  it('a new task: TTL, poll interval and status message are checked in that order', () => {
    const limits = { defaultTtlMs: 1000, maxTtlMs: null };
    expect(validateNewTaskParams({}, limits)).toEqual({
      ttlMs: 1000,
      pollIntervalMs: undefined,
      statusMessage: undefined,
    });
    expect(
      validateNewTaskParams({ ttlMs: 50, pollIntervalMs: 200, statusMessage: 'Queued' }, limits),
    ).toEqual({ ttlMs: 50, pollIntervalMs: 200, statusMessage: 'Queued' });
    expect(thrown(() => validateNewTaskParams({ pollIntervalMs: 0 }, limits))).toEqual(
      invalid('pollIntervalMs must be a positive integer'),
    );
    expect(thrown(() => validateNewTaskParams({ pollIntervalMs: 2.5 }, limits))).toEqual(
      invalid('pollIntervalMs must be a positive integer'),
    );
    expect(thrown(() => validateNewTaskParams({ statusMessage: 3 }, limits))).toEqual(
      invalid('statusMessage must be a string'),
    );
    expect(
      thrown(() =>
        validateNewTaskParams({ ttlMs: 0, pollIntervalMs: 0, statusMessage: 3 }, limits),
      ),
    ).toEqual(invalid('ttlMs must be a positive integer or null, got 0'));
    expect(
      thrown(() => validateNewTaskParams({ pollIntervalMs: 0, statusMessage: 3 }, limits)),
    ).toEqual(invalid('pollIntervalMs must be a positive integer'));
  });

  it('a status message is a string or absent; a progress message a string or null', () => {
    expect(validateStatusMessage(undefined)).toBeUndefined();
    expect(validateStatusMessage('')).toBe('');
    expect(validateStatusMessage('Busy')).toBe('Busy');
    for (const message of [null, 1, {}]) {
      expect(thrown(() => validateStatusMessage(message))).toEqual(
        invalid('statusMessage must be a string'),
      );
    }
    expect(validateProgressMessage(null)).toBeNull();
    expect(validateProgressMessage('Step 2')).toBe('Step 2');
    for (const message of [undefined, 1, {}]) {
      expect(thrown(() => validateProgressMessage(message))).toEqual(
        invalid('A progress message must be a string or null'),
      );
    }
  });

  it('the answers of tasks/update are an object (the same object back)', () => {
    const responses = { a: answer('1') };
    expect(validateInputResponses(responses)).toBe(responses);
    const bare = Object.create(null) as Record<string, unknown>;
    expect(validateInputResponses(bare)).toBe(bare);
    for (const responses of [undefined, null, 'x', [], new Date(0)]) {
      expect(thrown(() => validateInputResponses(responses))).toEqual(
        invalid('Invalid params: inputResponses must be an object'),
      );
    }
  });
});

describe('task model: steps, resume and park (durable calls)', () => {
  const held = (record: TaskRecord, by: string): TaskRecord => ({ ...record, heldBy: by });

  it('records a step once: the first run to record it wins, and a finished task drops the journal', () => {
    const first = ok(recordStepTask(fresh(), 'charge', { value: { id: 1 } }, T0 + 1));
    expect(first.steps).toEqual({ charge: { value: { id: 1 } } });
    expect(first.lastUpdatedAt).toBe(T0);
    expect(ok(recordStepTask(first, 'charge', { value: { id: 2 } }, T0 + 2))).toBe(first);
    expect(ok(completeTask(first, result, {}, T0 + 3)).steps).toBeUndefined();
    for (const done of terminals()) {
      expect(recordStepTask(done, 'x', {}, T0 + 9)).toBeInstanceOf(TaskTerminalError);
    }
  });

  it('resumes a task held by `from` only, counting a run unless it wakes from a park', () => {
    const task = { ...held(fresh(), 'dead'), runs: 1 };
    const resumed = ok(resumeTask(task, 'dead', 'me', T0 + 1));
    expect([resumed.heldBy, resumed.runs]).toEqual(['me', 2]);
    expect(ok(resumeTask(task, 'someone else', 'me', T0 + 1))).toBe(task);
    const parked = held(task, parkId(task.taskId));
    const woken = ok(resumeTask(parked, parkId(task.taskId), 'me', T0 + 1));
    expect([woken.heldBy, woken.runs]).toEqual(['me', 1]);
  });

  it('parks a task held by `from`, not one whose awaited input is all answered meanwhile', () => {
    const asking = held(inputRequired(['name']), 'me');
    expect(ok(parkTask(asking, 'me', T0 + 2, ['name'])).heldBy).toBe(parkId(asking.taskId));
    expect(ok(parkTask(asking, 'other', T0 + 2, ['name']))).toBe(asking);
    const answered = ok(updateTask(asking, { name: answer('Ada') }, T0 + 2));
    expect(ok(parkTask(answered, 'me', T0 + 3, ['name']))).toBe(answered);
    expect(ok(parkTask(answered, 'me', T0 + 3)).heldBy).toBe(parkId(asking.taskId));
  });
});

describe('task model: cancellation', () => {
  it('immediate: a live task becomes cancelled and drops its outstanding input', () => {
    const cancelled = ok(cancelTask(inputRequired(['a']), 'immediate', T0 + 2));
    expect(cancelled.status).toBe('cancelled');
    expect(cancelled.inputRequests).toBeUndefined();
    expect(isCancellationRequested(cancelled)).toBe(true);
  });

  it('cooperative: cancel records the request once; the task stays live and may still complete', () => {
    const requested = ok(cancelTask(fresh(), 'cooperative', T0 + 2));
    expect(requested.status).toBe('working');
    expect(requested.cancelRequested).toBe(true);
    expect(isCancellationRequested(requested)).toBe(true);
    expect(cancelTask(requested, 'cooperative', T0 + 3)).toBe(requested);
    const done = ok(completeTask(requested, result, {}, T0 + 4));
    expect(done.status).toBe('completed');
    expect(done.cancelRequested).toBeUndefined();
    expect(ok(markCancelledTask(requested, T0 + 4)).status).toBe('cancelled');
  });
});

describe('task model: results and errors', () => {
  it('the stored result always carries resultType "complete" and content', () => {
    expect(toStoredResult({ structuredContent: { a: 1 } })).toEqual({
      structuredContent: { a: 1 },
      content: [],
      resultType: 'complete',
    });
    expect(toStoredResult({ content: [], resultType: 'task', isError: true }).resultType).toBe(
      'complete',
    );
    expect(() => toStoredResult('x')).toThrow(InvalidTaskParamsError);
    expect(() => toStoredResult({ content: 'x' })).toThrow(/content must be an array/);
    expect(() => toStoredResult({ content: [], isError: 'yes' })).toThrow(/isError/);
  });

  it('failures normalize to JSON-RPC error objects', () => {
    expect(toJsonRpcError([-32001, 'Nope'])).toEqual({ code: -32001, message: 'Nope' });
    expect(toJsonRpcError({ code: 5, message: 'm', data: { x: 1 } })).toEqual({
      code: 5,
      message: 'm',
      data: { x: 1 },
    });
    const coded = Object.assign(new Error('Quota'), { code: -32050, data: 'd' });
    expect(toJsonRpcError(coded)).toEqual({ code: -32050, message: 'Quota', data: 'd' });
    expect(toJsonRpcError(new Error('boom'))).toEqual({ code: -32603, message: 'boom' });
    expect(() => toJsonRpcError([1.5, 'x'])).toThrow(/code must be an integer, got 1.5/);
    expect(() => toJsonRpcError({ code: 1 } as never)).toThrow(/message must be a string/);
  });

  it("a tool method's return value becomes a CallToolResult", () => {
    expect(toCallToolResult(undefined)).toEqual({ content: [] });
    expect(toCallToolResult(null)).toEqual({ content: [] });
    expect(toCallToolResult('Hello')).toEqual({ content: [{ type: 'text', text: 'Hello' }] });
    expect(toCallToolResult('')).toEqual({ content: [{ type: 'text', text: '' }] });
    const own = { content: [{ type: 'text', text: 'x' }], isError: true };
    expect(toCallToolResult(own)).toBe(own);
    expect(toCallToolResult({ sum: 3 })).toEqual({
      content: [{ type: 'text', text: '{"sum":3}' }],
      structuredContent: { sum: 3 },
    });
    // `content` that is not an array does not make a CallToolResult: the value is data.
    expect(toCallToolResult({ content: 'x' })).toEqual({
      content: [{ type: 'text', text: '{"content":"x"}' }],
      structuredContent: { content: 'x' },
    });
    expect(toCallToolResult(42)).toEqual({
      content: [{ type: 'text', text: '42' }],
      structuredContent: 42,
    });
    expect(toCallToolResult([1, 2])).toEqual({
      content: [{ type: 'text', text: '[1,2]' }],
      structuredContent: [1, 2],
    });
    expect(() => toCallToolResult(10n)).toThrow(TypeError);
    // Then stored as any result: resultType "complete", isError checked.
    expect(toStoredResult(toCallToolResult(undefined))).toEqual({
      content: [],
      resultType: 'complete',
    });
    expect(() => toStoredResult(toCallToolResult({ content: [], isError: 1 }))).toThrow(
      'A task result isError must be a boolean',
    );
  });

  it('a thrown value carries a JSON-RPC error when it has an integer code and a string message', () => {
    const coded = Object.assign(new Error('Quota'), { code: -32050, data: { left: 0 } });
    expect(thrownJsonRpcError(coded)).toEqual({
      code: -32050,
      message: 'Quota',
      data: { left: 0 },
    });
    expect(thrownJsonRpcError({ code: 7, message: 'plain object' })).toStrictEqual({
      code: 7,
      message: 'plain object',
    });
    expect(thrownJsonRpcError({ code: 7, message: 'm', data: undefined })).toStrictEqual({
      code: 7,
      message: 'm',
    });
    expect(thrownJsonRpcError({ code: 7, message: 'm', data: null })).toStrictEqual({
      code: 7,
      message: 'm',
      data: null,
    });
    expect(thrownJsonRpcError(new InvalidTaskParamsError('Bad'))).toEqual({
      code: -32602,
      message: 'Bad',
    });
    expect(thrownJsonRpcError(new TaskTerminalError('completed'))).toEqual({
      code: -32602,
      message: 'Task is already completed',
    });
    const duplicate = new DuplicateInputKeyError(['a']);
    expect(thrownJsonRpcError(duplicate)).toEqual(duplicate.toJsonRpcError());
    // None: an Error without an integer code (its message is not for the client), a tuple, a
    // primitive, an object missing either field.
    for (const thrown of [
      new Error('secret'),
      Object.assign(new Error('x'), { code: 'E_IO' }),
      Object.assign(new Error('x'), { code: 1.5 }),
      [-32000, 'tuple'],
      'boom',
      42,
      null,
      undefined,
      { code: 1 },
      { message: 'm' },
      { code: 1, message: 2 },
    ]) {
      expect(thrownJsonRpcError(thrown)).toBeUndefined();
    }
  });

  it('fail: the status message defaults to the error message', () => {
    expect(ok(failTask(fresh(), { code: 1, message: 'Disk full' }, {}, T0 + 1)).statusMessage).toBe(
      'Disk full',
    );
    const told = ok(
      failTask(fresh(), { code: 1, message: 'Disk full' }, { statusMessage: 'S' }, T0 + 1),
    );
    expect(told.statusMessage).toBe('S');
  });
});

describe('task model: wire mapping (checked with the official ext-tasks schemas)', () => {
  const every = (): TaskRecord[] => {
    const asked = inputRequired(['name']);
    return [fresh(), asked, ...terminals(), ok(progressTask(fresh(), 'Half way', T0 + 1))];
  };

  it('toWireTask gives the bare Task with ISO 8601 timestamps, valid as a CreateTaskResult', () => {
    const polled = newTask('t', { principal: null }, { ttlMs: 5000, pollIntervalMs: 250 }, T0);
    expect(toWireTask(polled)).toEqual({
      taskId: 't',
      status: 'working',
      createdAt: '2026-07-28T12:00:00.000Z',
      lastUpdatedAt: '2026-07-28T12:00:00.000Z',
      ttlMs: 5000,
      pollIntervalMs: 250,
    });
    for (const task of every()) {
      const parsed = CreateTaskResultV2Schema.safeParse({
        ...toWireTask(task),
        resultType: 'task',
      });
      expect(parsed.success).toBe(true);
      expect(toWireTask(task)).not.toHaveProperty('inputRequests');
      expect(toWireTask(task)).not.toHaveProperty('result');
    }
  });

  it('ttlMs null (unlimited) stays null on the wire', () => {
    const unlimited = newTask('t', { principal: null }, { ttlMs: null }, T0);
    expect(toWireTask(unlimited).ttlMs).toBeNull();
    expect(
      GetTaskResultV2Schema.safeParse({ ...toWire(unlimited), resultType: 'complete' }).success,
    ).toBe(true);
  });

  it('toWire gives the DetailedTask for every status, valid for tasks/get and notifications', () => {
    for (const task of every()) {
      const wire = toWire(task);
      const asGet = GetTaskResultV2Schema.safeParse({ ...wire, resultType: 'complete' });
      expect(asGet.error).toBeUndefined();
      expect(DetailedTaskV2Schema.safeParse(wire).success).toBe(true);
      expect(wire).not.toHaveProperty('version');
      expect(wire).not.toHaveProperty('owner');
      expect(wire).not.toHaveProperty('usedInputKeys');
      expect(wire).not.toHaveProperty('inputResponses');
    }
  });

  it('toWire carries inputRequests, result and error where the status calls for them', () => {
    const [completed, failed] = terminals();
    expect(toWire(inputRequired(['name']))).toMatchObject({ inputRequests: { name: ask('name') } });
    expect(toWire(completed!)).toMatchObject({
      result: { resultType: 'complete', content: [{ text: '3' }] },
    });
    expect(toWire(failed!)).toMatchObject({ error: { code: -32000, message: 'no' } });
  });
});
