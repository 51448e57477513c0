import type { CanActivate, InjectionToken, Type } from '@nestjs/common';
import type { McpServer, ServerNotifier, ServerOptions } from '@modelcontextprotocol/server';
import type { TaskNotifier } from '../notify/task-notifier.js';
import type { PrincipalResolver } from '../principal.js';
import type { TaskStore } from '../store/task-store.js';
import type { CancellationMode } from '../task.js';

/*
 * The shapes of TasksModule's configuration: the options (`forRoot` / the `forRootAsync` factory),
 * the registration extras, and TasksConfig, what tasks.config.ts resolves the options into.
 */

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
   * Upper bound for any TTL (a 2025-11-25 client's `task.ttl`, a tool's `ttlMs`, TasksService's):
   * a longer or unlimited request gets `maxTtlMs`, and so does the default TTL; the created task
   * shows the TTL it got. Default 7 days (604,800,000). `null`: no cap but a built-in ceiling of
   * 100 years (a longer TTL gets that), and an unlimited request stays unlimited. An explicit
   * `defaultTtlMs` above it fails the boot.
   */
  maxTtlMs?: number | null;
  /** How many tasks the store may hold. Default 10,000; `null` = unlimited. */
  maxRows?: number | null;
  /**
   * How many tasks one owner (principal and tenant) may keep. At the limit the owner's finished
   * tasks make room (the one that expires first is deleted); when all of them still run or wait
   * for input, a new call is refused with -32603 "Task quota reached (maxTasksPerOwner 100)",
   * `data: { limit: "maxTasksPerOwner", max }`. Every anonymous caller is one owner (`null`), so
   * they share one quota. Default 100; `null` = unlimited.
   */
  maxTasksPerOwner?: number | null;
  /**
   * The most a task keeps from clients and tools, in bytes of JSON (UTF-8): what it keeps of its
   * call, its input requests and answers, its result or error and its status message, together
   * (the fields every task has are not counted). A `tasks/update`
   * (or 2025 input answer) beyond it is -32602 naming the limit and changes nothing; a tool result
   * or error beyond it fails the task with -32603 "Internal error" (the reason, with the tool's
   * name, is logged). Default 1 MiB.
   */
  maxTaskBytes?: number;
  /** The janitor that removes expired tasks; `false` turns it off. */
  janitor?: TasksJanitorOptions | false;
  /** Name and version the MCP server reports. Default: this package's. */
  serverInfo?: { name: string; version: string; title?: string };
  /** Who makes a request. Default: `request.user.sub` or `.id` (passport style), else anonymous. */
  principal?: PrincipalResolver;
  /** The request's tenant, when tasks are also separated by tenant. Default: none. */
  tenant?: PrincipalResolver;
  /**
   * Adds the app's own plain tools, resources and prompts to a server the endpoint builds. It
   * runs once per server, not per request: the endpoint reuses a server for later 2026-07-28
   * requests of the same principal and tenant. `changes` announces a change of them to listening
   * clients and retires the servers built so far (`changes.toolsChanged()`; a server's own
   * `sendToolListChanged` reaches no one).
   */
  configure?: (server: McpServer, changes: ServerNotifier) => void;
  /**
   * Options of the SDK's McpServers the endpoint builds, beside the capabilities the module sets:
   * `instructions`, `requestState: { verify }` (to check the `requestState` your plain tools
   * mint, e.g. with the SDK's `createRequestStateCodec`), and the rest of its ServerOptions.
   */
  serverOptions?: TasksServerOptions;
  /**
   * Host names the endpoint answers to (DNS rebinding protection). Default: on a loopback
   * connection only `localhost`, `127.0.0.1` and `[::1]`; elsewhere any. `false`: never checked.
   */
  allowedHosts?: string[] | false;
  /** Origins (host names) a browser may call from. Default as for `allowedHosts`. */
  allowedOrigins?: string[] | false;
  /**
   * The largest request body the endpoint accepts, in bytes (-32600, HTTP 413 beyond). Default
   * 1 MiB. The endpoint reads its own bodies, and those of a rekog route fronted by
   * `TaskHttpTransport` (`nestjs-mcp-tasks/rekog`), so the app's body parser limit does not apply.
   */
  maxBodyBytes?: number;
  /**
   * What the endpoint holds of request bodies still arriving, and for how long. Bodies are read
   * before any guard runs, so these bound what anonymous and slow clients can make it keep.
   */
  bodies?: TasksBodiesOptions;
  /** Listen streams (`subscriptions/listen`). */
  listen?: TasksListenOptions;
  /** Waiting 2025-11-25 `tasks/result` requests. */
  resultWaits?: TasksResultWaitsOptions;
  /**
   * What happens, at shutdown, to tool calls still running in this process once the drain
   * (`shutdown.drainMs`) is over. `'fail'` (default): each task fails with -32603 "The server shut
   * down before the task finished", so no task stays `working` unnoticed. `'leave'`: tasks stay as
   * they are, for a shared store where another instance or a worker takes them over. A queue job
   * still running goes back to its queue either way.
   */
  runningTasksOnShutdown?: 'fail' | 'leave';
  /** The graceful shutdown of this instance (`app.close()`, SIGTERM with shutdown hooks). */
  shutdown?: TasksShutdownOptions;
  /**
   * The lease of this instance, on a store shared between processes (one with leases:
   * RedisTaskStore, PostgresTaskStore): it is renewed every third of `ttlMs`, and when an instance dies with tool
   * calls running in it, another instance fails their tasks with -32603 "The server stopped
   * before the task finished" once its lease has run out. Default `{ ttlMs: 30_000 }` (at least
   * 300); `false` turns it off. A store without leases runs none.
   */
  lease?: TasksLeaseOptions | false;
  /**
   * How long a tool call running in this process rides out an outage of the task store (a
   * restart, a managed failover), in ms. Meanwhile the call goes on: its progress waits in memory
   * (the latest message per task) and is written when the store answers again, its input requests
   * and its result are written with backoff, and its lease is renewed before any other instance
   * may judge it. Past the window the call's signal fires and its task fails with -32603 "Task
   * store unreachable" once the store is back (a result the tool still returns is written
   * instead). Default 120_000 (a managed failover takes 30–120 s); `0`: the first store error
   * stops the call. Startup waits as long for the store's first answer (logging what it tried),
   * then fails the boot.
   */
  storeOutageMs?: number;
  /**
   * Metrics and traces through the OpenTelemetry API package, when the app has it installed (else
   * nothing is recorded). Default: the global meter and tracer providers; `false` turns it off.
   */
  telemetry?: TasksTelemetryOptions | false;
}

