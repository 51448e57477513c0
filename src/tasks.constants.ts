/** The extension identifier, as advertised in capabilities and declared by clients. */
export const TASKS_EXTENSION_ID = 'io.modelcontextprotocol/tasks';

/** One hour: the lifetime of a task when neither the tool nor the caller asks for another. */
export const DEFAULT_TTL_MS = 3_600_000;
/** Seven days: the longest TTL a task gets unless `maxTtlMs` is configured otherwise. */
export const DEFAULT_MAX_TTL_MS = 604_800_000;
/**
 * The longest TTL any task gets, whatever the options (`maxTtlMs: null` included): 100 years.
 * A TTL can be a client's number: without a ceiling `createdAt + ttlMs` could leave the range of
 * a Date (year 275760: the expiry could no longer be written as an ISO date) and the range where
 * doubles are exact integers (what Redis's PEXPIREAT and Lua's numbers need). Capped here, every
 * expiry is an exact integer far inside both, and the created task shows the TTL it got.
 */
export const TTL_CEILING_MS = 3_155_760_000_000;
/** The largest number of tasks a store holds unless configured otherwise. */
export const DEFAULT_MAX_ROWS = 10_000;
/**
 * The largest task record unless configured otherwise: 1 MiB of JSON, what a request body may
 * carry, so one answer or result of any size a client can send fits.
 */
export const DEFAULT_MAX_TASK_BYTES = 1_048_576;
/**
 * The most tasks one owner keeps unless configured otherwise. With DEFAULT_MAX_TASK_BYTES it
 * bounds one owner's share of a store at 100 MiB, under the in-memory store's 256 MiB in all.
 */
export const DEFAULT_MAX_TASKS_PER_OWNER = 100;
export const DEFAULT_JANITOR_INTERVAL_MS = 30_000;
/** How long a finished task without a TTL is kept before the janitor removes it. */
export const DEFAULT_TERMINAL_TTL_MS = 3_600_000;
/** Compare-and-set attempts before a transition gives up (only other processes can cause conflicts). */
export const MAX_TRANSITION_ATTEMPTS = 64;

/** How long an instance's lease lasts unless configured otherwise (see TasksLease). */
export const DEFAULT_LEASE_TTL_MS = 30_000;
/** How long a running tool call rides out a store outage by default (option `storeOutageMs`). */
export const DEFAULT_STORE_OUTAGE_MS = 120_000;
/**
 * The shortest lease allowed. Tests use leases of a few hundred milliseconds; below this a
 * renewal delayed by a busy event loop would let a live instance's lease run out.
 */
export const MIN_LEASE_TTL_MS = 300;

/** How long calls running at shutdown may take to finish unless configured otherwise. */
export const DEFAULT_SHUTDOWN_DRAIN_MS = 10_000;
/** The longest drain: what a Node timer can wait (2^31 - 1 ms, about 24.8 days). */
export const MAX_SHUTDOWN_DRAIN_MS = 2_147_483_647;

/** Name of the janitor's interval in the SchedulerRegistry. */
export const JANITOR_INTERVAL_NAME = 'nestjs-mcp-tasks:janitor';

/** Injection token of the validated, defaults-merged configuration. */
export const TASKS_CONFIG = Symbol('nestjs-mcp-tasks:config');

/** Metadata key of `@TaskTool()`. */
export const TASK_TOOL_METADATA = 'nestjs-mcp-tasks:task-tool';
/** The MCP endpoint path unless configured otherwise. */
export const DEFAULT_MCP_PATH = 'mcp';
/** How often an in-process waiter re-reads its task, for changes made by other processes. */
export const WATCH_POLL_MS = 1_000;
/** The safety re-read of a waiting task when a notifier delivers other processes' changes. */
export const SAFETY_REREAD_MS = 30_000;
/** Injection token of the endpoint's path as the controller was given it (`false`: no endpoint). */
export const MCP_PATH = Symbol('nestjs-mcp-tasks:path');
/** The largest request body the endpoint reads unless configured otherwise: 1 MiB. */
export const DEFAULT_MAX_BODY_BYTES = 1_048_576;
/**
 * What the endpoint holds of request bodies still arriving, every client together, unless
 * configured otherwise (`bodies.maxBytesInFlight`): 16 MiB, or 4 × `maxBodyBytes` when larger.
 */
export const DEFAULT_MAX_BODY_BYTES_IN_FLIGHT = 16_777_216;
/** The same per client address (`bodies.maxBytesInFlightPerAddress`): 4 MiB, or `maxBodyBytes`. */
export const DEFAULT_MAX_BODY_BYTES_IN_FLIGHT_PER_ADDRESS = 4_194_304;
/** The longest a request body may take to arrive unless configured otherwise (`bodies.timeoutMs`). */
export const DEFAULT_BODY_TIMEOUT_MS = 10_000;
/**
 * The HTTP server's `headersTimeout` the module sets when the server's is longer (or off), unless
 * configured otherwise (`bodies.headersTimeoutMs`): Node's own default is 60 s.
 */
export const DEFAULT_HEADERS_TIMEOUT_MS = 20_000;
/** When a client refused for a full body budget may send again (its Retry-After). */
export const BODY_BUDGET_RETRY_AFTER_MS = 1_000;
/**
 * What each chunk of a body kept in memory is charged beyond its bytes: a Buffer's own objects. A
 * body trickled a few bytes at a time holds far more than its bytes; this counts that.
 */
export const BODY_CHUNK_OVERHEAD_BYTES = 512;
export const DEFAULT_KEEPALIVE_MS = 15_000;
export const DEFAULT_MAX_STREAMS = 1_024;
/** Open listen streams one principal may hold in a process unless configured otherwise. */
export const DEFAULT_MAX_STREAMS_PER_PRINCIPAL = 32;
/** Waiting 2025-11-25 `tasks/result` requests per process unless configured otherwise. */
export const DEFAULT_MAX_RESULT_WAITS = 1_024;
/** Waiting `tasks/result` requests one principal may hold in a process unless configured otherwise. */
export const DEFAULT_MAX_RESULT_WAITS_PER_PRINCIPAL = 32;
export const DEFAULT_MAX_TASK_IDS = 256;
/**
 * The longest JSON-RPC request id (a string id, in UTF-16 code units) any route takes: a longer
 * one is -32600, HTTP 400. Ids are echoed in answers and kept by long-lived requests (a listen
 * stream writes its id into every message), so they are bounded apart from the body.
 */
export const MAX_REQUEST_ID_LENGTH = 256;
/**
 * The longest task id a client may name. The package's ids are 43 characters; a longer id (or
 * one with a NUL character) names no task and is answered as an unknown id, without a store read.
 */
export const MAX_TASK_ID_LENGTH = 256;
/**
 * A listen stream (or a task console stream) whose client reads too slowly to drain this much
 * buffered output is closed: 1 MiB.
 */
export const MAX_STREAM_BUFFERED_BYTES = 1_048_576;
/** The bytes of records kept while the notifier fails, to send again (see TaskAnnouncer). */
export const MAX_UNSENT_CHANGE_BYTES = 32 * 1_048_576;
/** The bytes of records kept of writes whose answer was lost, to confirm (see TaskWriter). */
export const MAX_UNCONFIRMED_WRITE_BYTES = 32 * 1_048_576;
/** While the store or the notifier fails, how often the outage is logged again. */
export const STORE_FAULT_LOG_MS = 60_000;
