import type { InjectionToken, Type } from '@nestjs/common';
import {
  DEFAULT_JANITOR_INTERVAL_MS,
  DEFAULT_MAX_ROWS,
  DEFAULT_TERMINAL_TTL_MS,
  DEFAULT_TTL_MS,
} from './tasks.constants.js';
import { show, TasksConfigError } from './errors.js';
import type { TaskNotifier } from './notify/task-notifier.js';
import type { TaskStore } from './store/task-store.js';
import type { CancellationMode } from './task.js';

export interface TasksJanitorOptions {
  /** How often expired tasks are removed. Default 30 s. */
  intervalMs?: number;
  /** How long a finished task without a TTL is kept. Default 1 h. */
  terminalTtlMs?: number;
}

/** The options of `TasksModule.forRoot(...)`, or what the `forRootAsync` factory returns. */
export interface TasksModuleOptions {
  /** `'immediate'` (default): cancel ends a live task at once. `'cooperative'`: the worker decides. */
  cancellation?: CancellationMode;
  /** TTL of a task whose creator names none. Default 1 h; `null` = unlimited. */
  defaultTtlMs?: number | null;
  /** Upper bound for any requested TTL (an unlimited request is capped too). Default `null`: none. */
  maxTtlMs?: number | null;
  /** How many tasks the store may hold. Default 10,000; `null` = unlimited. */
  maxRows?: number | null;
  /** The janitor that removes expired tasks; `false` turns it off. */
  janitor?: TasksJanitorOptions | false;
}

/**
 * How a swappable part is provided: an instance, a class built through DI, or a Nest provider
 * recipe without `provide` (`useExisting` a provider the app builds, `useFactory` with `inject`).
 */
export type PartProvider<T> =
  | T
  | Type<T>
  | { useClass: Type<T> }
  | { useValue: T }
  | { useExisting: InjectionToken }
  | {
      useFactory: (...args: never[]) => T | Promise<T>;
      inject?: InjectionToken[];
    };

/** Set at registration (static, also for `forRootAsync`), since they decide the module's providers. */
export interface TasksModuleExtras {
  /** Register the module globally. Default `false`. */
  isGlobal?: boolean;
  /** The TaskStore. Default: a fresh InMemoryTaskStore. */
  store?: PartProvider<TaskStore>;
  /** The TaskNotifier. Default: one that tells no one; `null` turns notifications off. */
  notifier?: PartProvider<TaskNotifier> | null;
}

/** The options after validation, with every default filled in. */
export interface TasksConfig {
  readonly cancellation: CancellationMode;
  readonly defaultTtlMs: number | null;
  readonly maxTtlMs: number | null;
  readonly maxRows: number | null;
  readonly janitor: Readonly<Required<TasksJanitorOptions>> | false;
}

const OPTION_KEYS: ReadonlySet<string> = new Set([
  'cancellation',
  'defaultTtlMs',
  'maxTtlMs',
  'maxRows',
  'janitor',
]);
const JANITOR_KEYS: ReadonlySet<string> = new Set(['intervalMs', 'terminalTtlMs']);

const mustBe = (key: string, expectation: string, value: unknown): TasksConfigError =>
  new TasksConfigError(`${key} must be ${expectation}, got ${show(value)}`);

const isPositiveInteger = (value: unknown): value is number =>
  typeof value === 'number' && Number.isSafeInteger(value) && value > 0;

function positiveInteger(key: string, value: unknown, fallback: number): number {
  if (value === undefined) return fallback;
  if (!isPositiveInteger(value)) throw mustBe(key, 'a positive integer', value);
  return value;
}

function positiveIntegerOrNull(
  key: string,
  value: unknown,
  fallback: number | null,
): number | null {
  if (value === undefined) return fallback;
  if (value !== null && !isPositiveInteger(value)) {
    throw mustBe(key, 'a positive integer or null', value);
  }
  return value;
}

function refuseUnknownKeys(where: string, value: object, known: ReadonlySet<string>): void {
  for (const key of Object.keys(value)) {
    if (!known.has(key)) {
      throw new TasksConfigError(
        `${where}${key} is not an option; expected one of ${[...known].join(', ')}`,
      );
    }
  }
}

/** Validates module options once, at startup, and merges the defaults. */
export function resolveTasksConfig(options: TasksModuleOptions | undefined): TasksConfig {
  const raw: Record<string, unknown> = (options ?? {}) as Record<string, unknown>;
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    throw mustBe('TasksModule options', 'an object', raw);
  }
  refuseUnknownKeys('', raw, OPTION_KEYS);

  const cancellation = raw.cancellation ?? 'immediate';
  if (cancellation !== 'immediate' && cancellation !== 'cooperative') {
    throw mustBe('cancellation', '"immediate" or "cooperative"', cancellation);
  }
  const maxTtlMs = positiveIntegerOrNull('maxTtlMs', raw.maxTtlMs, null);
  const defaultTtlMs = positiveIntegerOrNull('defaultTtlMs', raw.defaultTtlMs, DEFAULT_TTL_MS);
  if (maxTtlMs !== null && (defaultTtlMs === null || defaultTtlMs > maxTtlMs)) {
    throw mustBe('defaultTtlMs', `at most maxTtlMs (${maxTtlMs})`, defaultTtlMs);
  }
  const maxRows = positiveIntegerOrNull('maxRows', raw.maxRows, DEFAULT_MAX_ROWS);

  let janitor: TasksConfig['janitor'] = false;
  if (raw.janitor !== false) {
    const given = raw.janitor ?? {};
    if (typeof given !== 'object' || given === null || Array.isArray(given)) {
      throw mustBe('janitor', 'an object or false', given);
    }
    refuseUnknownKeys('janitor.', given, JANITOR_KEYS);
    const { intervalMs, terminalTtlMs } = given as Record<string, unknown>;
    janitor = Object.freeze({
      intervalMs: positiveInteger('janitor.intervalMs', intervalMs, DEFAULT_JANITOR_INTERVAL_MS),
      terminalTtlMs: positiveInteger(
        'janitor.terminalTtlMs',
        terminalTtlMs,
        DEFAULT_TERMINAL_TTL_MS,
      ),
    });
  }

  return Object.freeze({ cancellation, defaultTtlMs, maxTtlMs, maxRows, janitor });
}
