import { Logger } from '@nestjs/common';
import { createHash } from 'node:crypto';
import { TaskStepError, TasksConfigError } from '../errors.js';
import { thrownJsonRpcError } from '../task.js';

/** How a step retries its function (see `TaskContext.step`). */
export interface TaskStepOptions {
  /** How many times the function is called again after it throws (default 0: once in all). */
  retries?: number;
  /**
   * The wait before the first retry, in ms (default 1,000); each later wait doubles, up to
   * `maxBackoffMs`. Each wait is jittered: between half of it and all of it.
   */
  backoffMs?: number;
  /** The longest wait between two attempts, in ms (default 30,000). */
  maxBackoffMs?: number;
  /**
   * How long one attempt may take, in ms (default: no limit). Past it the attempt's signal fires
   * and the attempt counts as failed, whether or not the function has returned.
   */
  timeoutMs?: number;
}

/** What a step's function is given. */
export interface TaskStepAttempt {
  /** 1 for the first call of the function, 2 for the first retry, and so on. */
  readonly attempt: number;
  /** Fires when the task is cancelled, or this attempt's `timeoutMs` has passed. */
  readonly signal: AbortSignal;
}

/** The defaults of TaskStepOptions. */
export const STEP_DEFAULTS = { retries: 0, backoffMs: 1_000, maxBackoffMs: 30_000 } as const;

/** The longest step name: names are kept in the task's record, once per step. */
export const MAX_STEP_NAME_LENGTH = 200;

/** The longest durable sleep: 30 days. */
export const MAX_SLEEP_MS = 30 * 86_400_000;

/** The longest timer Node keeps as asked (about 24.8 days): a longer wait is made of several. */
const MAX_TIMER_MS = 2_147_483_647;

/** The largest `retries`: a step is not a queue. */
const MAX_RETRIES = 100;

/** The longest wait or timeout a step takes (a day), past which a timer would misfire. */
const MAX_STEP_MS = 86_400_000;

const logger = new Logger('TaskTool');

/** Checks a step's name: a non-empty string of at most MAX_STEP_NAME_LENGTH characters. */
export function checkStepName(name: unknown): string {
  if (typeof name !== 'string' || name.length === 0 || name.length > MAX_STEP_NAME_LENGTH) {
    throw new TasksConfigError(
      `A step's name must be a non-empty string of at most ${MAX_STEP_NAME_LENGTH} characters, got ${describe(name)}`,
    );
  }
  return name;
}

/** The options of a step, checked, with their defaults. */
export function stepOptions(
  name: string,
  options: TaskStepOptions | undefined,
): Required<Omit<TaskStepOptions, 'timeoutMs'>> & Pick<TaskStepOptions, 'timeoutMs'> {
  const {
    retries = STEP_DEFAULTS.retries,
    backoffMs = STEP_DEFAULTS.backoffMs,
    maxBackoffMs = STEP_DEFAULTS.maxBackoffMs,
    timeoutMs,
  } = options ?? {};
  const bad = (option: string, value: unknown, rule: string): TasksConfigError =>
    new TasksConfigError(
      `Step ${JSON.stringify(name)}: option ${option} must be ${rule}, got ${describe(value)}`,
    );
  if (!Number.isInteger(retries) || retries < 0 || retries > MAX_RETRIES) {
    throw bad('retries', retries, `an integer from 0 to ${MAX_RETRIES}`);
  }
  for (const [option, value] of [
    ['backoffMs', backoffMs],
    ['maxBackoffMs', maxBackoffMs],
  ] as const) {
    if (!Number.isInteger(value) || value < 0 || value > MAX_STEP_MS) {
      throw bad(option, value, `an integer from 0 to ${MAX_STEP_MS}`);
    }
  }
  if (
    timeoutMs !== undefined &&
    (!Number.isInteger(timeoutMs) || timeoutMs < 1 || timeoutMs > MAX_STEP_MS)
  ) {
    throw bad('timeoutMs', timeoutMs, `an integer from 1 to ${MAX_STEP_MS}`);
  }
  return { retries, backoffMs, maxBackoffMs, timeoutMs };
}

/**
 * A stable key for a call to an outside service made by the step `name` of task `taskId`: the same
 * on every run of the method, on every instance, and different for every task and step (43
 * characters of base64url, a SHA-256 of both).
 */
export function stepIdempotencyKey(taskId: string, name: string): string {
  return createHash('sha256').update(taskId).update('\0').update(name).digest('base64url');
}

/**
 * What JSON keeps of a step's result: the value every run of the method gets (the first as the
 * later ones, which read it from the journal). `undefined` stays `undefined`; a result JSON cannot
 * hold (a BigInt, a cycle, a function) is the tool's bug: TasksConfigError.
 */
