import type { ServerResponse } from 'node:http';
import { type BeforeApplicationShutdown, Inject, Injectable, Logger } from '@nestjs/common';
import {
  ProtocolErrorCode,
  SUBSCRIPTION_ID_META_KEY,
  type ServerCapabilities,
  type ServerEvent,
  type ServerEventBus,
} from '@modelcontextprotocol/server';
import type { JsonRpcErrorObject } from '../errors.js';
import { ListenFeed } from '../notify/listen-feed.js';
import {
  deliveryMark,
  isNews,
  isOwnedBy,
  isPlainObject,
  type TaskOwner,
  type TaskRecord,
  toWire,
} from '../task.js';
import { MAX_STREAM_BUFFERED_BYTES, TASKS_CONFIG } from '../tasks.constants.js';
import type { TasksConfig } from '../interfaces/tasks-module-options.interface.js';
import { TasksService } from '../tasks.service.js';
import {
  declaresTasks,
  missingTasksCapability,
  completeResult,
  type RequestId,
  resultMeta,
  sendError,
  sendFailure,
} from './json-rpc.js';
import { isRefusal, type OwnerSlot, OwnerSlots } from '../owner-slots.js';

/** The filter a listen request asks for, and the part of it the server honours. */
export interface ListenFilter {
  taskIds?: string[];
  toolsListChanged?: boolean;
  promptsListChanged?: boolean;
  resourcesListChanged?: boolean;
  resourceSubscriptions?: string[];
}

const SSE_HEADERS = {
  'content-type': 'text/event-stream',
  'cache-control': 'no-cache, no-transform',
  connection: 'keep-alive',
  'x-accel-buffering': 'no',
};

const frame = (json: string): string => `event: message\ndata: ${json}\n\n`;

/** One open `subscriptions/listen` stream. */
class ListenStream {
  closed = false;
  /** Set once the acknowledgement is written: changes heard before it are not sent. */
  live = false;
  /** The mark of the last state delivered per task (see deliveryMark): a change heard twice is sent once. */
  readonly delivered = new Map<string, number>();
  /** `,"_meta":{...}}` closing every notification's params: the subscription id, serialized once. */
  readonly metaTail: string;

  constructor(
    readonly id: RequestId,
    readonly owner: TaskOwner,
    readonly filter: ListenFilter,
    readonly res: ServerResponse,
    /** The stream's place under `listen.maxStreams` and `maxStreamsPerPrincipal`. */
    readonly slot: OwnerSlot,
  ) {
    this.metaTail = `,"_meta":${JSON.stringify({ [SUBSCRIPTION_ID_META_KEY]: id })}}`;
  }

  write(data: string): void {
    if (this.closed) return;
    this.res.write(data);
    if (this.res.writableLength > MAX_STREAM_BUFFERED_BYTES) this.res.destroy();
  }
}

interface Watch {
  readonly streams: Set<ListenStream>;
  readonly unsubscribe: () => void;
}

function stringArray(value: unknown): value is string[] {
  return Array.isArray(value) && value.every((item) => typeof item === 'string');
}

/**
 * Serves every `subscriptions/listen` as an SSE response to its POST (the SDK's own router drops
 * `taskIds`, so all listens are served here and the core filters behave as the SDK's do).
 *
 * A stream only ever hears about tasks its principal owns, checked twice:
 * 1. when the filter is honoured, the requested ids are narrowed to the caller's own tasks,
 *    through TasksService (unknown, expired and foreign ids are dropped alike, so the
 *    acknowledgement reveals nothing about other principals' tasks; see ownTaskIds there; a
 *    store fault is answered -32603 "Task store unavailable" in band, as by every method);
 * 2. when a change is delivered, its record's owner is compared with the stream's again
 *    (isOwnedBy), so a change that reaches the feed for a watched id still goes to its owner only.
 *
 * - the first message acknowledges the honoured filter, `taskIds` narrowed as above;
 * - every change of a watched task arrives as `notifications/tasks` with the full DetailedTask;
 * - `toolsListChanged` and friends are honoured where the server advertises them and fed from the
 *   SDK handler's event bus;
 * - every message carries the subscription id (the listen request's id) in `_meta`;
 * - streams are indexed by task id, so a change costs O(streams watching that task);
 * - streams are capped per process (`listen.maxStreams`) and per owner
 *   (`listen.maxStreamsPerPrincipal`): the slot is taken before the owner check awaits the
 *   store, so concurrent listens cannot pass the caps, and given back however the listen ends;
 * - at shutdown every stream ends with the listen result, so `app.close()` never waits on them.
 */
@Injectable()
export class ListenHandler implements BeforeApplicationShutdown {
  private readonly logger = new Logger('ListenHandler');
  private readonly streams = new Set<ListenStream>();
  private readonly slots: OwnerSlots;
  private shuttingDown = false;
  private readonly byTask = new Map<string, Watch>();
  private capabilities: ServerCapabilities = {};
  private unsubscribeBus: (() => void) | undefined;
  private keepAlive: NodeJS.Timeout | undefined;
  private readonly meta: Record<string, unknown>;

