/**
 * `runTaskTool` of `nestjs-mcp-tasks/testing`: a `@TaskTool` method (or a plain function) run in a
 * unit test through the production runner, without Nest or HTTP.
 */
import { IsBoolean, IsOptional } from 'class-validator';
import { z } from 'zod';
import { TaskTool, type TaskContext } from '../../src/index.js';
import type { InputRequest, InputResponse } from '../../src/entries/store.js';
import { runTaskTool, TaskToolInputError, type TaskToolRun } from '../../src/testing/index.js';
import { accept, elicit } from '../support/helpers.js';
import type { WaiterFeed } from '../../src/notify/waiter-feed.js';

const askName = (message = 'What is your name?'): InputRequest => elicit(message);
const text = (run: { result?: { content: unknown[] } }): unknown =>
  (run.result?.content[0] as { text?: unknown } | undefined)?.text;

class GreetInput {
  @IsOptional()
  @IsBoolean()
  politely?: boolean;
}

class GreetTools {
  calls = 0;
  readonly jobs: string[] = [];
  seenSignal: AbortSignal | undefined;

  @TaskTool({ name: 'greet', input: GreetInput, pollIntervalMs: 50, ttlMs: 60_000 })
  async greet(input: GreetInput, task: TaskContext) {
    this.calls++;
    await task.progress('Asking for a name');
    const { name } = await task.requireInput({ name: askName() });
    const who = (name.content as { name: string }).name;
    return `${input.politely ? 'Good day' : 'Hi'}, ${who}!`;
  }

  @TaskTool({ name: 'introduce' })
  async introduce(_input: unknown, task: TaskContext) {
    const first = await task.requireInput({ first: askName('First name?') });
    const last = await task.requireInput({ last: askName('Last name?') });
    return [first.first, last.last].map((a) => (a.content as { name: string }).name).join(' ');
  }

  @TaskTool({ name: 'wait_for_cancel' })
  async waitForCancel(_input: unknown, task: TaskContext) {
    this.seenSignal = task.signal;
    await task.progress('Waiting');
    await new Promise((_, reject) => {
      task.signal.addEventListener('abort', () => reject(task.signal.reason as Error));
    });
  }

  @TaskTool({ name: 'refuse' })
  async refuse() {
    throw Object.assign(new Error('Quota exceeded'), { code: -32001, data: { limit: 3 } });
  }

  @TaskTool({ name: 'crash' })
  async crash() {
    throw new Error('db password is hunter2');
  }

  @TaskTool({ name: 'enqueue', statusMessage: 'Queued' })
  async enqueue(_input: unknown, task: TaskContext) {
    this.jobs.push(task.taskId);
    task.handOff();
    return 'this return value does not complete a handed-off task';
  }

  @TaskTool({ name: 'count_steps' })
  async steps(_input: unknown, task: TaskContext) {
    for (const step of ['one', 'two', 'three']) await task.progress(`step ${step}`);
    return { steps: 3 };
  }

  @TaskTool({ name: 'echo' })
  async echo(input: unknown) {
    return { received: input };
  }

  notATool() {
    return 'plain';
  }
}

/** The run's waiter feed (a peek at the service's private field). */
const waitersOf = (run: TaskToolRun): WaiterFeed =>
  (run.tasks as unknown as { waiters: WaiterFeed }).waiters;

/** How many in-process waiters listen to the run's task (a peek at the change feed). */
const listeners = (run: TaskToolRun): number =>
  (waitersOf(run) as unknown as { listeners: Map<string, Set<unknown>> }).listeners.get(run.taskId)
    ?.size ?? 0;

/** Each run is disposed after its test, so nothing keeps running. */
const runs: TaskToolRun[] = [];
const track = (run: TaskToolRun): TaskToolRun => (runs.push(run), run);
afterEach(async () => {
  await Promise.all(runs.splice(0).map((run) => run.dispose()));
});