/**
 * Where metrics and spans go. Each field takes an OpenTelemetry provider (an SDK's
 * `MeterProvider` / `TracerProvider`); this package names no OpenTelemetry type, so an app
 * without the OpenTelemetry API installed type-checks.
 */
export interface TasksTelemetryOptions {
  /** Default: the global one (`metrics.getMeterProvider()`), read when the module starts. */
  meterProvider?: { getMeter(name: string, version?: string, options?: object): unknown };
  /** Default: the global one (`trace.getTracerProvider()`). */
  tracerProvider?: { getTracer(name: string, version?: string, options?: object): unknown };
  /**
   * Put the task id on each run's span (`mcp.task.id`). Default false: a task id is a capability
   * (it alone drives the task through TasksService, and anonymous callers' tasks answer to it),
   * so it stays out of telemetry unless the app's trace backend is as private as its store.
   */
  recordTaskIds?: boolean;
}

/**
 * What this instance does when the app closes. From the first shutdown hook it takes no new
 * task-tool call (2026-07-28: HTTP 503 with `Retry-After` and a JSON-RPC error, so the client or
 * the load balancer tries another instance; 2025-11-25: the same error on HTTP 200), while
 * `tasks/get`, `tasks/update`, `tasks/cancel` and listen streams go on. Its queue workers take no
 * new job. The calls and jobs running then get `drainMs` to finish; what is still running after it
 * is handed over: jobs go back to their queue, in-process calls end as `runningTasksOnShutdown`
 * says.
 */
export interface TasksShutdownOptions {
  /**
   * How long the running calls may take to finish, in ms; `0` hands them over at once. Default
   * 10 s. Keep it, with a few seconds to spare, under the time the platform waits between SIGTERM
   * and SIGKILL (Kubernetes' `terminationGracePeriodSeconds`, 30 s by default).
   */
  drainMs?: number;
}

export interface TasksLeaseOptions {
  /** How long this instance's lease lasts after each renewal. Default 30 s. */
  ttlMs?: number;
}

export interface TasksListenOptions {
  /** Interval of SSE keepalive comments; `0` turns them off. Default 15 s. */
  keepAliveMs?: number;
  /**
   * Open streams per process; a listen beyond it is refused at once with -32603 "Subscription
   * limit reached (listen.maxStreams 1024)", `data: { limit, max }`. Default 1,024.
   */
  maxStreams?: number;
  /**
   * Open streams per owner (principal and tenant) in this process; a listen beyond it is refused
   * like one beyond `maxStreams`, naming `listen.maxStreamsPerPrincipal`. Default 32. All
   * anonymous callers are one principal: they share these streams.
   */
  maxStreamsPerPrincipal?: number;
  /** Task ids per filter; more is -32602. Default 256. */
  maxTaskIds?: number;
}

/**
 * The endpoint's limits on request bodies while they arrive (it reads them before any guard runs).
 * A refused client gets a JSON-RPC error with `id: null`, code -32000 and the option and its value
 * in the message and `data`, and its connection is closed (`Connection: close`); nothing of its
 * body is kept. A body over `maxBodyBytes` is still HTTP 413 (-32600).
 */
