import { defaultPrincipal, type PrincipalResolver } from './principal.js';
import {
  DEFAULT_JANITOR_INTERVAL_MS,
  DEFAULT_LEASE_TTL_MS,
  DEFAULT_STORE_OUTAGE_MS,
  DEFAULT_MCP_PATH,
  DEFAULT_KEEPALIVE_MS,
  DEFAULT_BODY_TIMEOUT_MS,
  DEFAULT_HEADERS_TIMEOUT_MS,
  DEFAULT_MAX_BODY_BYTES,
  DEFAULT_MAX_BODY_BYTES_IN_FLIGHT,
  DEFAULT_MAX_BODY_BYTES_IN_FLIGHT_PER_ADDRESS,
  DEFAULT_MAX_RESULT_WAITS,
  DEFAULT_MAX_RESULT_WAITS_PER_PRINCIPAL,
  DEFAULT_MAX_STREAMS,
  DEFAULT_MAX_STREAMS_PER_PRINCIPAL,
  DEFAULT_MAX_TASK_IDS,
  DEFAULT_MAX_TTL_MS,
  DEFAULT_MAX_ROWS,
  DEFAULT_MAX_TASK_BYTES,
  DEFAULT_MAX_TASKS_PER_OWNER,
  DEFAULT_TERMINAL_TTL_MS,
  DEFAULT_SHUTDOWN_DRAIN_MS,
  DEFAULT_TTL_MS,
  MAX_SHUTDOWN_DRAIN_MS,
  MIN_LEASE_TTL_MS,
} from './tasks.constants.js';
import { show, TasksConfigError } from './errors.js';
import { isPositiveInteger } from './task.js';
import { isTaskNotifier } from './notify/task-notifier.js';
import { missingLeaseMethods, missingStoreMethods, type TaskStore } from './store/task-store.js';
import type {
  TasksBodiesOptions,
  TasksConfig,
  TasksListenOptions,
  TasksModuleExtras,
  TasksModuleOptions,
  TasksResultWaitsOptions,
  TasksServerOptions,
  TasksTelemetryOptions,
} from './interfaces/tasks-module-options.interface.js';

/*
 * Every check of TasksModule's configuration, each run once at startup: the options resolved into
 * TasksConfig, and the registration extras (path, guards, and the store and notifier parts).
 */

const OPTION_KEYS: ReadonlySet<string> = new Set([
  'cancellation',
  'defaultTtlMs',
  'maxTtlMs',
  'maxRows',
  'maxTasksPerOwner',
  'maxTaskBytes',
  'janitor',
  'serverInfo',
  'principal',
  'tenant',
  'configure',
  'serverOptions',
  'allowedHosts',
  'allowedOrigins',
  'maxBodyBytes',
  'bodies',
  'listen',
  'resultWaits',
  'runningTasksOnShutdown',
  'shutdown',
  'lease',
  'storeOutageMs',
  'telemetry',
]);
const LISTEN_KEYS: ReadonlySet<string> = new Set([
  'keepAliveMs',
  'maxStreams',
  'maxStreamsPerPrincipal',
  'maxTaskIds',
]);
const BODIES_KEYS: ReadonlySet<string> = new Set([
  'maxBytesInFlight',
  'maxBytesInFlightPerAddress',
  'timeoutMs',
  'headersTimeoutMs',
]);
const RESULT_WAITS_KEYS: ReadonlySet<string> = new Set(['max', 'maxPerPrincipal']);
const JANITOR_KEYS: ReadonlySet<string> = new Set(['intervalMs', 'terminalTtlMs']);
const LEASE_KEYS: ReadonlySet<string> = new Set(['ttlMs']);
const SHUTDOWN_KEYS: ReadonlySet<string> = new Set(['drainMs']);
const TELEMETRY_KEYS: ReadonlySet<string> = new Set([
  'meterProvider',
  'tracerProvider',
  'recordTaskIds',
]);

