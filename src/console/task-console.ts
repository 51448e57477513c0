import type { ServerResponse } from 'node:http';
import {
  BadRequestException,
  type BeforeApplicationShutdown,
  HttpException,
  Inject,
  Injectable,
  type OnModuleInit,
} from '@nestjs/common';
import { TaskError } from '../errors.js';
import { taskErrorBody, taskErrorStatus } from '../http/task-error.filter.js';
import type { TasksConfig } from '../interfaces/tasks-module-options.interface.js';
import { ListenFeed } from '../notify/listen-feed.js';
import type { TaskListPage } from '../store/task-store.js';
import { type TaskOwner, type TaskRecord, type TaskState, expiresAt, isTerminal } from '../task.js';
import { TASK_STATES } from '../task/rules.js';
import { MAX_STREAM_BUFFERED_BYTES, TASKS_CONFIG } from '../tasks.constants.js';
import { MAX_LIST_LIMIT } from '../tasks.listing.js';
import { TasksService } from '../tasks.service.js';
import { type ConsoleFiles, escapeHtml, readConsoleFiles } from './console-assets.js';
import { ConsoleHistory, type HeardChange } from './console-history.js';

/** A task as the console lists it (and as its stream announces a change). */
export interface ConsoleTask {
  taskId: string;
  toolName: string | null;
  owner: { principal: string | null; tenant: string | null };
  status: TaskState;
  statusMessage: string | null;
  /** ISO 8601. */
  createdAt: string;
  lastUpdatedAt: string;
  ttlMs: number | null;
  version: number;
}

/** A task as the console's detail shows it. */
export interface ConsoleTaskDetail extends ConsoleTask {
  expiresAt: string | null;
  pollIntervalMs: number | null;
  cancelRequested: boolean;
  /** The input requests outstanding now, by key (while `input_required`). */
  inputRequests: Record<string, unknown> | null;
  result: unknown;
  error: unknown;
  /** Whether the tool kept its arguments (`keepArguments`); they are in `arguments`. */
  argumentsKept: boolean;
  arguments: unknown;
  /** The changes this instance heard, oldest first: not the task's whole history. */
  history: (Omit<HeardChange, 'at'> & { at: string })[];
}

export interface ConsolePage {
  tasks: ConsoleTask[];
  nextCursor?: string;
}

/** The filters of `GET api/tasks`, checked. */
export interface ConsoleQuery {
  status?: TaskState[];
  tool?: string;
  owner?: TaskOwner;
  cursor?: string;
  limit: number;
}

const QUERY_KEYS: ReadonlySet<string> = new Set([
  'status',
  'tool',
  'owner',
  'tenant',
  'cursor',
  'limit',
]);
const DEFAULT_LIMIT = 50;
/** Console streams open at once in this process; beyond, 503. */
export const MAX_CONSOLE_STREAMS = 64;
/** A stream whose unsent output grows beyond this is closed (a client that does not read). */
const KEEPALIVE_FALLBACK_MS = 15_000;

const SSE_HEADERS = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-store',
  'x-content-type-options': 'nosniff',
  'x-accel-buffering': 'no',
  connection: 'keep-alive',
};

/**
 * What the task console serves: its files, the listing across owners (or one owner's), a task's
 * detail, cancel, and the change stream. It hears every change on this process's ListenFeed (what
 * the notifier delivers: this process's changes, and other instances' with a notifier that shares
 * them: for every task while one of its change streams is open, else for the tasks watched on
 * this instance) and keeps a short history of them per task. It exists only when the console is on.
 */
@Injectable()
export class TaskConsole implements OnModuleInit, BeforeApplicationShutdown {
  readonly history = new ConsoleHistory();
  private files!: ConsoleFiles;
  private readonly streams = new Set<ServerResponse>();
  private keepAlive: NodeJS.Timeout | undefined;
  private stopListening: (() => void) | undefined;
  /** Releases the every-task hearing the open change streams hold. */
  private hearingAll: (() => void) | undefined;

  constructor(
    private readonly tasks: TasksService,
    private readonly feed: ListenFeed,
    @Inject(TASKS_CONFIG) private readonly config: TasksConfig,
  ) {}

  onModuleInit(): void {
    this.files = readConsoleFiles();
    this.stopListening = this.feed.listenAll((record) => this.hear(record));
  }

  /** The page, its files named under `base` (the page's own path as requested). */
  page(base: string): string {
    return this.files.html.replaceAll('{{BASE}}', escapeHtml(base));
  }

  /** One of the page script's modules by file name (CONSOLE_SCRIPTS); undefined for another. */
  script(name: string): string | undefined {
    return this.files.scripts.get(name);
  }

