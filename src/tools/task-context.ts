import { InvalidTaskParamsError, TaskTerminalError } from '../errors.js';
import {
  type InputRequest,
  type InputResponse,
  isAnswered,
  isTerminal,
  type TaskOwner,
  type TaskRecord,
  validateProgressMessage,
} from '../task.js';
import type { TasksService } from '../tasks.service.js';
import { isStoreUnavailable } from '../tasks.writer.js';
import type { WaiterFeed } from '../notify/waiter-feed.js';
import { waitForTask } from './task-watch.js';
import { backoff, type CallOutage, jittered, OUTAGE_RETRY_FIRST_MS } from './store-outage.js';

/** What a `@TaskTool` method receives beside its input. */
export interface TaskContext {
  /** The task id: the capability a worker needs to drive the task through TasksService. */
  readonly taskId: string;
  /** Who called the tool (the task's owner). */
  readonly owner: Required<TaskOwner>;
  /** Fired when the task is cancelled (or cancellation is requested, in cooperative mode). */
  readonly signal: AbortSignal;
  /** True when the call runs inline (the client did not declare the tasks extension). */
  readonly inline: boolean;
  /** The answers to the tool's `requireInputFirst` (empty when it asks none). */
  readonly firstInput: Readonly<Record<string, InputResponse>>;
  /**
   * Sets the task's status message; `null` clears it. While the task store is away (a restart, a
   * failover) it resolves at once: the latest message waits in memory and is written when the
   * store answers again (see the `storeOutageMs` option).
   */
  progress(message: string | null): Promise<void>;
  /**
   * Asks the client for input and resolves with the answers once `tasks/update` has delivered all
   * of them. Keys are unique over the task's life. Rejects when the task is cancelled.
   */
  requireInput<K extends string>(
    requests: Record<K, InputRequest>,
    options?: { statusMessage?: string },
  ): Promise<Record<K, InputResponse>>;
  /**
   * Hands the task to someone else (a queue job, another service): the method's return value no
   * longer completes the task; whoever holds the id drives it through TasksService.
   */
  handOff(): void;
}

/** The answers of a tool that asked for none first: one frozen object for every call. */
const NO_ANSWERS: Readonly<Record<string, InputResponse>> = Object.freeze({});

/** What a context needs of its running call (see RunningCall in running-call.ts). */
export interface ContextCall {
  /** Made when first read. */
  readonly signal: AbortSignal;
  /** The call's view of a store outage. */
  readonly outage: CallOutage;
  /** A state of the task this call wrote (see TaskWatch.saw). */
  saw?(record: TaskRecord): void;
}

/** The TaskContext of one running tool call. */
export class RunningTaskContext implements TaskContext {
  private handedOff = false;
  firstInput: Readonly<Record<string, InputResponse>> = NO_ANSWERS;
  /** Answers taken from the task but not yet handed to the requireInput call that asked. */
  private received: Map<string, InputResponse> | undefined;
  /** The status message that waits for the store to answer again, while it is away. */
  private deferred: { message: string | null } | undefined;
  /** Set when the call has ended: a deferred message is no longer written. */
  private closed = false;

  constructor(
    protected readonly tasks: TasksService,
    private readonly waiters: WaiterFeed,
    readonly taskId: string,
    readonly owner: Required<TaskOwner>,
    private readonly call: ContextCall,
    readonly inline: boolean,
    private readonly pollMs: number | null,
  ) {}

  get signal(): AbortSignal {
    return this.call.signal;
  }

  get isHandedOff(): boolean {
    return this.handedOff;
  }

  handOff(): void {
    if (this.handedOff) return;
    this.handedOff = true;
    this.release();
  }

  /** Whoever drives the task now may outlive this process: its lease no longer answers for it. */
  protected release(): void {
    this.tasks.releaseHeld(this.taskId).catch(() => undefined);
  }

  async progress(message: string | null): Promise<void> {
    if (this.deferred !== undefined) {
      // The store is away: the latest message waits for it (a bad one is refused all the same).
      validateProgressMessage(message);
      this.deferred.message = message;
      return;
    }
    try {
      const written = await this.tasks.progress(this.taskId, message);
      this.call.saw?.(written);
      this.call.outage.answered();
    } catch (error) {
      if (!isStoreUnavailable(error) || this.closed) throw error;
      this.deferred = { message };
      if (this.call.outage.failed()) void this.writeDeferred();
    }
  }

  /** Whether the call has ended (its method returned or threw). */
  get isClosed(): boolean {
    return this.closed;
  }

  /** The call has ended: its terminal write supersedes a deferred status message. */
  close(): void {
    this.closed = true;
  }

  /**
   * Writes the deferred status message with backoff until the store takes it (then the newest,
   * should another have come meanwhile), the call ends, or the call gives up on the store. A
   * message the task no longer takes (it finished meanwhile) is dropped.
   */
  private async writeDeferred(): Promise<void> {
    const outage = this.call.outage;
    for (let delay = OUTAGE_RETRY_FIRST_MS; ;) {
      await new Promise((resolve) => setTimeout(resolve, jittered(delay)).unref());
      const deferred = this.deferred;
      if (this.closed || deferred === undefined || outage.givenUp !== undefined) return;
      const message = deferred.message;
      try {
        const written = await this.tasks.progress(this.taskId, message);
        this.call.saw?.(written);
      } catch (error) {
        if (!isStoreUnavailable(error)) {
          this.deferred = undefined;
          return;
        }
        if (!outage.failed()) return;
        delay = backoff(delay);
        continue;
      }
      outage.answered();
      if (deferred.message === message) {
        this.deferred = undefined;
        return;
      }
      delay = 0;
    }
  }

