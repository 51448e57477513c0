import { InvalidTaskParamsError, TasksConfigError, TaskTerminalError } from '../errors.js';
import {
  expiresAt,
  type InputRequest,
  type InputResponse,
  isAnswered,
  isTerminal,
  type TaskOwner,
  type TaskRecord,
  type TaskStepEntry,
  validateProgressMessage,
} from '../task.js';
import type { TasksService } from '../tasks.service.js';
import { isStoreUnavailable } from '../tasks.writer.js';
import type { WaiterFeed } from '../notify/waiter-feed.js';
import { waitForTask } from './task-watch.js';
import { backoff, type CallOutage, jittered, OUTAGE_RETRY_FIRST_MS } from './store-outage.js';
import {
  attempt,
  checkSleepMs,
  checkStepName,
  pauseUntil,
  copyOf,
  jsonOf,
  stepIdempotencyKey,
  stepOptions,
  type TaskStepAttempt,
  type TaskStepOptions,
} from './task-steps.js';

/**
 * What a method is stopped with when its task parks (a long `sleep`, an input request of a
 * durable call or of a queue job, see docs/durable-steps.md): the call leaves memory, and the
 * task wakes on an instance (or a worker) when the sleep ends or the answers come; the method runs
 * again, its steps and the sleep's end journaled. A method that catches it should rethrow it.
 */
export class TaskParked extends Error {
  constructor() {
    super('The call parked: its task wakes when its sleep ends or its answers come');
    this.name = 'TaskParked';
  }
}

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
  /**
   * Runs `run` once for this task, and records what it returned in the task's journal: a later
   * run of the method for the same task (a queue job run again after its worker died) gets the
   * recorded value back without calling `run`. Put each side effect (a charge, an email, a model
   * call) in a step: the code between steps runs again on a later run. Names are unique per task
   * (one reached twice in one run fails the call). The value is what JSON keeps of the result, the
   * same on every run. `run` is retried as `options` say; once the retries are spent the step
   * rejects with TaskStepError (the task then fails with -32603 naming the step). A JSON-RPC error
   * `run` throws is the tool's own answer: it is not retried. See docs/durable-steps.md.
   */
  step<T>(
    name: string,
    run: (attempt: TaskStepAttempt) => T | Promise<T>,
    options?: TaskStepOptions,
  ): Promise<Awaited<T>>;
  /**
   * A key for a call to an outside service made by step `name`: the same on every run of the
   * method, on every instance; different for every task and step (43 characters of base64url).
   */
  idempotencyKey(name: string): string;
  /**
   * Waits `ms` (an integer from 0 to 30 days), as a step named `name`: its end is journaled when
   * the sleep starts, so a later run of the method (a resumed durable call, a queue job run
   * again) waits only what is left, and not at all once it has passed. Rejects when the task is
   * cancelled. Names share the steps' (unique per task).
   */
  sleep(name: string, ms: number): Promise<void>;
}

/** The answers of a tool that asked for none first: one frozen object for every call. */
export const NO_ANSWERS: Readonly<Record<string, InputResponse>> = Object.freeze({});

/** What a context needs of its running call (see RunningCall in running-call.ts). */
export interface ContextCall {
  /** Made when first read. */
  readonly signal: AbortSignal;
  /** The newest state of the task the call has seen (its journal of steps included). */
  readonly latest?: TaskRecord;
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
  /** Set once the call has parked its task (see `parks`). */
  protected parked = false;
  /**
   * The steps of this run (made at the first): the names reached, and the journaled names not
   * reached yet while the run replays ground an earlier run covered (its status messages are
   * not written again).
   */
  private steps: { reached: Set<string>; replaying: Set<string> } | undefined;