  constructor(
    @Inject(TASKS_CONFIG) private readonly config: TasksConfig,
    private readonly tasks: TasksService,
    private readonly feed: ListenFeed,
  ) {
    this.meta = resultMeta(config.serverInfo);
    this.slots = new OwnerSlots({
      refusal: 'Subscription limit reached',
      max: config.listen.maxStreams,
      maxOption: 'listen.maxStreams',
      maxPerPrincipal: config.listen.maxStreamsPerPrincipal,
      maxPerPrincipalOption: 'listen.maxStreamsPerPrincipal',
    });
  }

  /** How many streams are open. */
  get size(): number {
    return this.streams.size;
  }

  /** How many stream slots are held: open streams and listens still checking their filter. */
  get slotsHeld(): number {
    return this.slots.held;
  }

  /** How many task ids have watchers (for leak checks). */
  get watchedTasks(): number {
    return this.byTask.size;
  }

  /** Connects the handler to the SDK handler's change bus and the server's advertised capabilities. */
  attach(bus: ServerEventBus, capabilities: ServerCapabilities): void {
    this.capabilities = capabilities;
    this.unsubscribeBus?.();
    this.unsubscribeBus = bus.subscribe((event) => this.onServerEvent(event));
    const every = this.config.listen.keepAliveMs;
    if (every > 0 && this.keepAlive === undefined) {
      this.keepAlive = setInterval(() => {
        for (const stream of this.streams) stream.write(': keepalive\n\n');
      }, every);
      this.keepAlive.unref();
    }
  }

  /**
   * What the MCP server in use advertises, when another handler than the endpoint's serves the
   * rest (the `/rekog` entry): its `listChanged` flags decide which list filters are honoured.
   */
  advertise(capabilities: ServerCapabilities): void {
    this.capabilities = capabilities;
  }

  /** Serves one listen request: an error answer, or an SSE stream that stays open. */
  async open(res: ServerResponse, id: RequestId, params: unknown, owner: TaskOwner): Promise<void> {
    const requested = this.parse(params);
    if ('code' in requested) {
      return sendError(res, id, requested);
    }
    // Taken before anything is awaited: a burst of listens is counted as it arrives.
    const slot = this.slots.take(owner);
    if (isRefusal(slot)) return sendError(res, id, slot);
    let honored: ListenFilter;
    try {
      honored = await this.honor(requested, owner);
    } catch (error) {
      // A store fault is TasksService's "Task store unavailable", answered in band.
      slot.release();
      return sendFailure(res, id, error, this.logger, 'subscriptions/listen');
    }
    // The owner check ran over the store: the client may have gone meanwhile.
    if (res.destroyed) return slot.release();
    const stream = new ListenStream(id, owner, honored, res, slot);
    const nothingToSend =
      Object.keys(honored).length === 0 ||
      (Object.keys(honored).length === 1 && honored.taskIds?.length === 0);
    const taskIds = honored.taskIds ?? [];
    if (!nothingToSend && !this.shuttingDown && taskIds.length > 0) {
      for (const taskId of taskIds) this.watch(taskId, stream);
      // With a notifier for several instances, the acknowledgement waits until the changes other
      // instances write to these tasks reach this one: every change after it is heard.
      const hearing = taskIds.map((taskId) => this.feed.watching(taskId));
      if (hearing.some((ready) => ready !== undefined)) await Promise.all(hearing);
      if (res.destroyed) return this.drop(stream);
    }
    res.writeHead(200, SSE_HEADERS);
    stream.write(
      frame(
        JSON.stringify({
          jsonrpc: '2.0',
          method: 'notifications/subscriptions/acknowledged',
          params: { notifications: honored, _meta: { [SUBSCRIPTION_ID_META_KEY]: id } },
        }),
      ),
    );
    stream.live = true;
    // A listen that checked its filter while the app shut down ends as the open streams did.
    if (nothingToSend || this.shuttingDown) return this.end(stream);
    this.streams.add(stream);
    res.on('close', () => this.drop(stream));
  }

  /**
   * Ends every stream (with the listen result) and stops the keepalives. Not earlier: streams go
   * on through the task-tool runner's drain (its first shutdown hook), where the calls they watch
   * may still finish.
   */
  beforeApplicationShutdown(): void {
    this.shuttingDown = true;
    for (const stream of [...this.streams]) this.end(stream);
    this.unsubscribeBus?.();
    this.unsubscribeBus = undefined;
    if (this.keepAlive !== undefined) clearInterval(this.keepAlive);
    this.keepAlive = undefined;
  }

  // ----- filters --------------------------------------------------------------------------------

