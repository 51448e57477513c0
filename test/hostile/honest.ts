import type { Agent } from 'node:http';
import type { SseReader } from '../support/sse.js';
import type { JsonRpcMessage } from '../support/wire.js';
import { agent, type Answer, NoAnswerError, Wire } from './http.js';

/**
 * The honest principals of the hostile-tenant suite (`alice`, `bob`): while `mallory` attacks,
 * each runs rounds of what a real client does, over both protocol eras, and checks every answer.
 * One round:
 *
 * 1. `tools/call greet` (2026-07-28) and `tasks/get` until it asks for a name;
 * 2. `subscriptions/listen` on the task (acknowledged with the task as the filter);
 * 3. `tasks/update` with the name, `tasks/get` until `completed` with "Hello, <name>!", and the
 *    stream tells the completion;
 * 4. `tools/call add_slowly` with `task.ttl` (2025-11-25), then `tasks/result`: the sum;
 * 5. `tools/call wait_for_cancel`, `tasks/cancel`, `tasks/get`: `cancelled`.
 *
 * Anything else is a problem, noted with the principal, the step and what came back: an error, a
 * refusal, an HTTP status other than 200, a connection that failed, a request or a stream that got
 * no answer (after a bound far beyond any normal wait), a task in a state it should not be in. A
 * round stops at its first problem; the next one starts afresh.
 */

/** How many `tasks/get` a round makes at most while it waits for one state. */
const MAX_POLLS = 600;
const POLL_MS = 50;
/** How long a stream may stay silent before its notification counts as lost. */
const STREAM_BOUND_MS = 60_000;

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

class RoundFailed extends Error {}

/** What a result field holds, read off an answer known to be a result. */
type Result = Record<string, unknown>;

export class HonestClient {
  readonly wire: Wire;
  /** Every problem seen, in order. */
  readonly problems: string[] = [];
  /** Rounds completed without a problem. */
  rounds = 0;
  /** Requests answered as expected. */
  served = 0;
  private readonly streams: Agent;
  private readonly open = new Set<SseReader>();
  private running: Promise<void> | undefined;
  private stopping = false;
  private round = 0;

  constructor(
    url: string,
    readonly principal: string,
  ) {
    this.wire = new Wire(url, principal, agent(8));
    // Each stream holds its connection for as long as it is open; a pool of its own keeps them
    // from taking the sockets of the requests.
    this.streams = agent(8);
  }

  /** Starts the rounds (until `stop`). */
  start(): void {
    this.running ??= this.loop();
  }

  /** Ends the rounds once the one under way is over, and closes what is open. */
  async stop(): Promise<void> {
    this.stopping = true;
    await this.running;
    this.running = undefined;
    this.stopping = false;
    for (const stream of this.open) await stream.close();
    this.open.clear();
  }

  /** Waits until `count` more rounds are done (rounds with a problem count too: they are done). */
  async more(count: number): Promise<void> {
    const target = this.round + count;
    while (this.round < target) {
      if (this.running === undefined) throw new Error(`${this.principal} is not running`);
      await sleep(POLL_MS);
    }
  }

  destroy(): void {
    this.wire.agent.destroy();
    this.streams.destroy();
  }

  private async loop(): Promise<void> {
    while (!this.stopping) {
      try {
        await this.oneRound(this.round);
        this.rounds++;
      } catch (error) {
        if (!(error instanceof RoundFailed)) this.problems.push(`${this.principal}: ${error}`);
      } finally {
        this.round++;
      }
    }
  }

  private fail(step: string, detail: string): never {
    this.problems.push(`${this.principal} round ${this.round}, ${step}: ${detail}`);
    throw new RoundFailed(step);
  }

  /** The result of an answer that must be a JSON-RPC result on HTTP 200. */
  private async result(step: string, sent: Promise<Answer>): Promise<Result> {
    let answer: Answer;
    try {
      answer = await sent;
    } catch (error) {
      if (error instanceof NoAnswerError) this.fail(step, error.message);
      throw error;
    }
    const message = answer.json;
    if (answer.status !== 200 || message?.result === undefined) {
      this.fail(step, `HTTP ${answer.status} ${answer.text.slice(0, 300)}`);
    }
    this.served++;
    return message.result as Result;
  }

  /** `tasks/get` (2026-07-28) until the task is in `state`; fails on a state past it. */
  private async until(
    taskId: string,
    state: string,
    passing: readonly string[],
    step: string,
  ): Promise<Result> {
    for (let poll = 0; poll < MAX_POLLS; poll++) {
      const task = await this.result(step, this.wire.modern('tasks/get', { taskId }));
      if (task.taskId !== taskId || task.resultType !== 'complete') {
        this.fail(step, `not the task: ${JSON.stringify(task).slice(0, 300)}`);
      }
      if (task.status === state) return task;
      if (!passing.includes(task.status as string)) {
        this.fail(step, `status ${String(task.status)} ${JSON.stringify(task).slice(0, 300)}`);
      }
      await sleep(POLL_MS);
    }
    this.fail(step, `still not ${state} after ${MAX_POLLS} polls`);
  }

