/**
 * Runs a `@TaskTool` method (or a plain `(input, task) => ...` function) in a unit test, without
 * Nest or HTTP, through the production path: the tool's schema validates the input as the
 * endpoint does, TaskToolRunner starts the call on a TasksService over an InMemoryTaskStore, and
 * answers and cancels go through the caller side of TasksService (what `tasks/update` and
 * `tasks/cancel` call).
 */
import type { TaskNotifier } from '../notify/task-notifier.js';
import { InMemoryTaskStore } from '../store/in-memory.task-store.js';
import type { TaskStore } from '../store/task-store.js';
import {
  type CancellationMode,
  type InputRequest,
  type InputResponse,
  isTerminal,
  type TaskOwner,
  type TaskRecord,
  type TaskState,
} from '../task.js';
import { messageOf } from '../errors.js';
import { WaiterFeed } from '../notify/waiter-feed.js';
import { resolveTasksConfig } from '../tasks.config.js';
import { TasksService } from '../tasks.service.js';
import type { TaskContext } from '../tools/task-context.js';
import type { TaskToolOptions } from '../tools/task-tool.decorator.js';
import { type TaskToolDefinition, TaskToolRegistry } from '../tools/task-tool.registry.js';
import { TaskToolRunner } from '../tools/task-tool.runner.js';
import { waitForTask } from '../tools/task-watch.js';
import {
  decoratedTool,
  functionTool,
  type ToolFunction,
  validated,
  withOverrides,
} from './run-task-tool.definition.js';

/** Answers input requests: by key, or a function called with each request (`undefined`: not now). */
export type TaskToolAnswers =
  | Readonly<Record<string, InputResponse>>
  | ((
      request: InputRequest,
      key: string,
    ) => InputResponse | undefined | Promise<InputResponse | undefined>);

export interface RunTaskToolOptions {
  /**
   * Answers to the tool's input requests, given as soon as the task asks (through
   * `TasksService.update`, as `tasks/update` would). A request with no answer here leaves the
   * task `input_required` until the test calls `run.answer(...)`.
   */
  answers?: TaskToolAnswers;
  /** The caller who owns the task. Default `{ principal: 'test-user', tenant: null }`. */
  owner?: TaskOwner;
  /** The module's cancellation mode. Default `'immediate'`. */
  cancellation?: CancellationMode;
  /** TTL of the task (default: the tool's, else 1 h; `null` = unlimited). */
  ttlMs?: number | null;
  /** The poll interval the task suggests (default: the tool's). */
  pollIntervalMs?: number;
  /** The first status message (default: the tool's). */
  statusMessage?: string;
  /**
   * How long `finished` and `waitFor` wait before they reject, naming the status the task is
   * stuck in and the input keys nobody answered. Default 10,000 ms; `null` waits as long as the
   * test runner lets it.
   */
  timeoutMs?: number | null;
  /** The store to run on. Default: a new InMemoryTaskStore. */
  store?: TaskStore;
}

/** Options of a plain function tool: those of a run, plus the tool's own. */
export interface RunTaskFunctionOptions extends RunTaskToolOptions {
  /** The tool's name (messages only). Default: the function's name. */
  name?: string;
  /**
   * The input schema (a class-validator DTO class or a Standard Schema with JSON Schema): the
   * input is validated and transformed as the endpoint would. Without it the function gets the
   * input as given.
   */
  input?: TaskToolOptions['input'];
}

/** One visible change of the task, in the order they happened. */
export interface TaskToolStatus {
  readonly status: TaskState;
  readonly statusMessage?: string;
}

/** How the method's own call ended (its return value does not always decide the task). */
export type TaskToolMethodOutcome =
  | { readonly returned: true; readonly value: unknown }
  | { readonly returned: false; readonly error: unknown };

export interface TaskToolRun {
  /** The task's id. */
  readonly taskId: string;
  /** The owner the task was created for (and `answer`/`cancel` act as). */
  readonly owner: Required<TaskOwner>;
  /** The TaskContext the method received (its `signal` shows a cancel). */
  readonly context: TaskContext;
  /** The TasksService the tool runs on: drive a handed-off task as a worker would. */
  readonly tasks: TasksService;
  /** Every visible change of the task so far, starting with its creation (a fresh array per read). */
  readonly statuses: readonly TaskToolStatus[];
  /** Every record written that a client could see, starting with the created one. */
  readonly records: readonly TaskRecord[];
  /**
   * The task once finished (`completed` with `result`, `failed` with `error`, or `cancelled`).
   * Rejects after `timeoutMs` when the task has not finished, saying why (for example input
   * nobody answered), or when an answer from `answers` was refused.
   */
  readonly finished: Promise<TaskRecord>;
  /** How the method's call ended: its return value or what it threw. */
  readonly returned: Promise<TaskToolMethodOutcome>;
  /** The task now. */
  current(): Promise<TaskRecord>;
  /** The first state (now or later) that matches: a status, or a predicate. Same timeout. */
  waitFor(until: TaskState | ((task: TaskRecord) => boolean)): Promise<TaskRecord>;
  /** Answers input requests as `tasks/update` from the owner would. */
  answer(responses: Record<string, InputResponse>): Promise<TaskRecord>;
  /** Cancels the task as `tasks/cancel` from the owner would. */
  cancel(): Promise<TaskRecord>;
  /**
   * Stops what still runs: a running method's task fails (-32603, as at shutdown), its signal
   * fires, and waiting ends. Only needed for a method that never finishes by itself.
   */
  dispose(): Promise<void>;
}