const mustBe = (key: string, expectation: string, value: unknown): TasksConfigError =>
  new TasksConfigError(`${key} must be ${expectation}, got ${show(value)}`);

function positiveInteger(key: string, value: unknown, fallback: number): number {
  if (value === undefined) return fallback;
  if (!isPositiveInteger(value)) throw mustBe(key, 'a positive integer', value);
  return value;
}

function nonNegativeInteger(key: string, value: unknown, fallback: number): number {
  if (value === undefined) return fallback;
  if (value !== 0 && !isPositiveInteger(value)) throw mustBe(key, 'an integer of 0 or more', value);
  return value as number;
}

function positiveIntegerOrNull<F extends number | null | undefined>(
  key: string,
  value: unknown,
  fallback: F,
): number | null | F {
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
  const maxTtlMs = positiveIntegerOrNull('maxTtlMs', raw.maxTtlMs, DEFAULT_MAX_TTL_MS);
  const defaultTtlMs = ttlDefault(
    positiveIntegerOrNull('defaultTtlMs', raw.defaultTtlMs, undefined),
    maxTtlMs,
  );
  const maxRows = positiveIntegerOrNull('maxRows', raw.maxRows, DEFAULT_MAX_ROWS);
  const maxTasksPerOwner = positiveIntegerOrNull(
    'maxTasksPerOwner',
    raw.maxTasksPerOwner,
    DEFAULT_MAX_TASKS_PER_OWNER,
  );
  const maxTaskBytes = positiveInteger('maxTaskBytes', raw.maxTaskBytes, DEFAULT_MAX_TASK_BYTES);

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

  const serverInfo = raw.serverInfo ?? DEFAULT_SERVER_INFO;
  if (
    !isObject(serverInfo) ||
    typeof serverInfo.name !== 'string' ||
    typeof serverInfo.version !== 'string'
  ) {
    throw mustBe('serverInfo', 'an object with string name and version', serverInfo);
  }
  const principal = optionalFunction('principal', raw.principal) ?? defaultPrincipal;
  const tenant = optionalFunction('tenant', raw.tenant);
  const configure = optionalFunction('configure', raw.configure);
  const serverOptions = raw.serverOptions;
  if (
    serverOptions !== undefined &&
    (!isObject(serverOptions) || 'capabilities' in serverOptions)
  ) {
    throw mustBe(
      'serverOptions',
      "an object of the SDK's ServerOptions without capabilities (add them in configure)",
      serverOptions,
    );
  }
  const maxBodyBytes = positiveInteger('maxBodyBytes', raw.maxBodyBytes, DEFAULT_MAX_BODY_BYTES);
  const allowedHosts = hostList('allowedHosts', raw.allowedHosts);
  const allowedOrigins = hostList('allowedOrigins', raw.allowedOrigins);

  return Object.freeze({
    cancellation,
    defaultTtlMs,
    maxTtlMs,
    maxRows,
    maxTasksPerOwner,
    maxTaskBytes,
    janitor,
    serverInfo: Object.freeze({ ...(serverInfo as { name: string; version: string }) }),
    principal: principal as PrincipalResolver,
    tenant: tenant as PrincipalResolver | undefined,
    configure: configure as TasksConfig['configure'],
    serverOptions: Object.freeze({ ...(serverOptions as TasksServerOptions | undefined) }),
    allowedHosts,
    allowedOrigins,
    maxBodyBytes,
    bodies: bodiesOptions(raw.bodies, maxBodyBytes),
    listen: listenOptions(raw.listen),
    resultWaits: resultWaitsOptions(raw.resultWaits),
    runningTasksOnShutdown: onShutdown(raw.runningTasksOnShutdown),
    shutdown: shutdownOptions(raw.shutdown),
    lease: leaseOptions(raw.lease),
    storeOutageMs: nonNegativeInteger('storeOutageMs', raw.storeOutageMs, DEFAULT_STORE_OUTAGE_MS),
    telemetry: telemetryOptions(raw.telemetry),
  });
}