  get styles(): string {
    return this.files.css;
  }

  /** Whether the store lists every owner's tasks; without, the listing needs an owner. */
  get listsEveryOwner(): boolean {
    return this.tasks.canListAll;
  }

  async list(query: ConsoleQuery): Promise<ConsolePage> {
    const status = query.status?.length === 1 ? query.status[0] : query.status;
    const paging = {
      limit: query.limit,
      ...(query.cursor !== undefined && { cursor: query.cursor }),
      ...(status !== undefined && { status }),
    };
    let page: TaskListPage;
    if (query.owner !== undefined) {
      if (!this.tasks.canList) throw badRequest('The task store cannot list tasks');
      page = await taskErrors(this.tasks.list(query.owner, paging));
      if (query.tool !== undefined) {
        page = { ...page, tasks: page.tasks.filter((task) => task.toolName === query.tool) };
      }
    } else {
      if (!this.tasks.canListAll) {
        throw new BadRequestException({
          statusCode: 400,
          error: 'Bad Request',
          message:
            "This store cannot list every owner's tasks: filter by owner (and tenant, if any)",
          ownerRequired: true,
        });
      }
      page = await taskErrors(
        this.tasks.listAll({
          ...paging,
          ...(query.tool !== undefined && { toolName: query.tool }),
        }),
      );
    }
    return {
      tasks: page.tasks.map(summary),
      ...(page.nextCursor !== undefined && { nextCursor: page.nextCursor }),
    };
  }

  async detail(taskId: string): Promise<ConsoleTaskDetail> {
    return this.detailOf(await taskErrors(this.tasks.status(taskId)));
  }

  /** Cancels the task as its owner would; a finished task is answered as it is. */
  async cancel(taskId: string): Promise<ConsoleTaskDetail> {
    const record = await taskErrors(this.tasks.status(taskId));
    if (isTerminal(record.status)) return this.detailOf(record);
    return this.detailOf(await taskErrors(this.tasks.cancel(taskId, record.owner)));
  }

  /** Opens a change stream on `res`: one `task` event per change heard, keepalive comments. */
  openStream(res: ServerResponse): void {
    if (this.streams.size >= MAX_CONSOLE_STREAMS) {
      res.writeHead(503, { 'content-type': 'application/json', 'cache-control': 'no-store' });
      res.end(
        JSON.stringify({
          statusCode: 503,
          error: 'Service Unavailable',
          message: 'Too many console streams are open',
        }),
      );
      return;
    }
    res.writeHead(200, SSE_HEADERS);
    res.write('retry: 3000\n: connected\n\n');
    this.streams.add(res);
    // While a stream is open, this instance hears every task's changes from the others too.
    this.hearingAll ??= this.feed.hearAll().release;
    res.on('close', () => this.drop(res));
    this.startKeepAlive();
  }

  /** Streams open now (for leak checks). */
  get openStreams(): number {
    return this.streams.size;
  }

  beforeApplicationShutdown(): void {
    this.stopListening?.();
    this.stopListening = undefined;
    this.stopKeepAlive();
    for (const res of [...this.streams]) res.end();
    this.streams.clear();
    this.stopHearingAll();
  }

  private hear(record: TaskRecord): void {
    this.history.hear(record);
    if (this.streams.size === 0) return;
    const frame = `event: task\ndata: ${JSON.stringify(summary(record))}\n\n`;
    for (const res of this.streams) this.send(res, frame);
  }

  private send(res: ServerResponse, frame: string): void {
    if (res.writableEnded || res.destroyed) return;
    if (res.writableLength > MAX_STREAM_BUFFERED_BYTES) {
      res.destroy();
      return;
    }
    res.write(frame);
  }

  private drop(res: ServerResponse): void {
    this.streams.delete(res);
    if (this.streams.size > 0) return;
    this.stopKeepAlive();
    this.stopHearingAll();
  }

  private stopHearingAll(): void {
    this.hearingAll?.();
    this.hearingAll = undefined;
  }

  private startKeepAlive(): void {
    if (this.keepAlive !== undefined) return;
    const every = this.config.listen.keepAliveMs || KEEPALIVE_FALLBACK_MS;
    this.keepAlive = setInterval(() => {
      for (const res of this.streams) this.send(res, ': keepalive\n\n');
    }, every);
    this.keepAlive.unref();
  }

  private stopKeepAlive(): void {
    if (this.keepAlive !== undefined) clearInterval(this.keepAlive);
    this.keepAlive = undefined;
  }