export function jsonOf(name: string, value: unknown): unknown {
  if (value === undefined) return undefined;
  let json: string | undefined;
  try {
    json = JSON.stringify(value);
  } catch (error) {
    throw new TasksConfigError(
      `Step ${JSON.stringify(name)} returned a value JSON cannot hold (${(error as Error).message})`,
    );
  }
  if (json === undefined) {
    throw new TasksConfigError(
      `Step ${JSON.stringify(name)} returned a value JSON cannot hold (${describe(value)})`,
    );
  }
  return JSON.parse(json) as unknown;
}

/** A fresh copy of a journaled value (the record's own is shared, and may be frozen). */
export function copyOf(value: unknown): unknown {
  return value === undefined || value === null || typeof value !== 'object'
    ? value
    : (JSON.parse(JSON.stringify(value)) as unknown);
}

/**
 * Calls a step's function until it returns, with the step's retries and backoff; a JSON-RPC error
 * it throws (the tool's own final answer) and the task's cancel end the step at once. Once the
 * retries are spent, the last error is logged and the step fails with TaskStepError.
 */
export async function attempt<T>(
  name: string,
  run: (attempt: TaskStepAttempt) => T | Promise<T>,
  options: ReturnType<typeof stepOptions>,
  signal: AbortSignal,
  tool: string | undefined,
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await once(name, run, attempt, signal, options.timeoutMs);
    } catch (error) {
      if (signal.aborted || thrownJsonRpcError(error) !== undefined) throw error;
      if (attempt > options.retries) {
        const who = tool === undefined ? 'A task tool' : `Task tool ${tool}`;
        logger.error(
          `${who}: step ${JSON.stringify(name)} failed after ${attempt} attempt(s): ${(error as Error)?.stack ?? String(error)}`,
        );
        throw new TaskStepError(
          name,
          attempt,
          `Step ${JSON.stringify(name)} failed after ${attempt} attempt(s)`,
          { cause: error },
        );
      }
      const wait = Math.min(options.maxBackoffMs, options.backoffMs * 2 ** (attempt - 1));
      await pause(wait / 2 + Math.random() * (wait / 2), signal);
    }
  }
}

/** One call of the function, bounded by `timeoutMs` when there is one. */
async function once<T>(
  name: string,
  run: (attempt: TaskStepAttempt) => T | Promise<T>,
  attempt: number,
  signal: AbortSignal,
  timeoutMs: number | undefined,
): Promise<T> {
  if (timeoutMs === undefined) return await run({ attempt, signal });
  const own = new AbortController();
  const follow = (): void => own.abort(signal.reason);
  signal.addEventListener('abort', follow, { once: true });
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const error = new Error(
        `Step ${JSON.stringify(name)}: attempt ${attempt} timed out after ${timeoutMs} ms`,
      );
      error.name = 'TimeoutError';
      own.abort(error);
      reject(error);
    }, timeoutMs);
  });
  try {
    return await Promise.race([
      (async () => await run({ attempt, signal: own.signal }))(),
      timedOut,
    ]);
  } finally {
    clearTimeout(timer);
    signal.removeEventListener('abort', follow);
  }
}

/** Checks a sleep's length: an integer from 0 to MAX_SLEEP_MS. */
export function checkSleepMs(name: string, ms: unknown): void {
  if (typeof ms !== 'number' || !Number.isInteger(ms) || ms < 0 || ms > MAX_SLEEP_MS) {
    throw new TasksConfigError(
      `Sleep ${JSON.stringify(name)}: ms must be an integer from 0 to ${MAX_SLEEP_MS}, got ${describe(ms)}`,
    );
  }
}

/** Waits until `until` (epoch ms), or rejects with the signal's reason once it fires. */
export async function pauseUntil(until: number, signal: AbortSignal): Promise<void> {
  for (let left = until - Date.now(); left > 0; left = until - Date.now()) {
    await pause(Math.min(left, MAX_TIMER_MS), signal);
  }
  if (signal.aborted) throw signal.reason as Error;
}

/** Waits `ms`, or rejects with the signal's reason once it fires. */
function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason as Error);
    const stop = (): void => {
      clearTimeout(timer);
      reject(signal.reason as Error);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', stop);
      resolve();
    }, ms);
    signal.addEventListener('abort', stop, { once: true });
  });
}

function describe(value: unknown): string {
  if (typeof value === 'string')
    return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value);
  if (value === null || typeof value !== 'object') return String(value);
  return Array.isArray(value) ? 'an array' : 'an object';
}
