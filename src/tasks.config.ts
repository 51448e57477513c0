import { defaultPrincipal, type PrincipalResolver } from './principal.js';
import {
  DEFAULT_JANITOR_INTERVAL_MS,
  DEFAULT_LEASE_TTL_MS,
  DEFAULT_STORE_OUTAGE_MS,
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
import {
  isObject,
  mustBe,
  nonNegativeInteger,
  optionalFunction,
  positiveInteger,
  positiveIntegerOrNull,
  section,
} from './option-checks.js';
import { OptionProblems } from './option-problems.js';
import { isPositiveInteger } from './task.js';
import {
  BODIES_KEYS,
  JANITOR_KEYS,
  LEASE_KEYS,
  LISTEN_KEYS,
  OPTION_KEYS,
  optionElsewhere,
  RESULT_WAITS_KEYS,
  SHUTDOWN_KEYS,
  TELEMETRY_KEYS,
} from './tasks-option-keys.js';
import type {
  TasksBodiesOptions,
  TasksConfig,
  TasksListenOptions,
  TasksModuleOptions,
  TasksResultWaitsOptions,
  TasksServerOptions,
  TasksTelemetryOptions,
} from './interfaces/tasks-module-options.interface.js';

/*
 * TasksModule's options resolved into TasksConfig, each checked once at startup: the values here,
 * the names in tasks-option-keys.ts, the single-value checks in option-checks.ts. The registration
 * extras (path, guards, the store and notifier parts) are checked in tasks-extras.config.ts.
 */

/** Validates module options once, at startup, and merges the defaults. */
export function resolveTasksConfig(options: TasksModuleOptions | undefined): TasksConfig {
  const raw: Record<string, unknown> = (options ?? {}) as Record<string, unknown>;
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    throw mustBe('TasksModule options', 'an object', raw);
  }
  const p = new OptionProblems('TasksModule options');
  p.unknownKeys('', raw, OPTION_KEYS, optionElsewhere);

  const cancellation = raw.cancellation ?? 'immediate';
  if (cancellation !== 'immediate' && cancellation !== 'cooperative') {
    p.add(mustBe('cancellation', '"immediate" or "cooperative"', cancellation).message);
  }
  const beforeCap = p.count;
  const maxTtlMs = positiveIntegerOrNull(p, 'maxTtlMs', raw.maxTtlMs, DEFAULT_MAX_TTL_MS);
  // A bad cap stands in as none, so a default TTL is not also reported as above it.
  const cap = p.count > beforeCap ? null : maxTtlMs;
  const defaultTtlMs = ttlDefault(
    p,
    positiveIntegerOrNull(p, 'defaultTtlMs', raw.defaultTtlMs, undefined),
    cap,
  );
  const maxRows = positiveIntegerOrNull(p, 'maxRows', raw.maxRows, DEFAULT_MAX_ROWS);
  const maxTasksPerOwner = positiveIntegerOrNull(
    p,
    'maxTasksPerOwner',
    raw.maxTasksPerOwner,
    DEFAULT_MAX_TASKS_PER_OWNER,
  );
  const maxTaskBytes = positiveInteger(p, 'maxTaskBytes', raw.maxTaskBytes, DEFAULT_MAX_TASK_BYTES);

  let janitor: TasksConfig['janitor'] = false;
  if (raw.janitor !== false) {
    const given = section(p, 'janitor', raw.janitor, JANITOR_KEYS, 'an object or false');
    janitor = Object.freeze({
      intervalMs: positiveInteger(
        p,
        'janitor.intervalMs',
        given.intervalMs,
        DEFAULT_JANITOR_INTERVAL_MS,
      ),
      terminalTtlMs: positiveInteger(
        p,
        'janitor.terminalTtlMs',
        given.terminalTtlMs,
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
    p.add(mustBe('serverInfo', 'an object with string name and version', serverInfo).message);
  }
  const principal = optionalFunction(p, 'principal', raw.principal) ?? defaultPrincipal;
  const tenant = optionalFunction(p, 'tenant', raw.tenant);
  const configure = optionalFunction(p, 'configure', raw.configure);
  const serverOptions = raw.serverOptions;
  if (
    serverOptions !== undefined &&
    (!isObject(serverOptions) || 'capabilities' in serverOptions)
  ) {
    p.add(
      mustBe(
        'serverOptions',
        "an object of the SDK's ServerOptions without capabilities (add them in configure)",
        serverOptions,
      ).message,
    );
  }
  const beforeBody = p.count;
  const maxBodyBytes = positiveInteger(p, 'maxBodyBytes', raw.maxBodyBytes, DEFAULT_MAX_BODY_BYTES);
  // A bad maxBodyBytes stands in as 1 byte: every budget is at least that, so none is refused
  // for being under a size that is itself wrong.
  const bodyFloor = p.count > beforeBody ? 1 : maxBodyBytes;
  const allowedHosts = hostList(p, 'allowedHosts', raw.allowedHosts);
  const allowedOrigins = hostList(p, 'allowedOrigins', raw.allowedOrigins);

  const config: TasksConfig = Object.freeze({
    cancellation: cancellation as TasksConfig['cancellation'],
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
    bodies: bodiesOptions(p, raw.bodies, bodyFloor),
    listen: listenOptions(p, raw.listen),
    resultWaits: resultWaitsOptions(p, raw.resultWaits),
    runningTasksOnShutdown: onShutdown(p, raw.runningTasksOnShutdown),
    shutdown: shutdownOptions(p, raw.shutdown),
    lease: leaseOptions(p, raw.lease),
    storeOutageMs: nonNegativeInteger(
      p,
      'storeOutageMs',
      raw.storeOutageMs,
      DEFAULT_STORE_OUTAGE_MS,
    ),
    telemetry: telemetryOptions(p, raw.telemetry),
  });
  p.throwIfAny();
  return config;
}

/** Where metrics and spans go: providers with `getMeter` / `getTracer`, checked here. */
function telemetryOptions(p: OptionProblems, value: unknown): TasksConfig['telemetry'] {
  if (value === false) return false;
  const given = section(p, 'telemetry', value, TELEMETRY_KEYS, 'an object or false');
  const { meterProvider, tracerProvider, recordTaskIds } = given;
  const provider = (key: string, provided: unknown, method: string): void => {
    if (
      provided !== undefined &&
      typeof (provided as Record<string, unknown>)?.[method] !== 'function'
    ) {
      p.add(
        mustBe(`telemetry.${key}`, `an OpenTelemetry ${key} (with ${method})`, provided).message,
      );
    }
  };
  provider('meterProvider', meterProvider, 'getMeter');
  provider('tracerProvider', tracerProvider, 'getTracer');
  if (recordTaskIds !== undefined && typeof recordTaskIds !== 'boolean') {
    p.add(mustBe('telemetry.recordTaskIds', 'a boolean', recordTaskIds).message);
  }
  return Object.freeze({ ...given } as TasksTelemetryOptions);
}

/**
 * The lease of this instance (see TasksLease). It is renewed every third of its TTL, so two
 * renewals may be late before it runs out; a TTL under MIN_LEASE_TTL_MS leaves no room for that.
 */
function leaseOptions(p: OptionProblems, value: unknown): TasksConfig['lease'] {
  if (value === false) return false;
  const given = section(p, 'lease', value, LEASE_KEYS, 'an object or false');
  const ttlMs = positiveInteger(p, 'lease.ttlMs', given.ttlMs, DEFAULT_LEASE_TTL_MS);
  if (ttlMs < MIN_LEASE_TTL_MS) {
    p.add(mustBe('lease.ttlMs', `at least ${MIN_LEASE_TTL_MS}`, ttlMs).message);
  }
  return Object.freeze({ ttlMs });
}

/**
 * The default TTL under the cap. Only the user's own values can contradict: an explicit
 * `defaultTtlMs` above `maxTtlMs` is refused; the built-in hour is lowered to the cap, and an
 * unlimited default (`null`) is capped like any unlimited request.
 */
function ttlDefault(
  p: OptionProblems,
  given: number | null | undefined,
  maxTtlMs: number | null,
): number | null {
  if (maxTtlMs === null) return given === undefined ? DEFAULT_TTL_MS : given;
  if (given === undefined) return Math.min(DEFAULT_TTL_MS, maxTtlMs);
  if (given === null) return maxTtlMs;
  if (given > maxTtlMs) {
    p.add(mustBe('defaultTtlMs', `at most maxTtlMs (${maxTtlMs})`, given).message);
  }
  return given;
}

function onShutdown(p: OptionProblems, value: unknown): 'fail' | 'leave' {
  if (value === undefined) return 'fail';
  if (value === 'fail' || value === 'leave') return value;
  p.add(mustBe('runningTasksOnShutdown', '"fail" or "leave"', value).message);
  return 'fail';
}

/** The graceful shutdown: how long the calls running then may take (0: hand them over at once). */
function shutdownOptions(p: OptionProblems, value: unknown): TasksConfig['shutdown'] {
  const given = section(p, 'shutdown', value, SHUTDOWN_KEYS);
  const drainMs = given.drainMs ?? DEFAULT_SHUTDOWN_DRAIN_MS;
  if (
    (drainMs !== 0 && !isPositiveInteger(drainMs)) ||
    (drainMs as number) > MAX_SHUTDOWN_DRAIN_MS
  ) {
    p.add(
      mustBe(
        'shutdown.drainMs',
        `a positive integer or 0 (at most ${MAX_SHUTDOWN_DRAIN_MS})`,
        drainMs,
      ).message,
    );
  }
  return Object.freeze({ drainMs: drainMs as number });
}

function listenOptions(p: OptionProblems, value: unknown): Readonly<Required<TasksListenOptions>> {
  const given = section(p, 'listen', value, LISTEN_KEYS);
  const keepAliveMs = given.keepAliveMs ?? DEFAULT_KEEPALIVE_MS;
  if (keepAliveMs !== 0 && !isPositiveInteger(keepAliveMs)) {
    p.add(mustBe('listen.keepAliveMs', 'a positive integer or 0', keepAliveMs).message);
  }
  return Object.freeze({
    keepAliveMs: keepAliveMs as number,
    maxStreams: positiveInteger(p, 'listen.maxStreams', given.maxStreams, DEFAULT_MAX_STREAMS),
    maxStreamsPerPrincipal: positiveInteger(
      p,
      'listen.maxStreamsPerPrincipal',
      given.maxStreamsPerPrincipal,
      DEFAULT_MAX_STREAMS_PER_PRINCIPAL,
    ),
    maxTaskIds: positiveInteger(p, 'listen.maxTaskIds', given.maxTaskIds, DEFAULT_MAX_TASK_IDS),
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
  p: OptionProblems,
  value: unknown,
  maxBodyBytes: number,
): Readonly<Required<TasksBodiesOptions>> {
  const given = section(p, 'bodies', value, BODIES_KEYS);
  const atLeastBody = (key: string, bytes: number | null): void => {
    if (bytes !== null && bytes < maxBodyBytes) {
      p.add(mustBe(`bodies.${key}`, `at least maxBodyBytes (${maxBodyBytes})`, bytes).message);
    }
  };
  const maxBytesInFlight = positiveInteger(
    p,
    'bodies.maxBytesInFlight',
    given.maxBytesInFlight,
    Math.max(DEFAULT_MAX_BODY_BYTES_IN_FLIGHT, 4 * maxBodyBytes),
  );
  atLeastBody('maxBytesInFlight', maxBytesInFlight);
  const maxBytesInFlightPerAddress = positiveIntegerOrNull(
    p,
    'bodies.maxBytesInFlightPerAddress',
    given.maxBytesInFlightPerAddress,
    Math.max(DEFAULT_MAX_BODY_BYTES_IN_FLIGHT_PER_ADDRESS, maxBodyBytes),
  );
  atLeastBody('maxBytesInFlightPerAddress', maxBytesInFlightPerAddress);
  const timer = (key: string, ms: unknown): void => {
    if ((ms as number) > MAX_TIMER_MS) {
      p.add(mustBe(`bodies.${key}`, `at most ${MAX_TIMER_MS}`, ms).message);
    }
  };
  const timeoutMs = positiveInteger(
    p,
    'bodies.timeoutMs',
    given.timeoutMs,
    DEFAULT_BODY_TIMEOUT_MS,
  );
  timer('timeoutMs', timeoutMs);
  const headersTimeoutMs = positiveIntegerOrNull(
    p,
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

function resultWaitsOptions(
  p: OptionProblems,
  value: unknown,
): Readonly<Required<TasksResultWaitsOptions>> {
  const given = section(p, 'resultWaits', value, RESULT_WAITS_KEYS);
  return Object.freeze({
    max: positiveInteger(p, 'resultWaits.max', given.max, DEFAULT_MAX_RESULT_WAITS),
    maxPerPrincipal: positiveInteger(
      p,
      'resultWaits.maxPerPrincipal',
      given.maxPerPrincipal,
      DEFAULT_MAX_RESULT_WAITS_PER_PRINCIPAL,
    ),
  });
}

const DEFAULT_SERVER_INFO = { name: 'nestjs-mcp-tasks', version: '0.1.0' };

function hostList(
  p: OptionProblems,
  key: string,
  value: unknown,
): readonly string[] | false | undefined {
  if (value === undefined || value === false) return value;
  if (
    !Array.isArray(value) ||
    !value.every((host) => typeof host === 'string' && host.length > 0)
  ) {
    p.add(mustBe(key, 'an array of host names or false', value).message);
    return undefined;
  }
  return Object.freeze([...value]);
}