describe('runTaskTool', () => {
  it('a tool that asks for input completes with the answer given in options.answers', async () => {
    const tools = new GreetTools();
    const run = track(
      await runTaskTool(tools, 'greet', { politely: true }, { answers: { name: accept('Ada') } }),
    );
    const task = await run.finished;
    expect(task.status).toBe('completed');
    expect(task.result).toEqual({
      content: [{ type: 'text', text: 'Good day, Ada!' }],
      resultType: 'complete',
    });
    expect(task.taskId).toBe(run.taskId);
    expect(task.ttlMs).toBe(60_000);
    expect(task.pollIntervalMs).toBe(50);
    expect(run.owner).toEqual({ principal: 'test-user', tenant: null });
    expect(run.statuses).toEqual([
      { status: 'working' },
      { status: 'working', statusMessage: 'Asking for a name' },
      { status: 'input_required', statusMessage: 'Asking for a name' },
      { status: 'working' },
      { status: 'completed' },
    ]);
    expect(run.records.map((record) => record.version)).toEqual(
      [...run.records.map((record) => record.version)].sort((a, b) => a - b),
    );
    expect(await run.returned).toEqual({ returned: true, value: 'Good day, Ada!' });
    expect(tools.calls).toBe(1);
  });

  it('answers may be a function of the request and its key; undefined leaves one for later', async () => {
    const asked: Array<[string, unknown]> = [];
    const run = track(
      await runTaskTool(new GreetTools(), 'introduce', undefined, {
        answers: (request, key) => {
          asked.push([key, (request.params as { message?: unknown }).message]);
          return key === 'first' ? accept('Ada') : undefined;
        },
      }),
    );
    const waiting = await run.waitFor(
      (task) => task.status === 'input_required' && task.inputRequests?.last !== undefined,
    );
    expect(Object.keys(waiting.inputRequests ?? {})).toEqual(['last']);
    expect(asked).toEqual([
      ['first', 'First name?'],
      ['last', 'Last name?'],
    ]);
    await run.answer({ last: accept('Lovelace') });
    expect(text(await run.finished)).toBe('Ada Lovelace');
  });

  it('an unanswered request waits for run.answer(...)', async () => {
    const run = track(await runTaskTool(new GreetTools(), 'greet'));
    const waiting = await run.waitFor('input_required');
    expect(waiting.inputRequests).toEqual({ name: askName() });
    expect((await run.current()).status).toBe('input_required');
    const answered = await run.answer({ name: accept('Grace') });
    expect(answered.status).toBe('working');
    const task = await run.finished;
    expect(task.status).toBe('completed');
    expect(text(task)).toBe('Hi, Grace!');
  });

  it('finished rejects after timeoutMs, naming the keys nobody answered; dispose ends the method', async () => {
    const tools = new GreetTools();
    // Read before the run starts: its timeout runs from then, not from the assertions below.
    const started = Date.now();
    const run = await runTaskTool(tools, 'greet', {}, { timeoutMs: 150 });
    await run.waitFor('input_required');
    await new Promise((resolve) => setImmediate(resolve));
    expect(listeners(run)).toBe(3); // requireInput, the runner's cancel watch, finished
    await expect(run.finished).rejects.toThrow(
      'runTaskTool: the task did not come to finish within 150 ms; it is input_required ("Asking for a name"), waiting for answers to "name": give them in options.answers or call run.answer({...}) (options.timeoutMs sets the wait)',
    );
    // Never early (a timer may fire up to a millisecond before Date.now() shows 150 ms).
    expect(Date.now() - started).toBeGreaterThanOrEqual(149);
    await expect(run.waitFor('completed')).rejects.toThrow(/did not come to be completed/);
    // A wait that timed out stops watching: the method's requireInput and the runner's cancel
    // watch remain.
    expect(listeners(run)).toBe(2);
    await run.dispose();
    const outcome = await run.returned;
    expect(outcome.returned).toBe(false);
    expect(run.context.signal.aborted).toBe(true);
    const task = await run.current();
    expect(task.status).toBe('failed');
    expect(task.error).toEqual({
      code: -32603,
      message: 'The server shut down before the task finished',
    });
  });

  it('cancel fires the method signal and the task ends cancelled', async () => {
    const tools = new GreetTools();
    const run = track(await runTaskTool(tools, 'wait_for_cancel'));
    await run.waitFor((task) => task.statusMessage === 'Waiting');
    expect(run.context.signal.aborted).toBe(false);
    expect(tools.seenSignal).toBe(run.context.signal);
    const cancelled = await run.cancel();
    expect(cancelled.status).toBe('cancelled');
    const task = await run.finished;
    expect(task.status).toBe('cancelled');
    const outcome = await run.returned;
    expect(outcome.returned).toBe(false);
    expect(tools.seenSignal?.aborted).toBe(true);
    expect(run.statuses).toEqual([
      { status: 'working' },
      { status: 'working', statusMessage: 'Waiting' },
      { status: 'cancelled', statusMessage: 'Cancelled' },
    ]);
  });

  it('a signal first read after the cancel is already aborted, with the cancel as its reason', async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let seen: { aborted: boolean; reason: unknown } | undefined;
    const run = track(
      await runTaskTool(
        async (_input: unknown, task: TaskContext) => {
          await task.progress('Working');
          await gate; // the method does not look at its signal until the cancel has happened
          seen = { aborted: task.signal.aborted, reason: task.signal.reason };
          return 'late';
        },
        {},
        { cancellation: 'cooperative' },
      ),
    );
    await run.waitFor((task) => task.statusMessage === 'Working');
    await run.cancel();
    release();
    expect((await run.finished).status).toBe('cancelled');
    expect(seen?.aborted).toBe(true);
    expect((seen?.reason as Error).name).toBe('AbortError');
  });

  it('cooperative cancellation: the signal fires, the method stops, the task ends cancelled', async () => {
    const run = track(
      await runTaskTool(
        async (_input: unknown, task: TaskContext) => {
          await task.progress('Working');
          await new Promise((resolve) => task.signal.addEventListener('abort', resolve));
          return 'stopped';
        },
        {},
        { cancellation: 'cooperative' },
      ),
    );
    await run.waitFor((task) => task.statusMessage === 'Working');
    const requested = await run.cancel();
    expect(requested.status).toBe('working');
    expect(requested.cancelRequested).toBe(true);
    const task = await run.finished;
    expect(task.status).toBe('cancelled');
    expect(await run.returned).toEqual({ returned: true, value: 'stopped' });
    expect(run.statuses.map((s) => s.statusMessage)).toEqual([
      undefined,
      'Working',
      'Cancellation requested',
      'Cancelled',
    ]);
  });

  it('a thrown JSON-RPC error fails the task with its code, message and data', async () => {
    const run = track(await runTaskTool(new GreetTools(), 'refuse'));
    const task = await run.finished;
    expect(task.status).toBe('failed');
    expect(task.error).toEqual({ code: -32001, message: 'Quota exceeded', data: { limit: 3 } });
    expect(task.statusMessage).toBe('Quota exceeded');
  });

  it('any other throw fails the task with -32603 "Internal error", the error kept out', async () => {
    const run = track(await runTaskTool(new GreetTools(), 'crash'));
    const task = await run.finished;
    expect(task.status).toBe('failed');
    expect(task.error).toEqual({ code: -32603, message: 'Internal error' });
    expect(JSON.stringify(run.records)).not.toContain('hunter2');
    const outcome = await run.returned;
    expect(outcome.returned === false && (outcome.error as Error).message).toBe(
      'db password is hunter2',
    );
  });

  it('input that fails the tool schema is rejected as the endpoint words it; the method does not run', async () => {
    const tools = new GreetTools();
    const refusal = await runTaskTool(tools, 'greet', { politely: 'yes' }).catch(
      (error: unknown) => error,
    );
    expect(refusal).toBeInstanceOf(TaskToolInputError);
    expect((refusal as Error).message).toBe(
      'Input validation error: Invalid arguments for tool greet: politely: politely must be a boolean value',
    );
    expect((refusal as TaskToolInputError).issues).toEqual([
      { message: 'politely must be a boolean value', path: ['politely'] },
    ]);
    await expect(runTaskTool(tools, 'greet', { politely: true, extra: 1 })).rejects.toThrow(
      /Invalid arguments for tool greet: extra: property extra should not exist/,
    );
    await expect(runTaskTool(tools, 'greet', [1, 2])).rejects.toThrow(
      'Invalid params: the arguments of tool greet must be an object',
    );
    expect(tools.calls).toBe(0);
  });

  it('handOff: the return value does not complete the task; a worker does, by id', async () => {
    const tools = new GreetTools();
    const run = track(await runTaskTool(tools, 'enqueue'));
    expect(await run.returned).toEqual({
      returned: true,
      value: 'this return value does not complete a handed-off task',
    });
    expect(tools.jobs).toEqual([run.taskId]);
    await new Promise((resolve) => setTimeout(resolve, 20));
    const waiting = await run.current();
    expect(waiting.status).toBe('working');
    expect(waiting.statusMessage).toBe('Queued');
    // The queue job, holding the id, drives the task through TasksService.
    await run.tasks.progress(tools.jobs[0]!, 'Rendering');
    await run.tasks.complete(tools.jobs[0]!, { content: [{ type: 'text', text: 'done' }] });
    const task = await run.finished;
    expect(task.status).toBe('completed');
    expect(text(task)).toBe('done');
    expect(run.statuses).toEqual([
      { status: 'working', statusMessage: 'Queued' },
      { status: 'working', statusMessage: 'Rendering' },
      { status: 'completed', statusMessage: 'Rendering' },
    ]);
  });

  it('records progress messages in order', async () => {
    const run = track(await runTaskTool(new GreetTools(), 'count_steps'));
    const task = await run.finished;
    expect(run.statuses.map((s) => s.statusMessage)).toEqual([
      undefined,
      'step one',
      'step two',
      'step three',
      'step three',
    ]);
    expect(task.result?.structuredContent).toEqual({ steps: 3 });
  });

  it('finds a tool by its tool name too, and names the tools when it finds none', async () => {
    const run = track(await runTaskTool(new GreetTools(), 'count_steps'));
    expect((await run.finished).status).toBe('completed');
    const byMethod = track(await runTaskTool(new GreetTools(), 'steps'));
    expect((await byMethod.finished).status).toBe('completed');
    await expect(runTaskTool(new GreetTools(), 'notATool')).rejects.toThrow(
      'runTaskTool: GreetTools has no @TaskTool method or tool named "notATool"; its task tools are greet, introduce, waitForCancel, refuse, crash, enqueue, steps, echo',
    );
  });

  it('runs a plain function with a zod input and the task options given', async () => {
    const run = track(
      await runTaskTool(
        async (input: { a: number; b: number }, task: TaskContext) => {
          await task.progress('Adding');
          return { sum: input.a + input.b };
        },
        { a: 2, b: 3 },
        {
          name: 'add',
          input: z.object({ a: z.number(), b: z.number() }),
          ttlMs: null,
          pollIntervalMs: 250,
          statusMessage: 'Queued',
          owner: { principal: 'ada', tenant: 'acme' },
        },
      ),
    );
    const task = await run.finished;
    expect(task.result?.structuredContent).toEqual({ sum: 5 });
    // An unlimited TTL gets the module's default cap (maxTtlMs, 7 days), as in an app.
    expect(task.ttlMs).toBe(604_800_000);
    expect(task.pollIntervalMs).toBe(250);
    expect(task.owner).toEqual({ principal: 'ada', tenant: 'acme' });
    expect(run.statuses[0]).toEqual({ status: 'working', statusMessage: 'Queued' });
    await expect(
      runTaskTool(
        async () => 'never',
        { a: 'two' },
        {
          name: 'add',
          input: z.object({ a: z.number() }),
        },
      ),
    ).rejects.toThrow(/^Input validation error: Invalid arguments for tool add: a: /);
  });

  it('a tool without input gets its arguments as at the endpoint; a plain function gets its input as given', async () => {
    const tool = track(await runTaskTool(new GreetTools(), 'echo', { stray: 1 }));
    expect((await tool.finished).result?.structuredContent).toEqual({ received: { stray: 1 } });
    await expect(
      runTaskTool(new GreetTools(), 'echo', JSON.parse('{"__proto__": {}}') as object),
    ).rejects.toThrow(
      'Invalid arguments for tool echo: __proto__: property __proto__ is not allowed',
    );
    const fn = track(await runTaskTool(async (input: unknown) => ({ received: input }), [1, 'a']));
    expect((await fn.finished).result?.structuredContent).toEqual({ received: [1, 'a'] });
  });

  it('an answer the task refuses rejects finished, saying so', async () => {
    const run = track(
      await runTaskTool(
        new GreetTools(),
        'greet',
        {},
        {
          answers: { name: { action: 'maybe' } as unknown as InputResponse },
        },
      ),
    );
    await expect(run.finished).rejects.toThrow(
      'runTaskTool: an answer from options.answers was refused: Invalid params: input response "name" needs action "accept", "decline" or "cancel"',
    );
    expect((await run.current()).status).toBe('input_required');
  });

  it('leaves no watcher behind once the method ended', async () => {
    const run = await runTaskTool(new GreetTools(), 'greet');
    await run.waitFor('input_required');
    // Waiting for the answer (requireInput) and for a cancel (the runner) watch the task now.
    expect(waitersOf(run).watchedTasks).toBe(1);
    await run.answer({ name: accept('Ada') });
    await run.finished;
    await run.returned;
    await new Promise((resolve) => setImmediate(resolve));
    expect(waitersOf(run).watchedTasks).toBe(0);
  });
});
