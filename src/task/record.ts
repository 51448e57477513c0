/**
 * The stored task record and the wire types, with what can be read off a record: terminal or not,
 * whose, when it expires, how long it is kept once finished, what it still waits for.
 */
import type { CallToolResult, InputRequest, InputResponse } from '@modelcontextprotocol/server';
import type { JsonRpcErrorObject } from '../errors.js';

export type { CallToolResult, InputRequest, InputResponse };

/**
 * The value of a task's `status`. Named apart from the SDK's `TaskStatus` (the deprecated
 * 2025-11-25 vocabulary it keeps for interoperability), so an app can import both.
 */
export type TaskState = 'working' | 'input_required' | 'completed' | 'failed' | 'cancelled';
export type TerminalTaskState = 'completed' | 'failed' | 'cancelled';

/** How `cancel` behaves: at once, or as a request the worker honours. */
export type CancellationMode = 'immediate' | 'cooperative';

/** Who a task belongs to. Compared exactly: principal and tenant both must match. */
export interface TaskOwner {
  readonly principal: string | null;
  readonly tenant?: string | null;
}

/** The stored result always carries `resultType: "complete"` (clients settle on it). */
export type StoredCallToolResult = CallToolResult & { resultType: 'complete' };

/** The stored task. Timestamps are epoch milliseconds; `version` orders writes. */
export interface TaskRecord {
  readonly taskId: string;
  readonly owner: Required<TaskOwner>;
  readonly status: TaskState;
  readonly statusMessage?: string;
  readonly createdAt: number;
  readonly lastUpdatedAt: number;
  /** Lifetime from creation in milliseconds; `null` keeps the task until the janitor's terminal TTL. */
  readonly ttlMs: number | null;
  readonly pollIntervalMs?: number;
  /** The input requests outstanding now (present only while `input_required`). */
  readonly inputRequests?: Readonly<Record<string, InputRequest>>;
  /** Every input key this task has ever requested: keys are unique over a task's life. */
  readonly usedInputKeys?: readonly string[];
  /** Answers received through `tasks/update` and not yet taken by the worker. */
  readonly inputResponses?: Readonly<Record<string, InputResponse>>;
  readonly result?: StoredCallToolResult;
  readonly error?: JsonRpcErrorObject;
  /**
   * When the task's current stay in `input_required` began (epoch ms; present only while
   * `input_required`): how long the client took to answer is measured from it. Never on the wire.
   */
  readonly inputRequiredSince?: number;
  /** Cooperative cancellation: the caller asked, the worker has not yet honoured it. */
  readonly cancelRequested?: boolean;
  /**
   * The instance (`TasksService.instanceId`) whose process runs the task's work, on a store with
   * leases: should that instance die, another one fails the task. Never on the wire.
   */
  readonly heldBy?: string;
  /**
   * The tool whose call made the task (set for `@TaskTool` calls, in-process and queue-run
   * alike). Shown by listing; never on the wire, which has no field for it.
   */
  readonly toolName?: string;
  /**
   * What the tool chose to keep of the call's arguments (its `keepArguments`): JSON data, at most
   * MAX_KEPT_ARGUMENTS_BYTES serialized. Shown by listing; never on the wire.
   */
  readonly arguments?: unknown;
  /**
   * What the record keeps from clients and tools, in bytes, as TasksService last wrote it (see
   * `keptBytes`): what `maxTaskBytes` bounds, and what a store that caps its bytes counts. Absent
   * on records written before sizes were kept, or by code other than TasksService. Never on the
   * wire.
   */
  readonly bytes?: number;
  /**
   * The journal of the task's steps (`TaskContext.step`), by name: what each completed step
   * returned, which a later run of the method (a queue job run again, a durable tool resumed)
   * gets back instead of running the step again. Present from a live task's first step until it
   * ends (a terminal record drops it). Never on the wire.
   */
  readonly steps?: Readonly<Record<string, TaskStepEntry>>;
  /**
   * What a durable tool's in-process call keeps of itself (`@TaskTool({ durable: true })`), so
   * that another instance can run the method again should this one die: its checked input, and
   * what else the call carried. Dropped when the task ends. Never on the wire.
   */
  readonly call?: TaskCallRecord;
  /**
   * The answers a durable call's method took (`requireInput`), by key, for a later run: it gets
   * them back without asking again. Dropped when the task ends. Never on the wire.
   */
  readonly answers?: Readonly<Record<string, InputResponse>>;
  /**
   * How many times a durable call's method has started for this task: 1 for the first run, one
   * more at each resume by another instance. Never on the wire.
   */
  readonly runs?: number;
  /**
   * Orders the writes of the task, and is never given to two different states: a write's version
   * is the next integer, or its writer's clock in microseconds when that is higher (see
   * `nextVersion`). After a store lost writes (a failover to a replica that had not received
   * them), the next write therefore still carries a version above every lost one, so what was
   * heard of the lost writes cannot hide it.
   */
  readonly version: number;
}