export { TaskToolInputError } from './run-task-tool.definition.js';

const DEFAULT_OWNER: TaskOwner = { principal: 'test-user', tenant: null };
const DEFAULT_TIMEOUT_MS = 10_000;
/** How long `dispose` waits for a method that ignores its signal. */
const DISPOSE_WAIT_MS = 1_000;

/**
 * Runs a `@TaskTool` method of `instance` (`method` is the method's name or the tool's name) with
 * `input`, and resolves once the task is stored and the method started. The input goes through
 * the tool's schema as at the endpoint (a tool without `input` receives it as given, once checked
 * as every input is); when it fails, this rejects with TaskToolInputError and the method does
 * not run.
 *
 * ```ts
 * const run = await runTaskTool(new GreetTools(), 'greet', {}, {
 *   answers: { name: { action: 'accept', content: { name: 'Ada' } } },
 * });
 * const task = await run.finished; // status 'completed', task.result
 * ```
 */
export function runTaskTool(
  instance: object,
  method: string,
  input?: unknown,
  options?: RunTaskToolOptions,
): Promise<TaskToolRun>;
/** Runs a plain function as a task tool: `(input, task) => result`. */
export function runTaskTool<I>(
  tool: (input: I, task: TaskContext) => unknown,
  input?: I,
  options?: RunTaskFunctionOptions,
): Promise<TaskToolRun>;
export async function runTaskTool(target: object, ...rest: unknown[]): Promise<TaskToolRun> {
  let definition: TaskToolDefinition;
  let input: unknown;
  let options: RunTaskFunctionOptions;
  if (typeof target === 'function') {
    [input, options = {}] = rest as [unknown, RunTaskFunctionOptions?];
    definition = await functionTool(target as ToolFunction, options.name, options.input);
  } else {
    const [method, given, runOptions = {}] = rest as [string, unknown, RunTaskToolOptions?];
    [input, options] = [given, runOptions];
    definition = await decoratedTool(target, method);
  }
  definition = withOverrides(definition, options);
  // A plain function without a schema takes its input as given; a tool with a schema, or any
  // @TaskTool method (one without `input` takes the arguments as sent, once checked as the
  // endpoint checks every input), gets what the endpoint would pass it.
  const unchecked = typeof target === 'function' && options.input === undefined;
  const value = unchecked ? (input ?? {}) : await validated(definition, input);
  return await start(definition, value, options);
}

// ---------------------------------------------------------------------------------------------
// The run
// ---------------------------------------------------------------------------------------------

class Recorder implements TaskNotifier {
  readonly records: TaskRecord[] = [];
  onRecord: (record: TaskRecord) => void = () => undefined;
  notify(record: TaskRecord): void {
    this.records.push(record);
    this.onRecord(record);
  }
}