export interface TasksBodiesOptions {
  /**
   * Bytes of unfinished request bodies the endpoint keeps in memory, every client together (each
   * chunk counts its bytes and 512 for its Buffer). A chunk beyond it is refused: HTTP 503 with
   * `Retry-After: 1`, "Server busy: the request bodies being read fill their budget
   * (bodies.maxBytesInFlight 16777216); retry later", `data: { limit, max, retryAfterMs }`. The chunk that completes a
   * body of known length (Content-Length) is never refused for it: it is parsed at once, not
   * kept, so a small request is served while the budget is full. Default 16 MiB, or
   * 4 × `maxBodyBytes` when that is more; at least `maxBodyBytes`.
   */
  maxBytesInFlight?: number;
  /**
   * The same, for the bodies of one client address (the framework's `request.ip`, so the app's
   * trust-proxy setting decides what an address is), refused naming
   * `bodies.maxBytesInFlightPerAddress`. Default 4 MiB, or `maxBodyBytes` when that is more; at
   * least `maxBodyBytes`; `null`: no cap per address (behind a proxy that the app does not
   * trust, every client has the proxy's address).
   */
  maxBytesInFlightPerAddress?: number | null;
  /**
   * The longest a request body may take to arrive, in ms, from the moment the endpoint starts
   * reading it. Past it the client gets HTTP 408, "Request body not received in time
   * (bodies.timeoutMs 10000)", `data: { limit, max }` (413 if the body was already over
   * `maxBodyBytes`). Default 10 s: 1 MiB in that time needs about 100 KiB/s; raise it with
   * `maxBodyBytes` for slow clients.
   */
  timeoutMs?: number;
  /**
   * The app's HTTP server's `headersTimeout` (how long a client may take to send its request
   * headers, for every route; Node answers 408 and closes), set when the module starts if the
   * server's is longer or off, never raised. Node checks it every 30 s
   * (`connectionsCheckingInterval`), so a slow client is cut between it and 30 s later. Default
   * 20 s (Node's own is 60 s); `null` leaves the server's as it is.
   */
  headersTimeoutMs?: number | null;
}

/**
 * How many 2025-11-25 `tasks/result` requests may wait for their task at once in this process. A
 * wait beyond a cap is refused at once with -32603 naming it, e.g. "Result wait limit reached
 * (resultWaits.maxPerPrincipal 32)", `data: { limit, max }`; a task already finished is answered
 * without waiting, so it needs no slot.
 */
export interface TasksResultWaitsOptions {
  /** Waits in the whole process. Default 1,024. */
  max?: number;
  /**
   * Waits per owner (principal and tenant). Default 32. All anonymous callers are one principal:
   * they share these waits.
   */
  maxPerPrincipal?: number;
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
  /**
   * The TaskNotifier. Default: ListenNotifier, which puts each change on this process's listen
   * streams; `null` turns notifications off.
   */
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
  /**
   * The task console: a small web page served by the module that lists every owner's tasks,
   * shows one in detail (with the status changes this instance heard) and cancels it, live. Off
   * by default. Its `guards` (required: your admin rule) run after the app's global guards on
   * every route of the console.
   */
  console?: TasksConsoleOptions;
}

/** The `console` extra: where the task console is served and who may open it. */
export interface TasksConsoleOptions {
  /** The console's path (its page; its assets and API below it). Default `'mcp-tasks'`. */
  path?: string;
  /**
   * Who may use the console, e.g. `[AdminGuard]`: run in order after the app's global guards on
   * every route (page, assets, API, stream). Classes are resolved as for `guards`. Required.
   */
  guards: (Type<CanActivate> | CanActivate)[];
}

/** The options after validation, with every default filled in. */
/** The SDK's ServerOptions, less `capabilities` (the module's; add your own in `configure`). */
export type TasksServerOptions = Omit<ServerOptions, 'capabilities'>;

export interface TasksConfig {
  readonly cancellation: CancellationMode;
  readonly defaultTtlMs: number | null;
  readonly maxTtlMs: number | null;
  readonly maxRows: number | null;
  readonly maxTasksPerOwner: number | null;
  readonly maxTaskBytes: number;
  readonly janitor: Readonly<Required<TasksJanitorOptions>> | false;
  readonly serverInfo: Readonly<{ name: string; version: string; title?: string }>;
  readonly principal: PrincipalResolver;
  readonly tenant: PrincipalResolver | undefined;
  readonly configure: ((server: McpServer, changes: ServerNotifier) => void) | undefined;
  readonly serverOptions: Readonly<TasksServerOptions>;
  readonly allowedHosts: readonly string[] | false | undefined;
  readonly allowedOrigins: readonly string[] | false | undefined;
  readonly maxBodyBytes: number;
  readonly bodies: Readonly<Required<TasksBodiesOptions>>;
  readonly listen: Readonly<Required<TasksListenOptions>>;
  readonly resultWaits: Readonly<Required<TasksResultWaitsOptions>>;
  readonly runningTasksOnShutdown: 'fail' | 'leave';
  readonly shutdown: Readonly<Required<TasksShutdownOptions>>;
  readonly lease: Readonly<Required<TasksLeaseOptions>> | false;
  readonly storeOutageMs: number;
  readonly telemetry: Readonly<TasksTelemetryOptions> | false;
}