  async requireInput<K extends string>(
    requests: Record<K, InputRequest>,
    options: { statusMessage?: string } = {},
  ): Promise<Record<K, InputResponse>> {
    if (this.inline) {
      throw new InvalidTaskParamsError(
        'This tool needs input from the client, which requires the tasks extension',
      );
    }
    await this.write(() => this.tasks.requireInput(this.taskId, requests, options));
    return await this.answersTo(Object.keys(requests) as K[]);
  }

  /** Waits until every one of `keys` is answered, then takes the answers from the task. */
  protected async answersTo<K extends string>(keys: K[]): Promise<Record<K, InputResponse>> {
    const answered = await waitForTask(
      this.tasks,
      this.waiters,
      this.taskId,
      (record) => isTerminal(record.status) || isAnswered(record, keys),
      { pollMs: this.pollMs, signal: this.signal },
    );
    if (isTerminal(answered.status)) throw new TaskTerminalError(answered.status);
    const taken = await this.write(() => this.tasks.takeInputResponses(this.taskId));
    await this.took(taken);
    const received = (this.received ??= new Map());
    for (const [key, response] of Object.entries(taken)) received.set(key, response);
    const answers = {} as Record<K, InputResponse>;
    for (const key of keys) {
      const response = received.get(key);
      if (response === undefined) continue;
      received.delete(key);
      define(answers, key, response);
    }
    return answers;
  }

  /**
   * A write the method waits for (an input request, taking answers): while the store is away it is
   * tried again with backoff, within the call's outage window; a deferred status message is
   * written first, so the task's messages keep their order.
   */
  protected async write<T>(write: () => Promise<T>): Promise<T> {
    const outage = this.call.outage;
    const deferred = this.deferred;
    if (deferred !== undefined) {
      await outage.retry(() => this.tasks.progress(this.taskId, deferred.message));
      if (this.deferred === deferred) this.deferred = undefined;
    }
    return await outage.retry(write);
  }

  /** Answers were taken from the task (a queue job keeps them for a later run). */
  protected async took(_taken: Readonly<Record<string, InputResponse>>): Promise<void> {}
}

/** Sets an own property whatever its name (`__proto__` included). */
function define(target: object, key: string, value: unknown): void {
  Object.defineProperty(target, key, { value, enumerable: true, writable: true });
}

/**
 * The TaskContext of a queue job's run (TaskToolRunner.runJob). The job keeps every answer the
 * method took, so a later run of the job (after a worker stopped) gets them back from
 * `requireInput` without asking again; a key an earlier run asked but did not see answered is
 * waited for, not asked twice.
 */
export class JobTaskContext extends RunningTaskContext {
  private readonly asked: ReadonlySet<string>;
  private kept: Record<string, InputResponse>;

  constructor(
    tasks: TasksService,
    waiters: WaiterFeed,
    taskId: string,
    owner: Required<TaskOwner>,
    call: ContextCall,
    pollMs: number | null,
    asked: readonly string[],
    private readonly job: {
      readonly answers: Readonly<Record<string, InputResponse>>;
      keepAnswers(answers: Readonly<Record<string, InputResponse>>): Promise<void>;
    },
  ) {
    super(tasks, waiters, taskId, owner, call, false, pollMs);
    this.asked = new Set(asked);
    this.kept = { ...job.answers };
  }

  override async requireInput<K extends string>(
    requests: Record<K, InputRequest>,
    options: { statusMessage?: string } = {},
  ): Promise<Record<K, InputResponse>> {
    const keys = Object.keys(requests) as K[];
    const fresh = keys.filter((key) => !this.asked.has(key) && !Object.hasOwn(this.kept, key));
    if (fresh.length > 0) {
      const ask = {} as Record<string, InputRequest>;
      for (const key of fresh) define(ask, key, requests[key]);
      await this.write(() => this.tasks.requireInput(this.taskId, ask, options));
    }
    const waiting = keys.filter((key) => !Object.hasOwn(this.kept, key));
    const answers =
      waiting.length > 0 ? await this.answersTo(waiting) : ({} as Record<K, InputResponse>);
    for (const key of keys) {
      if (!Object.hasOwn(answers, key) && Object.hasOwn(this.kept, key)) {
        define(answers, key, this.kept[key]);
      }
    }
    return answers;
  }

  /** A queue job's task is held by no instance (the queue runs the job again instead). */
  protected override release(): void {}

  protected override async took(taken: Readonly<Record<string, InputResponse>>): Promise<void> {
    if (Object.keys(taken).length === 0) return;
    for (const [key, response] of Object.entries(taken)) define(this.kept, key, response);
    await this.job.keepAnswers(this.kept);
  }
}
