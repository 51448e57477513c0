import type { CanActivate, InjectionToken, Type } from '@nestjs/common';
import type { McpServer } from '@modelcontextprotocol/server';
import { defaultPrincipal, type PrincipalResolver } from './principal.js';
import {
  DEFAULT_JANITOR_INTERVAL_MS,
  DEFAULT_MCP_PATH,
  DEFAULT_KEEPALIVE_MS,
  DEFAULT_MAX_BODY_BYTES,
  DEFAULT_MAX_STREAMS,
  DEFAULT_MAX_TASK_IDS,
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
  /**
   * TTL of a task whose creator names none. Default 1 h, or `maxTtlMs` when that is smaller;
   * `null` = unlimited (with `maxTtlMs` set: `maxTtlMs`, as for any unlimited request).
   */
  defaultTtlMs?: number | null;
  /**
   * Upper bound for any TTL: a longer or unlimited request gets `maxTtlMs`, and so does the default
   * TTL. Default `null`: none. An explicit `defaultTtlMs` above it fails the boot.
   */
  maxTtlMs?: number | null;
  /** How many tasks the store may hold. Default 10,000; `null` = unlimited. */
  maxRows?: number | null;
  /** The janitor that removes expired tasks; `false` turns it off. */
  janitor?: TasksJanitorOptions | false;
  /** Name and version the MCP server reports. Default: this package's. */
  serverInfo?: { name: string; version: string; title?: string };
  /** Who makes a request. Default: `request.user.sub` or `.id` (passport style), else anonymous. */
  principal?: PrincipalResolver;
  /** The request's tenant, when tasks are also separated by tenant. Default: none. */
  tenant?: PrincipalResolver;
  /** Adds the app's own plain tools, resources and prompts to the server (called per request). */
  configure?: (server: McpServer) => void;
  /**
   * Host names the endpoint answers to (DNS rebinding protection). Default: on a loopback
   * connection only `localhost`, `127.0.0.1` and `[::1]`; elsewhere any. `false`: never checked.
   */
  allowedHosts?: string[] | false;
  /** Origins (host names) a browser may call from. Default as for `allowedHosts`. */
  allowedOrigins?: string[] | false;
  /**
   * The largest request body the endpoint accepts, in bytes (-32600, HTTP 413 beyond). Default
   * 1 MiB. The endpoint reads its own bodies, so the app's body parser limit does not apply.
   */
  maxBodyBytes?: number;
  /** Listen streams (`subscriptions/listen`). */
  listen?: TasksListenOptions;
  /**
   * What happens, at shutdown, to tool calls still running in this process. `'fail'` (default):
   * each task fails with -32603 "The server shut down before the task finished", so no task stays
   * `working` unnoticed. `'leave'`: tasks stay as they are, for a shared store where another
   * instance or a worker takes them over.
   */
  runningTasksOnShutdown?: 'fail' | 'leave';
}

export interface TasksListenOptions {
  /** Interval of SSE keepalive comments; `0` turns them off. Default 15 s. */
  keepAliveMs?: number;
  /** Open streams per process; a listen beyond it gets a JSON-RPC error. Default 1,024. */
  maxStreams?: number;
  /** Task ids per filter; more is -32602. Default 256. */
  maxTaskIds?: number;
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
  /**
   * Register the module globally, so feature modules inject TasksService and the TaskStore token
   * without importing anything (or import bare `TasksModule`). Default `true`; with `false` only
   * the module that imports the registration sees its providers.
   */
  isGlobal?: boolean;
  /** The TaskStore. Default: a fresh InMemoryTaskStore. */
  store?: PartProvider<TaskStore>;
  /** The TaskNotifier. Default: one that tells no one; `null` turns notifications off. */
  notifier?: PartProvider<TaskNotifier> | null;
  /** Where the MCP endpoint is served. Default `'mcp'` (POST /mcp); `false`: no endpoint. */
  path?: string | false;
  /**
   * The app's guards, run in order before every request to the endpoint (e.g. an auth guard),
   * after the app's global guards. A class is taken from the app when it is a provider anywhere
   * in it, else built at startup with the app's global providers and this registration's
   * `imports` (forRootAsync) in reach; an instance is used as it is.
   */
  guards?: (Type<CanActivate> | CanActivate)[];
}

/** The options after validation, with every default filled in. */
export interface TasksConfig {
  readonly cancellation: CancellationMode;
  readonly defaultTtlMs: number | null;
  readonly maxTtlMs: number | null;
  readonly maxRows: number | null;
  readonly janitor: Readonly<Required<TasksJanitorOptions>> | false;
  readonly serverInfo: Readonly<{ name: string; version: string; title?: string }>;
  readonly principal: PrincipalResolver;
  readonly tenant: PrincipalResolver | undefined;
  readonly configure: ((server: McpServer) => void) | undefined;
  readonly allowedHosts: readonly string[] | false | undefined;
  readonly allowedOrigins: readonly string[] | false | undefined;
  readonly maxBodyBytes: number;
  readonly listen: Readonly<Required<TasksListenOptions>>;
  readonly runningTasksOnShutdown: 'fail' | 'leave';
}

const OPTION_KEYS: ReadonlySet<string> = new Set([
  'cancellation',
  'defaultTtlMs',
  'maxTtlMs',
  'maxRows',
  'janitor',
  'serverInfo',
  'principal',
  'tenant',
  'configure',
  'allowedHosts',
  'allowedOrigins',
  'maxBodyBytes',
  'listen',
  'runningTasksOnShutdown',
]);
const LISTEN_KEYS: ReadonlySet<string> = new Set(['keepAliveMs', 'maxStreams', 'maxTaskIds']);
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
  const maxTtlMs = positiveIntegerOrNull('maxTtlMs', raw.maxTtlMs, null);
  const defaultTtlMs = ttlDefault(
    positiveIntegerOrNull('defaultTtlMs', raw.defaultTtlMs, undefined),
    maxTtlMs,
  );
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
  const allowedHosts = hostList('allowedHosts', raw.allowedHosts);
  const allowedOrigins = hostList('allowedOrigins', raw.allowedOrigins);

  return Object.freeze({
    cancellation,
    defaultTtlMs,
    maxTtlMs,
    maxRows,
    janitor,
    serverInfo: Object.freeze({ ...(serverInfo as { name: string; version: string }) }),
    principal: principal as PrincipalResolver,
    tenant: tenant as PrincipalResolver | undefined,
    configure: configure as ((server: McpServer) => void) | undefined,
    allowedHosts,
    allowedOrigins,
    maxBodyBytes: positiveInteger('maxBodyBytes', raw.maxBodyBytes, DEFAULT_MAX_BODY_BYTES),
    listen: listenOptions(raw.listen),
    runningTasksOnShutdown: onShutdown(raw.runningTasksOnShutdown),
  });
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
    maxTaskIds: positiveInteger('listen.maxTaskIds', given.maxTaskIds, DEFAULT_MAX_TASK_IDS),
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

/** Validates the registration extras that can be checked before DI runs. */
export function checkPath(path: unknown): string | false {
  if (path === undefined) return DEFAULT_MCP_PATH;
  if (path === false) return false;
  if (typeof path !== 'string' || !/^\/?[A-Za-z0-9._~!$&'()*+,;=:@%/-]*$/.test(path)) {
    throw mustBe('path', 'a URL path or false', path);
  }
  return path;
}