/**
 * One step in a task's journal: a completed step's result as JSON data (`value` absent for a step
 * that returned `undefined`), or a durable sleep's end (`until`, epoch ms: `TaskContext.sleep`).
 */
export interface TaskStepEntry {
  readonly value?: unknown;
  readonly until?: number;
}

/** What a durable call keeps of itself (see `TaskRecord.call`): JSON data. */
export interface TaskCallRecord {
  /** The tool's input, as the method received it (checked, as JSON). */
  readonly input: unknown;
  /** The answers to the tool's `requireInputFirst`, when it asked some. */
  readonly firstInput?: Readonly<Record<string, InputResponse>>;
  /** The request's headers a request-scoped tool's REQUEST carries (as a queue job carries them). */
  readonly headers?: Readonly<Record<string, string | readonly string[]>>;
}

/** The bare Task fields of the wire (CreateTaskResult without `resultType`). */
export interface WireTask {
  taskId: string;
  status: TaskState;
  statusMessage?: string;
  createdAt: string;
  lastUpdatedAt: string;
  ttlMs: number | null;
  pollIntervalMs?: number;
}

/** What `tasks/get` returns (without `resultType`) and what `notifications/tasks` carries. */
export type DetailedTask =
  | (WireTask & { status: 'working' | 'cancelled' })
  | (WireTask & { status: 'input_required'; inputRequests: Record<string, InputRequest> })
  | (WireTask & { status: 'completed'; result: StoredCallToolResult })
  | (WireTask & { status: 'failed'; error: JsonRpcErrorObject });

export interface NewTaskParams {
  ttlMs: number | null;
  pollIntervalMs?: number;
  statusMessage?: string;
  /** The instance that runs the task's work (see `TaskRecord.heldBy`). */
  heldBy?: string;
  /** The tool whose call made the task (see `TaskRecord.toolName`). */
  toolName?: string;
  /** The arguments kept, already checked (see `TaskRecord.arguments`). */
  arguments?: unknown;
  /** What a durable call keeps of itself (see `TaskRecord.call`). */
  call?: TaskCallRecord;
}

/** The module's TTL settings that decide a new task's TTL (see `resolveTtlMs`). */
export interface TtlLimits {
  readonly defaultTtlMs: number | null;
  readonly maxTtlMs: number | null;
}

const TERMINAL: ReadonlySet<TaskState> = new Set(['completed', 'failed', 'cancelled']);

export function isTerminal(status: TaskState): status is TerminalTaskState {
  return TERMINAL.has(status);
}

/** Owners are equal when principal and tenant are equal; an absent tenant is `null`. */
export function normalizeOwner(owner: TaskOwner): Required<TaskOwner> {
  return { principal: owner.principal, tenant: owner.tenant ?? null };
}

export function isOwnedBy(record: TaskRecord, owner: TaskOwner): boolean {
  return (
    record.owner.principal === owner.principal && record.owner.tenant === (owner.tenant ?? null)
  );
}

/** The instant a task with a TTL expires, or `null` when it has none. */
export function expiresAt(record: Pick<TaskRecord, 'createdAt' | 'ttlMs'>): number | null {
  return record.ttlMs === null ? null : record.createdAt + record.ttlMs;
}

export function isExpired(record: TaskRecord, now: number): boolean {
  const at = expiresAt(record);
  return at !== null && at <= now;
}

/**
 * A finished task without a TTL is kept until `terminalTtlMs` after it finished: the instant it
 * finished (its last update, final once terminal), or `null` for a task this rule does not keep
 * (it has a TTL, or it is still live).
 */
export function terminalSince(
  record: Pick<TaskRecord, 'ttlMs' | 'status' | 'lastUpdatedAt'>,
): number | null {
  return record.ttlMs === null && isTerminal(record.status) ? record.lastUpdatedAt : null;
}

/** Whether every one of `keys` was answered: none of them is an outstanding input request. */
export function isAnswered(
  task: Pick<TaskRecord, 'inputRequests'>,
  keys: readonly string[],
): boolean {
  const outstanding = task.inputRequests;
  return outstanding === undefined || keys.every((key) => !Object.hasOwn(outstanding, key));
}

export function isCancellationRequested(task: TaskRecord): boolean {
  return task.status === 'cancelled' || task.cancelRequested === true;
}

/**
 * What a notification's dedupe keeps of the last state it passed on for a task: its version, or
 * Infinity once a terminal state. A state is news when its mark is higher (`isNews`): a terminal
 * state is news after any live one whatever their versions (the belt to `nextVersion`'s braces,
 * for writers whose clocks disagree), and nothing is news after a terminal state, which is final.
 */
export function deliveryMark(record: TaskRecord): number {
  return isTerminal(record.status) ? Number.POSITIVE_INFINITY : record.version;
}

/** Whether `record` is news to a dedupe whose last mark for its task is `last` (see deliveryMark). */
export function isNews(record: TaskRecord, last: number | undefined): boolean {
  return last === undefined || deliveryMark(record) > last;
}