/** Where metrics and spans go: providers with `getMeter` / `getTracer`, checked here. */
function telemetryOptions(value: unknown): TasksConfig['telemetry'] {
  if (value === false) return false;
  const given = value ?? {};
  if (!isObject(given)) throw mustBe('telemetry', 'an object or false', given);
  refuseUnknownKeys('telemetry.', given, TELEMETRY_KEYS);
  const { meterProvider, tracerProvider, recordTaskIds } = given;
  const provider = (key: string, provided: unknown, method: string): void => {
    if (
      provided !== undefined &&
      typeof (provided as Record<string, unknown>)?.[method] !== 'function'
    ) {
      throw mustBe(`telemetry.${key}`, `an OpenTelemetry ${key} (with ${method})`, provided);
    }
  };
  provider('meterProvider', meterProvider, 'getMeter');
  provider('tracerProvider', tracerProvider, 'getTracer');
  if (recordTaskIds !== undefined && typeof recordTaskIds !== 'boolean') {
    throw mustBe('telemetry.recordTaskIds', 'a boolean', recordTaskIds);
  }
  return Object.freeze({ ...given } as TasksTelemetryOptions);
}

/**
 * The lease of this instance (see TasksLease). It is renewed every third of its TTL, so two
 * renewals may be late before it runs out; a TTL under MIN_LEASE_TTL_MS leaves no room for that.
 */
function leaseOptions(value: unknown): TasksConfig['lease'] {
  if (value === false) return false;
  const given = value ?? {};
  if (!isObject(given)) throw mustBe('lease', 'an object or false', given);
  refuseUnknownKeys('lease.', given, LEASE_KEYS);
  const ttlMs = positiveInteger('lease.ttlMs', given.ttlMs, DEFAULT_LEASE_TTL_MS);
  if (ttlMs < MIN_LEASE_TTL_MS) {
    throw mustBe('lease.ttlMs', `at least ${MIN_LEASE_TTL_MS}`, ttlMs);
  }
  return Object.freeze({ ttlMs });
}

/**
 * The default TTL under the cap. Only the user's own values can contradict: an explicit
 * `defaultTtlMs` above `maxTtlMs` is refused; the built-in hour is lowered to the cap, and an
 * unlimited default (`null`) is capped like any unlimited request.
 */
function ttlDefault(given: number | null | undefined, maxTtlMs: number | null): number | null {
  if (maxTtlMs === null) return given === undefined ? DEFAULT_TTL_MS : given;
  if (given === undefined) return Math.min(DEFAULT_TTL_MS, maxTtlMs);
  if (given === null) return maxTtlMs;
  if (given > maxTtlMs) throw mustBe('defaultTtlMs', `at most maxTtlMs (${maxTtlMs})`, given);
  return given;
}

function onShutdown(value: unknown): 'fail' | 'leave' {
  if (value === undefined) return 'fail';
  if (value !== 'fail' && value !== 'leave') {
    throw mustBe('runningTasksOnShutdown', '"fail" or "leave"', value);
  }
  return value;
}

/** The graceful shutdown: how long the calls running then may take (0: hand them over at once). */
function shutdownOptions(value: unknown): TasksConfig['shutdown'] {
  const given = value ?? {};
  if (!isObject(given)) throw mustBe('shutdown', 'an object', given);
  refuseUnknownKeys('shutdown.', given, SHUTDOWN_KEYS);
  const drainMs = given.drainMs ?? DEFAULT_SHUTDOWN_DRAIN_MS;
  if (
    (drainMs !== 0 && !isPositiveInteger(drainMs)) ||
    (drainMs as number) > MAX_SHUTDOWN_DRAIN_MS
  ) {
    throw mustBe(
      'shutdown.drainMs',
      `a positive integer or 0 (at most ${MAX_SHUTDOWN_DRAIN_MS})`,
      drainMs,
    );
  }
  return Object.freeze({ drainMs: drainMs as number });
}