  private detailOf(record: TaskRecord): ConsoleTaskDetail {
    const expiry = expiresAt(record);
    const argumentsKept = Object.hasOwn(record, 'arguments');
    return {
      ...summary(record),
      expiresAt: expiry === null ? null : isoDateOrNull(expiry),
      pollIntervalMs: record.pollIntervalMs ?? null,
      cancelRequested: record.cancelRequested === true,
      inputRequests: record.inputRequests ? { ...record.inputRequests } : null,
      result: record.result ?? null,
      error: record.error ?? null,
      argumentsKept,
      arguments: argumentsKept ? record.arguments : null,
      history: this.history
        .of(record.taskId)
        .map((change) => ({ ...change, at: new Date(change.at).toISOString() })),
    };
  }
}

/**
 * An instant as ISO 8601, or `null` past the range of a Date, where `toISOString` throws. New
 * tasks never get there (TTLs stop at TTL_CEILING_MS), but a task stored before that ceiling (a
 * 2025-11-25 `task.ttl` of 9e15 ms, say) still can: it expires after year 275760, which the
 * console shows as never, as it shows a task without a TTL.
 */
function isoDateOrNull(ms: number): string | null {
  const date = new Date(ms);
  return Number.isNaN(date.getTime()) ? null : date.toISOString();
}

/** The listing's view of a record. */
export function summary(record: TaskRecord): ConsoleTask {
  return {
    taskId: record.taskId,
    toolName: record.toolName ?? null,
    owner: { principal: record.owner.principal, tenant: record.owner.tenant ?? null },
    status: record.status,
    statusMessage: record.statusMessage ?? null,
    createdAt: new Date(record.createdAt).toISOString(),
    lastUpdatedAt: new Date(record.lastUpdatedAt).toISOString(),
    ttlMs: record.ttlMs,
    version: record.version,
  };
}

/**
 * The query of `GET api/tasks`, checked: `status` (a state, or states separated by commas),
 * `tool`, `owner` (a principal) with `tenant`, `cursor`, `limit` (1-100, default 50). Empty
 * values count as absent. Anything else is a 400 naming the parameter.
 */
export function parseListQuery(query: Record<string, unknown>): ConsoleQuery {
  const parsed: ConsoleQuery = { limit: DEFAULT_LIMIT };
  for (const key of Object.keys(query)) {
    if (!QUERY_KEYS.has(key)) {
      throw badRequest(
        `Unknown query parameter ${JSON.stringify(key)}: use status, tool, owner, tenant, cursor, limit`,
      );
    }
  }
  const one = (key: string, maxLength: number): string | undefined => {
    const value = query[key];
    if (value === undefined || value === '') return undefined;
    if (typeof value !== 'string') throw badRequest(`${key} must be given once, as a string`);
    if (value.length > maxLength) throw badRequest(`${key} is longer than ${maxLength} characters`);
    return value;
  };
  const status = one('status', 200);
  if (status !== undefined) {
    const states = status.split(',').map((state) => state.trim());
    for (const state of states) {
      if (!TASK_STATES.includes(state as TaskState)) {
        throw badRequest(
          `status must be one of ${TASK_STATES.join(', ')} (or several, separated by commas), got ${JSON.stringify(state)}`,
        );
      }
    }
    parsed.status = [...new Set(states as TaskState[])];
  }
  const tool = one('tool', 200);
  if (tool !== undefined) parsed.tool = tool;
  const owner = one('owner', 500);
  const tenant = one('tenant', 500);
  if (tenant !== undefined && owner === undefined) {
    throw badRequest('tenant filters an owner: give owner too');
  }
  if (owner !== undefined) parsed.owner = { principal: owner, tenant: tenant ?? null };
  const cursor = one('cursor', 1_000);
  if (cursor !== undefined) parsed.cursor = cursor;
  const limit = one('limit', 10);
  if (limit !== undefined) {
    const value = /^\d+$/.test(limit) ? Number(limit) : NaN;
    if (!(value >= 1 && value <= MAX_LIST_LIMIT)) {
      throw badRequest(
        `limit must be an integer from 1 to ${MAX_LIST_LIMIT}, got ${JSON.stringify(limit)}`,
      );
    }
    parsed.limit = value;
  }
  return parsed;
}

function badRequest(message: string): BadRequestException {
  return new BadRequestException({ statusCode: 400, error: 'Bad Request', message });
}

/** A TaskError as the HTTP answer TaskErrorFilter would give (404 for an unknown task...). */
async function taskErrors<T>(pending: Promise<T>): Promise<T> {
  try {
    return await pending;
  } catch (error) {
    if (error instanceof TaskError) {
      throw new HttpException(taskErrorBody(error), taskErrorStatus(error));
    }
    throw error;
  }
}
