import { InvalidTaskParamsError, TaskTerminalError } from '../errors.js';
import {
  type InputRequest,
  type InputResponse,
  isAnswered,
  isTerminal,
  type TaskOwner,
} from '../task.js';
import type { TasksService } from '../tasks.service.js';
import type { WaiterFeed } from '../notify/waiter-feed.js';
import { waitForTask } from './task-watch.js';

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
  /** Sets the task's status message; `null` clears it. */
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

/** The TaskContext of one running tool call. */
/** The answers of a tool that asked for none first: one frozen object for every call. */
const NO_ANSWERS: Readonly<Record<string, InputResponse>> = Object.freeze({});

export class RunningTaskContext implements TaskContext {
  private handedOff = false;
  firstInput: Readonly<Record<string, InputResponse>> = NO_ANSWERS;
  /** Answers taken from the task but not yet handed to the requireInput call that asked. */
  private received: Map<string, InputResponse> | undefined;

  constructor(
    private readonly tasks: TasksService,
    private readonly waiters: WaiterFeed,
    readonly taskId: string,
    readonly owner: Required<TaskOwner>,
    /** Where the signal comes from: made when first read (see RunningCall). */
    private readonly call: { readonly signal: AbortSignal },
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
    this.handedOff = true;
  }

  async progress(message: string | null): Promise<void> {
    await this.tasks.progress(this.taskId, message);
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
    const keys = Object.keys(requests) as K[];
    await this.tasks.requireInput(this.taskId, requests, options);
    const answered = await waitForTask(
      this.tasks,
      this.waiters,
      this.taskId,
      (record) => isTerminal(record.status) || isAnswered(record, keys),
      { pollMs: this.pollMs, signal: this.signal },
    );
    if (isTerminal(answered.status)) throw new TaskTerminalError(answered.status);
    const taken = await this.tasks.takeInputResponses(this.taskId);
    const received = (this.received ??= new Map());
    for (const [key, response] of Object.entries(taken)) received.set(key, response);
    const answers = {} as Record<K, InputResponse>;
    for (const key of keys) {
      const response = received.get(key);
      if (response === undefined) continue;
      received.delete(key);
      Object.defineProperty(answers, key, { value: response, enumerable: true, writable: true });
    }
    return answers;
  }
}