function listenOptions(value: unknown): Readonly<Required<TasksListenOptions>> {
  const given = value ?? {};
  if (!isObject(given)) throw mustBe('listen', 'an object', given);
  refuseUnknownKeys('listen.', given, LISTEN_KEYS);
  const keepAliveMs = given.keepAliveMs ?? DEFAULT_KEEPALIVE_MS;
  if (keepAliveMs !== 0 && !isPositiveInteger(keepAliveMs)) {
    throw mustBe('listen.keepAliveMs', 'a positive integer or 0', keepAliveMs);
  }
  return Object.freeze({
    keepAliveMs: keepAliveMs as number,
    maxStreams: positiveInteger('listen.maxStreams', given.maxStreams, DEFAULT_MAX_STREAMS),
    maxStreamsPerPrincipal: positiveInteger(
      'listen.maxStreamsPerPrincipal',
      given.maxStreamsPerPrincipal,
      DEFAULT_MAX_STREAMS_PER_PRINCIPAL,
    ),
    maxTaskIds: positiveInteger('listen.maxTaskIds', given.maxTaskIds, DEFAULT_MAX_TASK_IDS),
  });
}

/** The longest a Node timer can wait (2^31 - 1 ms); a longer one fires at once. */
const MAX_TIMER_MS = 2_147_483_647;

/**
 * The limits on bodies while they arrive. A byte budget smaller than `maxBodyBytes` would refuse
 * every body of the largest size the endpoint accepts, so it is refused at startup; the defaults
 * grow with `maxBodyBytes` instead.
 */
function bodiesOptions(
  value: unknown,
  maxBodyBytes: number,
): Readonly<Required<TasksBodiesOptions>> {
  const given = value ?? {};
  if (!isObject(given)) throw mustBe('bodies', 'an object', given);
  refuseUnknownKeys('bodies.', given, BODIES_KEYS);
  const atLeastBody = (key: string, bytes: number | null): void => {
    if (bytes !== null && bytes < maxBodyBytes) {
      throw mustBe(`bodies.${key}`, `at least maxBodyBytes (${maxBodyBytes})`, bytes);
    }
  };
  const maxBytesInFlight = positiveInteger(
    'bodies.maxBytesInFlight',
    given.maxBytesInFlight,
    Math.max(DEFAULT_MAX_BODY_BYTES_IN_FLIGHT, 4 * maxBodyBytes),
  );
  atLeastBody('maxBytesInFlight', maxBytesInFlight);
  const maxBytesInFlightPerAddress = positiveIntegerOrNull(
    'bodies.maxBytesInFlightPerAddress',
    given.maxBytesInFlightPerAddress,
    Math.max(DEFAULT_MAX_BODY_BYTES_IN_FLIGHT_PER_ADDRESS, maxBodyBytes),
  );
  atLeastBody('maxBytesInFlightPerAddress', maxBytesInFlightPerAddress);
  const timer = (key: string, ms: unknown): void => {
    if ((ms as number) > MAX_TIMER_MS) throw mustBe(`bodies.${key}`, `at most ${MAX_TIMER_MS}`, ms);
  };
  const timeoutMs = positiveInteger('bodies.timeoutMs', given.timeoutMs, DEFAULT_BODY_TIMEOUT_MS);
  timer('timeoutMs', timeoutMs);
  const headersTimeoutMs = positiveIntegerOrNull(
    'bodies.headersTimeoutMs',
    given.headersTimeoutMs,
    DEFAULT_HEADERS_TIMEOUT_MS,
  );
  timer('headersTimeoutMs', headersTimeoutMs);
  return Object.freeze({
    maxBytesInFlight,
    maxBytesInFlightPerAddress,
    timeoutMs,
    headersTimeoutMs,
  });
}