  private parse(params: unknown): ListenFilter | JsonRpcErrorObject {
    const notifications = isPlainObject(params) ? params.notifications : undefined;
    const invalid = (detail: string): JsonRpcErrorObject => ({
      code: ProtocolErrorCode.InvalidParams,
      message: `Invalid params: ${detail}`,
    });
    if (!isPlainObject(notifications)) {
      return invalid("'notifications' is required and must be a valid SubscriptionFilter");
    }
    const filter: ListenFilter = {};
    for (const key of ['toolsListChanged', 'promptsListChanged', 'resourcesListChanged'] as const) {
      const flag = notifications[key];
      if (flag === undefined) continue;
      if (typeof flag !== 'boolean') return invalid(`notifications.${key} must be a boolean`);
      filter[key] = flag;
    }
    const { resourceSubscriptions, taskIds } = notifications;
    if (resourceSubscriptions !== undefined) {
      if (!stringArray(resourceSubscriptions)) {
        return invalid('notifications.resourceSubscriptions must be an array of strings');
      }
      filter.resourceSubscriptions = resourceSubscriptions;
    }
    if (taskIds !== undefined) {
      if (!stringArray(taskIds))
        return invalid('notifications.taskIds must be an array of strings');
      if (!declaresTasks(params))
        return missingTasksCapability('subscriptions/listen with taskIds');
      if (taskIds.length > this.config.listen.maxTaskIds) {
        return invalid(
          `notifications.taskIds may name at most ${this.config.listen.maxTaskIds} tasks`,
        );
      }
      filter.taskIds = taskIds;
    }
    return filter;
  }

  /** The part of the filter served: the core flags the server advertises, the caller's own tasks. */
  private async honor(requested: ListenFilter, owner: TaskOwner): Promise<ListenFilter> {
    const { tools, prompts, resources } = this.capabilities;
    const honored: ListenFilter = {};
    if (requested.toolsListChanged && tools?.listChanged) honored.toolsListChanged = true;
    if (requested.promptsListChanged && prompts?.listChanged) honored.promptsListChanged = true;
    if (requested.resourcesListChanged && resources?.listChanged)
      honored.resourcesListChanged = true;
    if (requested.resourceSubscriptions?.length && resources?.subscribe) {
      honored.resourceSubscriptions = [...requested.resourceSubscriptions];
    }
    if (requested.taskIds !== undefined) {
      honored.taskIds = await this.tasks.ownTaskIds(requested.taskIds, owner);
    }
    return honored;
  }

  // ----- delivery -------------------------------------------------------------------------------

  private watch(taskId: string, stream: ListenStream): void {
    let watch = this.byTask.get(taskId);
    if (watch === undefined) {
      const streams = new Set<ListenStream>();
      watch = {
        streams,
        unsubscribe: this.feed.subscribe(taskId, (record) => this.deliver(streams, record)),
      };
      this.byTask.set(taskId, watch);
    }
    watch.streams.add(stream);
  }

  private deliver(streams: ReadonlySet<ListenStream>, record: TaskRecord): void {
    let head: string | undefined;
    for (const stream of streams) {
      if (!stream.live || !isOwnedBy(record, stream.owner)) continue;
      if (!isNews(record, stream.delivered.get(record.taskId))) continue;
      stream.delivered.set(record.taskId, deliveryMark(record));
      head ??= `{"jsonrpc":"2.0","method":"notifications/tasks","params":${JSON.stringify(toWire(record)).slice(0, -1)}`;
      stream.write(frame(`${head}${stream.metaTail}}`));
    }
  }

  private onServerEvent(event: ServerEvent): void {
    const wanted = (filter: ListenFilter): boolean => {
      switch (event.kind) {
        case 'tools_list_changed':
          return filter.toolsListChanged === true;
        case 'prompts_list_changed':
          return filter.promptsListChanged === true;
        case 'resources_list_changed':
          return filter.resourcesListChanged === true;
        case 'resource_updated':
          return filter.resourceSubscriptions?.includes(event.uri) === true;
      }
    };
    const method =
      event.kind === 'resource_updated'
        ? 'notifications/resources/updated'
        : `notifications/${event.kind.replace('_list_changed', '')}/list_changed`;
    for (const stream of this.streams) {
      if (!wanted(stream.filter)) continue;
      const params = {
        ...event.params,
        ...(event.kind === 'resource_updated' && { uri: event.uri }),
        _meta: {
          ...(event.params?._meta as object | undefined),
          [SUBSCRIPTION_ID_META_KEY]: stream.id,
        },
      };
      stream.write(frame(JSON.stringify({ jsonrpc: '2.0', method, params })));
    }
  }

  // ----- teardown -------------------------------------------------------------------------------

  /** Ends a stream gracefully with the listen result carrying the subscription id. */
  private end(stream: ListenStream): void {
    stream.write(
      frame(
        JSON.stringify({
          jsonrpc: '2.0',
          id: stream.id,
          result: completeResult({ [SUBSCRIPTION_ID_META_KEY]: stream.id, ...this.meta }),
        }),
      ),
    );
    this.drop(stream);
    stream.res.end();
  }

  /** Forgets a stream (closed by either side) and gives its slot back; idempotent. */
  private drop(stream: ListenStream): void {
    if (stream.closed) return;
    stream.closed = true;
    stream.slot.release();
    this.streams.delete(stream);
    for (const taskId of stream.filter.taskIds ?? []) {
      const watch = this.byTask.get(taskId);
      if (watch === undefined) continue;
      watch.streams.delete(stream);
      if (watch.streams.size === 0) {
        watch.unsubscribe();
        this.byTask.delete(taskId);
      }
    }
  }
}