  constructor(
    protected readonly tasks: TasksService,
    private readonly waiters: WaiterFeed,
    readonly taskId: string,
    readonly owner: Required<TaskOwner>,
    protected readonly call: ContextCall,
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
    // Ground an earlier run covered: its messages were written then.
    if (this.replaying()) {
      validateProgressMessage(message);
      return;
    }
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

  async step<T>(
    name: string,
    run: (attempt: TaskStepAttempt) => T | Promise<T>,
    options?: TaskStepOptions,
  ): Promise<Awaited<T>> {
    checkStepName(name);
    const checked = stepOptions(name, options);
    let made: TaskStepEntry | undefined;
    const entry = await this.journaled(name, async () => {
      const value = jsonOf(
        name,
        await attempt(name, run, checked, this.call.signal, this.call.latest?.toolName),
      );
      return (made = value === undefined ? {} : { value });
    });
    // The value this run made is its own; one journaled (by an earlier run, or by another run that
    // recorded it first) is copied: the record's own is shared.
    return (entry === made ? made.value : copyOf(entry.value)) as Awaited<T>;
  }

  idempotencyKey(name: string): string {
    return stepIdempotencyKey(this.taskId, checkStepName(name));
  }

  async sleep(name: string, ms: number): Promise<void> {
    checkStepName(name);
    checkSleepMs(name, ms);
    const { until } = await this.journaled(name, async () => ({ until: Date.now() + ms }));
    if (until === undefined) {
      throw new TasksConfigError(
        `Step ${JSON.stringify(name)} was a step, not a sleep, in an earlier run`,
      );
    }
    // A long sleep of a call that can park leaves memory: the task wakes at its end.
    if (await this.parks(until)) throw new TaskParked();
    await pauseUntil(until, this.call.signal);
  }

  /**
   * The journal's entry of the step (or sleep) `name`, reached by this run: the one an earlier run
   * recorded, else `make()`'s, recorded now in one write (or the entry of another run that recorded
   * it first). One reached twice in one run is the tool's bug.
   */
  private async journaled(
    name: string,
    make: () => Promise<TaskStepEntry>,
  ): Promise<TaskStepEntry> {
    const steps = this.reach(name);
    const recorded = this.call.latest?.steps;
    if (recorded !== undefined && Object.hasOwn(recorded, name)) {
      steps.replaying.delete(name);
      return recorded[name]!;
    }
    // A step that runs: whatever an earlier run reached beyond it is not replayed ground.
    steps.replaying.clear();
    const entry = await make();
    const written = await this.write(() =>
      this.tasks.recordStep(this.taskId, name, entry, { known: this.call.latest }),
    );
    this.call.saw?.(written);
    return written.steps?.[name] ?? entry;
  }

  /** Whether the call has parked (see `parks`): its outcome, whatever it is, is dropped. */
  get isParked(): boolean {
    return this.parked;
  }

  /**
   * Parks the call's task until `until` when the call can (a durable call or a queue job whose
   * worker parks, for a sleep long enough): true once it has, and the method is to leave.
   */
  protected async parks(_until: number): Promise<boolean> {
    return false;
  }

  /** Notes a step (or sleep) reached by this run; one reached twice is the tool's bug. */
  private reach(name: string): { reached: Set<string>; replaying: Set<string> } {
    const steps = this.journal();
    if (steps.reached.has(name)) {
      throw new TasksConfigError(
        `Step ${JSON.stringify(name)} was reached twice in one run: a step's name is unique per task`,
      );
    }
    steps.reached.add(name);
    return steps;
  }

  /**
   * Whether this run replays ground an earlier run covered: the journal had steps when the run
   * began, and the run has not reached them all (nor run a step of its own). Nothing is made for
   * a call whose task has no journal.
   */
  private replaying(): boolean {
    if (this.steps === undefined && this.call.latest?.steps === undefined) return false;
    return this.journal().replaying.size > 0;
  }

  /** This run's steps, made at the first step (or status message, see `replaying`). */
  private journal(): { reached: Set<string>; replaying: Set<string> } {
    return (this.steps ??= {
      reached: new Set(),
      replaying: new Set(Object.keys(this.call.latest?.steps ?? {})),
    });
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
    this.checkCanAsk();
    await this.write(() => this.tasks.requireInput(this.taskId, requests, options));
    return await this.answersTo(Object.keys(requests) as K[]);
  }

  /** A call that runs inline cannot ask: its client has no `tasks/update` to answer with. */
  protected checkCanAsk(): void {
    if (this.inline) {
      throw new InvalidTaskParamsError(
        'This tool needs input from the client, which requires the tasks extension',
      );
    }
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

/**
 * How a call parks its task: the method leaves memory (TaskParked), and the task's method runs
 * again from its journal when the sleep ends or the answers come. A durable in-process call parks
 * on a lease of the task's own (TasksService.park); a queue job goes back to its queue (JobPark).
 */
export interface TaskParking {
  /** The shortest sleep that parks. */
  readonly afterMs: number;
  /** The longest park for input (then the task wakes, and parks again if still unanswered). */
  readonly inputMs: number;
  /** Whether the task is held by this instance's lease (an in-process call, not a queue job). */
  readonly held: boolean;
  /**
   * Parks the task until `until`, or until the answers to `waitingFor` come: false when it did
   * not, for they are all answered already (the method then takes them).
   */
  park(until: number, waitingFor?: readonly string[]): Promise<boolean>;
}

/** Sets an own property whatever its name (`__proto__` included). */
function define(target: object, key: string, value: unknown): void {
  Object.defineProperty(target, key, { value, enumerable: true, writable: true });
}

/**
 * The TaskContext of a queue job's run (TaskToolRunner.runJob), or of a durable in-process call
 * (whose task keeps the answers instead of a job). The job keeps every answer the
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
    /**
     * How the call parks, when it can (see TaskParking): a durable in-process call, held by this
     * instance's lease, or a queue job whose worker parks jobs. None for another job (held by no
     * instance; its sleep and its input requests hold its worker's slot).
     */
    private readonly parking?: TaskParking,
    /** A queue job of a call that runs inline (see QueuedCall.inline). */
    inline = false,
  ) {
    super(tasks, waiters, taskId, owner, call, inline, pollMs);
    this.asked = new Set(asked);
    this.kept = { ...job.answers };
  }

  override async requireInput<K extends string>(
    requests: Record<K, InputRequest>,
    options: { statusMessage?: string } = {},
  ): Promise<Record<K, InputResponse>> {
    this.checkCanAsk();
    const keys = Object.keys(requests) as K[];
    const fresh = keys.filter((key) => !this.asked.has(key) && !Object.hasOwn(this.kept, key));
    if (fresh.length > 0) {
      const ask = {} as Record<string, InputRequest>;
      for (const key of fresh) define(ask, key, requests[key]);
      // Seen, so that a park for input knows the question is out (and not yet answered).
      this.call.saw?.(await this.write(() => this.tasks.requireInput(this.taskId, ask, options)));
    }
    const waiting = keys.filter((key) => !Object.hasOwn(this.kept, key));
    // A call that can park does not wait in memory: it parks until the answers come.
    if (waiting.length > 0 && (await this.parksForInput(waiting))) throw new TaskParked();
    const answers =
      waiting.length > 0 ? await this.answersTo(waiting) : ({} as Record<K, InputResponse>);
    for (const key of keys) {
      if (!Object.hasOwn(answers, key) && Object.hasOwn(this.kept, key)) {
        define(answers, key, this.kept[key]);
      }
    }
    return answers;
  }

  /**
   * Parks the task until the answers to `waiting` come (an answer's write wakes it, see
   * TasksService.update), or `parking.inputMs` has passed: true once it has. Not when they are
   * all answered already.
   */
  private async parksForInput(waiting: readonly string[]): Promise<boolean> {
    const parking = this.parking;
    if (parking === undefined) return false;
    return await this.park(parking, Date.now() + parking.inputMs, waiting);
  }

  protected override async parks(until: number): Promise<boolean> {
    const parking = this.parking;
    if (parking === undefined || until - Date.now() < parking.afterMs) return false;
    return await this.park(parking, until);
  }

  /**
   * Parks the task (see TaskParking.park): true once it has, and the method is to leave. No park
   * outlives its task: it ends at the task's expiry at the latest, when the task wakes, finds
   * itself gone, and its park (a durable call's lease, a queue job) is put away.
   */
  private async park(
    parking: TaskParking,
    until: number,
    waitingFor?: readonly string[],
  ): Promise<boolean> {
    const latest = this.call.latest;
    const expiry = latest === undefined ? null : expiresAt(latest);
    const end = expiry === null ? until : Math.min(until, expiry);
    if (!(await this.write(() => parking.park(end, waitingFor)))) return false;
    this.parked = true;
    return true;
  }

  /** A queue job's task is held by no instance (the queue runs the job again instead). */
  protected override release(): void {
    if (this.parking?.held === true) super.release();
  }

  protected override async took(taken: Readonly<Record<string, InputResponse>>): Promise<void> {
    if (Object.keys(taken).length === 0) return;
    for (const [key, response] of Object.entries(taken)) define(this.kept, key, response);
    await this.job.keepAnswers(this.kept);
  }
}