function resultWaitsOptions(value: unknown): Readonly<Required<TasksResultWaitsOptions>> {
  const given = value ?? {};
  if (!isObject(given)) throw mustBe('resultWaits', 'an object', given);
  refuseUnknownKeys('resultWaits.', given, RESULT_WAITS_KEYS);
  return Object.freeze({
    max: positiveInteger('resultWaits.max', given.max, DEFAULT_MAX_RESULT_WAITS),
    maxPerPrincipal: positiveInteger(
      'resultWaits.maxPerPrincipal',
      given.maxPerPrincipal,
      DEFAULT_MAX_RESULT_WAITS_PER_PRINCIPAL,
    ),
  });
}

const DEFAULT_SERVER_INFO = { name: 'nestjs-mcp-tasks', version: '0.1.0' };

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

function optionalFunction(
  key: string,
  value: unknown,
): ((...args: never[]) => unknown) | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'function') throw mustBe(key, 'a function', value);
  return value as (...args: never[]) => unknown;
}

function hostList(key: string, value: unknown): readonly string[] | false | undefined {
  if (value === undefined || value === false) return value;
  if (
    !Array.isArray(value) ||
    !value.every((host) => typeof host === 'string' && host.length > 0)
  ) {
    throw mustBe(key, 'an array of host names or false', value);
  }
  return Object.freeze([...value]);
}

/** The `path` extra: where the endpoint is served, or `false` for none. */
export function checkPath(path: unknown): string | false {
  if (path === undefined) return DEFAULT_MCP_PATH;
  if (path === false) return false;
  if (typeof path !== 'string' || !/^\/?[A-Za-z0-9._~!$&'()*+,;=:@%/-]*$/.test(path)) {
    throw mustBe('path', 'a URL path or false', path);
  }
  return path;
}

/**
 * The `guards` extra (or another list of guards, named by `key`): guard classes or instances
 * (anything with a `canActivate` method).
 */
export function checkGuards(
  guards: TasksModuleExtras['guards'],
  key = 'guards',
): NonNullable<TasksModuleExtras['guards']> {
  if (guards === undefined) return [];
  if (
    !Array.isArray(guards) ||
    !guards.every(
      (guard) =>
        typeof guard === 'function' ||
        (guard !== null && typeof guard === 'object' && typeof guard.canActivate === 'function'),
    )
  ) {
    throw new TasksConfigError(
      `${key} must be an array of guard classes or instances, got ${show(guards)}`,
    );
  }
  return guards;
}

const RECIPE_KEYS = ['useClass', 'useValue', 'useExisting', 'useFactory'] as const;

/**
 * Whether a `store` / `notifier` extra that is not a class is a Nest provider recipe (else it is
 * an instance). A part naming two recipes is refused.
 */
export function isPartRecipe(key: string, part: unknown): boolean {
  const recipe =
    part !== null && typeof part === 'object' ? RECIPE_KEYS.filter((name) => name in part) : [];
  if (recipe.length > 1) {
    throw new TasksConfigError(`${key} names ${recipe.join(' and ')}; give one of them`);
  }
  return recipe.length === 1;
}

/** The check of a built `store` / `notifier` part: `problemWith` says what is wrong, or null. */
export function checkPart<T>(
  key: string,
  value: unknown,
  problemWith: (value: unknown) => string | null,
): T {
  const problem = problemWith(value);
  if (problem !== null) throw new TasksConfigError(`${key} ${problem}, got ${show(value)}`);
  return value as T;
}

/** What keeps a value from being the `store` part, or null. */
export function storeProblem(value: unknown): string | null {
  const missing = missingStoreMethods(value);
  if (missing.length > 0) return `must implement TaskStore (missing ${missing.join(', ')})`;
  const partial = missingLeaseMethods(value as TaskStore);
  return partial.length === 0
    ? null
    : `must implement all of TaskStoreLeases or none of it (missing ${partial.join(', ')})`;
}

/** What keeps a value from being the `notifier` part, or null. */
export function notifierProblem(value: unknown): string | null {
  return isTaskNotifier(value) ? null : 'must implement TaskNotifier (a notify method)';
}