async function start(
  tool: TaskToolDefinition,
  input: unknown,
  options: RunTaskToolOptions,
): Promise<TaskToolRun> {
  const config = resolveTasksConfig({
    ...(options.cancellation !== undefined && { cancellation: options.cancellation }),
    maxRows: null,
    janitor: false,
  });
  const recorder = new Recorder();
  const store = options.store ?? new InMemoryTaskStore();
  const waiters = new WaiterFeed();
  const tasks = new TasksService(store, recorder, config, waiters);
  // A queue-run tool's method runs here, in the test's process, as its worker would run it.
  const runner = new TaskToolRunner(tasks, waiters, config, new TaskToolRegistry(), null);
  const owner = options.owner ?? DEFAULT_OWNER;
  const timeoutMs = options.timeoutMs === undefined ? DEFAULT_TIMEOUT_MS : options.timeoutMs;
  const pollMs = tasks.rereadMs(tool.options.pollIntervalMs);

  // What the method received and how its call ended.
  let context: TaskContext | undefined;
  let settle!: (outcome: TaskToolMethodOutcome) => void;
  const returned = new Promise<TaskToolMethodOutcome>((resolve) => (settle = resolve));
  const { queue: _queue, ...inProcess } = tool.options;
  const traced: TaskToolDefinition = {
    ...tool,
    options: inProcess,
    invoke: (value, given, request) => {
      context = given as TaskContext;
      let result: unknown;
      try {
        result = tool.invoke(value, given, request);
      } catch (error) {
        settle({ returned: false, error });
        throw error;
      }
      Promise.resolve(result).then(
        (resolved) => settle({ returned: true, value: resolved }),
        (error: unknown) => settle({ returned: false, error }),
      );
      return result;
    },
  };

  // Automatic answers, given once per key, through the caller side.
  const stops = new AbortController();
  const answered = new Set<string>();
  let answerFailure: Error | undefined;
  let failAnswers: (error: Error) => void = () => undefined;
  const answersFailed = new Promise<never>((_, reject) => (failAnswers = reject));
  answersFailed.catch(() => undefined);
  const answerFor = options.answers;
  let taskId = '';
  const autoAnswer = async (record: TaskRecord): Promise<void> => {
    if (answerFor === undefined || record.status !== 'input_required') return;
    const responses: Record<string, InputResponse> = {};
    for (const [key, request] of Object.entries(record.inputRequests ?? {})) {
      if (answered.has(key)) continue;
      answered.add(key); // before any await: a later record must not ask for the same key again
      const response =
        typeof answerFor === 'function'
          ? await answerFor(request, key)
          : Object.hasOwn(answerFor, key)
            ? answerFor[key]
            : undefined;
      if (response === undefined) answered.delete(key);
      else responses[key] = response;
    }
    if (Object.keys(responses).length === 0) return;
    await tasks.update(taskId, owner, responses);
  };
  recorder.onRecord = (record) => {
    if (taskId === '' || record.status !== 'input_required') return;
    autoAnswer(record).catch((error: unknown) => {
      if (answerFailure !== undefined) return;
      answerFailure = new Error(
        `runTaskTool: an answer from options.answers was refused: ${messageOf(error)}`,
        { cause: error },
      );
      failAnswers(answerFailure);
    });
  };

  const created = await runner.start(traced, input, owner);
  taskId = created.taskId;
  if (context === undefined) throw new Error('runTaskTool: the tool did not start');
  // A request may have been written before the task id was known here.
  const latest = recorder.records.at(-1);
  if (latest !== undefined) recorder.onRecord(latest);

  const wait = (until: (task: TaskRecord) => boolean, what: string): Promise<TaskRecord> => {
    // Each wait stops watching the task when it ends, however it ends (or when the run is disposed).
    const own = new AbortController();
    const onDispose = (): void => own.abort(stops.signal.reason);
    if (stops.signal.aborted) onDispose();
    else stops.signal.addEventListener('abort', onDispose, { once: true });
    const waiting = waitForTask(tasks, waiters, taskId, until, { pollMs, signal: own.signal });
    waiting.catch(() => undefined);
    const racers: Promise<TaskRecord>[] = [waiting, answersFailed];
    let timer: ReturnType<typeof setTimeout> | undefined;
    if (timeoutMs !== null) {
      racers.push(
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => {
            stuck(tasks, taskId, what, timeoutMs).then(reject, reject);
          }, timeoutMs);
          timer.unref?.();
        }),
      );
    }
    return Promise.race(racers).finally(() => {
      clearTimeout(timer);
      stops.signal.removeEventListener('abort', onDispose);
      own.abort(new Error('runTaskTool: the wait ended'));
    });
  };

  const finished = wait((task) => isTerminal(task.status), 'to finish');
  finished.catch(() => undefined);
  const ownerRecord = created.owner;
  const methodContext = context;

  return {
    taskId,
    owner: ownerRecord,
    context: methodContext,
    tasks,
    get statuses() {
      return recorder.records.map(toStatus);
    },
    records: recorder.records,
    finished,
    returned,
    current: () => tasks.get(taskId, owner),
    waitFor: (until) =>
      typeof until === 'function'
        ? wait(until, 'to reach the state waited for')
        : wait((task) => task.status === until, `to be ${until}`),
    answer: (responses) => tasks.update(taskId, owner, responses),
    cancel: () => tasks.cancel(taskId, owner),
    dispose: async () => {
      const shutdown = runner.beforeApplicationShutdown();
      let timer: ReturnType<typeof setTimeout> | undefined;
      await Promise.race([
        shutdown,
        new Promise<void>((resolve) => {
          timer = setTimeout(resolve, DISPOSE_WAIT_MS);
          timer.unref?.();
        }),
      ]).finally(() => clearTimeout(timer));
      stops.abort(new Error('runTaskTool: the run was disposed'));
    },
  };
}

/** The error of a wait that timed out, saying where the task is stuck. */
async function stuck(
  tasks: TasksService,
  taskId: string,
  what: string,
  timeoutMs: number,
): Promise<Error> {
  let where: string;
  try {
    const task = await tasks.status(taskId);
    where = `it is ${task.status}`;
    if (task.statusMessage !== undefined) where += ` (${JSON.stringify(task.statusMessage)})`;
    const keys = Object.keys(task.inputRequests ?? {});
    if (task.status === 'input_required' && keys.length > 0) {
      where += `, waiting for answers to ${keys.map((key) => JSON.stringify(key)).join(', ')}: give them in options.answers or call run.answer({...})`;
    }
  } catch (error) {
    where = `it cannot be read: ${messageOf(error)}`;
  }
  return new Error(
    `runTaskTool: the task did not come ${what} within ${timeoutMs} ms; ${where} (options.timeoutMs sets the wait)`,
  );
}

function toStatus(record: TaskRecord): TaskToolStatus {
  return record.statusMessage === undefined
    ? { status: record.status }
    : { status: record.status, statusMessage: record.statusMessage };
}
