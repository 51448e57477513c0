import { isTaskToolOption, taskToolOptionHint } from './option-problems.js';
import type { TasksModuleExtras } from './interfaces/tasks-module-options.interface.js';

/*
 * The names of TasksModule's options, top-level and nested, and where a name given in the wrong
 * place belongs: what the unknown-option check of tasks.config.ts reads.
 */

export const OPTION_KEYS: ReadonlySet<string> = new Set([
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
export const LISTEN_KEYS: ReadonlySet<string> = new Set([
  'keepAliveMs',
  'maxStreams',
  'maxStreamsPerPrincipal',
  'maxTaskIds',
]);
export const BODIES_KEYS: ReadonlySet<string> = new Set([
  'maxBytesInFlight',
  'maxBytesInFlightPerAddress',
  'timeoutMs',
  'headersTimeoutMs',
]);
export const RESULT_WAITS_KEYS: ReadonlySet<string> = new Set(['max', 'maxPerPrincipal']);
export const JANITOR_KEYS: ReadonlySet<string> = new Set(['intervalMs', 'terminalTtlMs']);
export const LEASE_KEYS: ReadonlySet<string> = new Set(['ttlMs']);
export const SHUTDOWN_KEYS: ReadonlySet<string> = new Set(['drainMs']);
export const TELEMETRY_KEYS: ReadonlySet<string> = new Set([
  'meterProvider',
  'tracerProvider',
  'recordTaskIds',
]);

/** The registration extras: given beside the options, never inside what useFactory returns. */
const EXTRA_KEYS: ReadonlySet<string> = new Set(
  Object.keys({
    isGlobal: true,
    store: true,
    notifier: true,
    path: true,
    guards: true,
    console: true,
  } satisfies Record<keyof TasksModuleExtras, true>),
);

/** The options of TasksQueueModule (`nestjs-mcp-tasks/bullmq`). */
const QUEUE_KEYS: ReadonlySet<string> = new Set(['worker', 'workers', 'fair']);

/** The nested options objects, by name, with their keys. */
const SECTIONS: ReadonlyArray<readonly [string, ReadonlySet<string>]> = [
  ['listen', LISTEN_KEYS],
  ['bodies', BODIES_KEYS],
  ['resultWaits', RESULT_WAITS_KEYS],
  ['janitor', JANITOR_KEYS],
  ['lease', LEASE_KEYS],
  ['shutdown', SHUTDOWN_KEYS],
  ['telemetry', TELEMETRY_KEYS],
];

/**
 * Where an unknown top-level option belongs, when it is a real option elsewhere: on each
 * `@TaskTool()`, beside the options (an extra), in TasksQueueModule, in a nested object, or in
 * `serverInfo`. Undefined for anything else (a near miss or the list of options then).
 */
export function optionElsewhere(key: string): string | undefined {
  if (key === 'name' || key === 'version') {
    return `${key} is not an option; the server's name and version go in serverInfo: { name, version }`;
  }
  if (isTaskToolOption(key)) {
    const also = key === 'ttlMs' ? ' (the module-wide default is defaultTtlMs)' : '';
    return `${taskToolOptionHint(key, 'TasksModule')}${also}`;
  }
  if (EXTRA_KEYS.has(key)) {
    return `${key} is not an option; it is given beside the options: forRoot({ ${key} }), or forRootAsync({ ${key}, useFactory }), not in what useFactory returns`;
  }
  if (QUEUE_KEYS.has(key)) {
    return `${key} is a TasksQueueModule option, not a TasksModule one: TasksQueueModule.forRoot({ ${key} })`;
  }
  const home = SECTIONS.find(([, keys]) => keys.has(key));
  if (home !== undefined) {
    return `${key} is not an option; did you mean ${home[0]}.${key} (${home[0]}: { ${key} })?`;
  }
  return undefined;
}