  /** An accepted stream for the task: its acknowledgement names the task. */
  private async stream(taskId: string, step: string): Promise<SseReader> {
    let response;
    try {
      response = await this.wire.listen([taskId], this.streams);
    } catch (error) {
      if (error instanceof NoAnswerError) this.fail(step, error.message);
      throw error;
    }
    if (response.stream === undefined) {
      this.fail(step, `HTTP ${response.status} ${String(response.text).slice(0, 300)}`);
    }
    const stream = response.stream;
    this.open.add(stream);
    let ack: JsonRpcMessage;
    try {
      ack = await stream.next(STREAM_BOUND_MS);
    } catch (error) {
      this.fail(step, `no acknowledgement: ${String(error).slice(0, 300)}`);
    }
    const honoured = (ack.params?.notifications as { taskIds?: unknown } | undefined)?.taskIds;
    if (
      ack.method !== 'notifications/subscriptions/acknowledged' ||
      JSON.stringify(honoured) !== JSON.stringify([taskId])
    ) {
      this.fail(step, `acknowledgement ${JSON.stringify(ack).slice(0, 300)}`);
    }
    this.served++;
    return stream;
  }

  private async closeStream(stream: SseReader): Promise<void> {
    this.open.delete(stream);
    await stream.close();
  }

  private async oneRound(round: number): Promise<void> {
    const { wire } = this;
    const name = `${this.principal}-${round}`;

    // 1-3: greet, answered through tasks/update, followed by polling and by a stream.
    const created = await this.result(
      'greet tools/call',
      wire.modern('tools/call', { name: 'greet', arguments: {} }),
    );
    if (created.resultType !== 'task' || typeof created.taskId !== 'string') {
      this.fail('greet tools/call', `not a task: ${JSON.stringify(created).slice(0, 300)}`);
    }
    const greetId = created.taskId;
    const asking = await this.until(greetId, 'input_required', ['working'], 'greet asks');
    if (!(asking.inputRequests as Record<string, unknown> | undefined)?.name) {
      this.fail('greet asks', `no name request: ${JSON.stringify(asking).slice(0, 300)}`);
    }
    const stream = await this.stream(greetId, 'greet listen');
    const updated = await this.result(
      'greet tasks/update',
      wire.modern('tasks/update', {
        taskId: greetId,
        inputResponses: { name: { action: 'accept', content: { name } } },
      }),
    );
    if (updated.resultType !== 'complete') {
      this.fail('greet tasks/update', JSON.stringify(updated).slice(0, 300));
    }
    const done = await this.until(
      greetId,
      'completed',
      ['input_required', 'working'],
      'greet completes',
    );
    const greeting = JSON.stringify((done.result as { content?: unknown } | undefined)?.content);
    if (greeting !== JSON.stringify([{ type: 'text', text: `Hello, ${name}!` }])) {
      this.fail('greet completes', `result ${greeting}`);
    }
    try {
      await stream.waitForFrame(
        (frame) =>
          frame.message?.method === 'notifications/tasks' &&
          frame.message.params?.taskId === greetId &&
          frame.message.params?.status === 'completed',
        STREAM_BOUND_MS,
      );
    } catch (error) {
      this.fail('greet notification', String(error).slice(0, 300));
    }
    this.served++;
    await this.closeStream(stream);

    // 4: a 2025-11-25 task, its result waited for.
    const a = round % 1000;
    const legacy = await this.result(
      '2025 tools/call',
      wire.legacy('tools/call', {
        name: 'add_slowly',
        arguments: { a, b: 1, delayMs: 20 },
        task: { ttl: 60_000 },
      }),
    );
    const task = legacy.task as Result | undefined;
    if (typeof task?.taskId !== 'string' || task.ttl !== 60_000) {
      this.fail('2025 tools/call', `not the task: ${JSON.stringify(legacy).slice(0, 300)}`);
    }
    const sum = await this.result(
      '2025 tasks/result',
      wire.legacy('tasks/result', { taskId: task.taskId }),
    );
    if ((sum.structuredContent as { sum?: unknown } | undefined)?.sum !== a + 1) {
      this.fail('2025 tasks/result', JSON.stringify(sum).slice(0, 300));
    }

    // 5: a task cancelled.
    const waiting = await this.result(
      'wait_for_cancel tools/call',
      wire.modern('tools/call', { name: 'wait_for_cancel', arguments: {} }),
    );
    if (typeof waiting.taskId !== 'string') {
      this.fail('wait_for_cancel tools/call', JSON.stringify(waiting).slice(0, 300));
    }
    await this.result(
      'tasks/cancel',
      wire.modern('tasks/cancel', { taskId: waiting.taskId as string }),
    );
    await this.until(waiting.taskId, 'cancelled', [], 'cancelled');
  }
}

/** The two honest principals, started together. */
export class Honest {
  readonly clients: HonestClient[];

  constructor(url: string, principals: readonly string[] = ['alice', 'bob']) {
    this.clients = principals.map((principal) => new HonestClient(url, principal));
  }

  get problems(): string[] {
    return this.clients.flatMap((client) => client.problems);
  }

  /** Starts every client and waits for one round of each (the server serves them before). */
  async start(): Promise<void> {
    for (const client of this.clients) client.start();
    await this.more(1);
  }

  /** Waits until every client has done `count` more rounds. */
  async more(count: number): Promise<void> {
    await Promise.all(this.clients.map((client) => client.more(count)));
  }

  /** Rounds completed without a problem, by principal. */
  rounds(): Record<string, number> {
    return Object.fromEntries(this.clients.map((client) => [client.principal, client.rounds]));
  }

  async stop(): Promise<void> {
    await Promise.all(this.clients.map((client) => client.stop()));
  }

  destroy(): void {
    for (const client of this.clients) client.destroy();
  }
}
