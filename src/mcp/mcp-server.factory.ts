import { Inject, Injectable, type OnApplicationShutdown } from '@nestjs/common';
import {
  type CallToolResult,
  McpServer,
  type McpRequestContext,
  type ServerCapabilities,
} from '@modelcontextprotocol/server';
import type { TaskOwner } from '../task.js';
import { TASKS_CONFIG, TASKS_EXTENSION_ID } from '../tasks.constants.js';
import type { TasksConfig } from '../interfaces/tasks-module-options.interface.js';
import {
  TaskToolRegistry,
  type TaskToolDefinition,
  taskSupportOf,
} from '../tools/task-tool.registry.js';
import type { TraceCarrier } from '../telemetry/tasks.telemetry.js';
import { TaskToolRunner } from '../tools/task-tool.runner.js';
import { TasksService } from '../tasks.service.js';
import { McpServerNotifier } from './mcp-server.notifier.js';
import { createTaskResult } from './json-rpc.js';
import { McpServerPool } from './mcp-server.pool.js';
import { refuseClientRequests } from './stateless-client-requests.js';
import { ownerKey } from '../store/task-listing.js';

/** What the endpoint learned about a request before handing it to the SDK. */
export interface EndpointRequestInfo {
  owner: Required<TaskOwner>;
  /** Whether the request declared the tasks extension. */
  tasks: boolean;
  /** The JSON-RPC method, when the request is one. */
  method?: string;
  /** For `tools/call`: the tool's name. */
  tool?: string;
  /**
   * Whether the request's envelope names its client (`clientInfo`): the SDK then seeds a server's
   * whole client identity from the request, and a reused server keeps none of an earlier client's.
   */
  identified?: boolean;
  /** Where the request names its trace (`params._meta`, headers), for a tool run's span. */
  trace?: TraceCarrier;
}

/**
 * The `tasks` capability of 2025-11-25 (SEP-1686): `list` only when the store can list, `cancel`,
 * and task-augmented `tools/call`.
 */
export function legacyTasksCapability(canList: boolean): ServerCapabilities['tasks'] {
  return { ...(canList && { list: {} }), cancel: {}, requests: { tools: { call: {} } } };
}

/** Key under which EndpointRequestInfo travels in the SDK's `authInfo.extra`. */
export const REQUEST_INFO_KEY = 'nestjs-mcp-tasks';

function requestInfoOf(context: { authInfo?: { extra?: Record<string, unknown> } } | undefined) {
  return context?.authInfo?.extra?.[REQUEST_INFO_KEY] as EndpointRequestInfo | undefined;
}

/**
 * Gives the SDK the McpServer it asks for on each request it serves: the extension advertised as
 * exactly `{}`, the app's own `configure` hook, and the task tools (definitions and schemas made
 * once at bootstrap).
 *
 * A 2026-07-28 request gets a server with every task tool from McpServerPool: built once, reused by
 * later requests of the same owner (see there for why that is safe), so a plain tool costs no more
 * than the SDK's own handler with a server built per request. A 2025-11-25 request gets a new
 * server (that revision's `initialize` leaves the client's identity on it) with only what it can
 * use: every task tool for `tools/list`, the called one for `tools/call`, none otherwise. Such a
 * server serves one request without a session, so a request it would send to the client (sampling,
 * elicitation, roots) fails at once instead of waiting for an answer that cannot come back (see
 * refuseClientRequests).
 */
@Injectable()
export class McpServerFactory implements OnApplicationShutdown {
  constructor(
    @Inject(TASKS_CONFIG) private readonly config: TasksConfig,
    private readonly registry: TaskToolRegistry,
    private readonly runner: TaskToolRunner,
    private readonly tasks: TasksService,
    private readonly serverNotifier: McpServerNotifier,
  ) {}

  private readonly pool = new McpServerPool(() => this.build('modern', this.registry.all()));

  readonly create = (context?: McpRequestContext): McpServer => {
    const info = requestInfoOf(context);
    const signal = (context?.requestInfo as Request | undefined)?.signal;
    if (context?.era === 'modern' && info?.identified && signal !== undefined) {
      return this.pool.take(ownerKey(info.owner), signal);
    }
    if (context?.era !== 'legacy') return this.build('modern', this.registry.all());
    if (info?.method === 'tools/call') {
      const tool = info.tool === undefined ? undefined : this.registry.get(info.tool);
      return this.build('legacy', tool ? [tool] : []);
    }
    return this.build('legacy', info?.method === 'tools/list' ? this.registry.all() : []);
  };

  /** Retires every server built so far: the app's tools, prompts or resources changed. */
  retireServers(): void {
    this.pool.retire();
  }

  onApplicationShutdown(): void {
    this.pool.close();
  }

  private build(era: 'modern' | 'legacy', tools: Iterable<TaskToolDefinition>): McpServer {
    const server = new McpServer(this.config.serverInfo, {
      ...this.config.serverOptions,
      capabilities:
        era === 'legacy'
          ? { tools: {}, tasks: legacyTasksCapability(this.tasks.canList) }
          : { tools: {}, extensions: { [TASKS_EXTENSION_ID]: {} } },
    });
    this.config.configure?.(server, this.serverNotifier);
    for (const tool of tools) this.register(server, tool);
    // Served statelessly, a 2025-11-25 request cannot carry a question to the client.
    if (era === 'legacy') refuseClientRequests(server);
    return server;
  }

  private register(server: McpServer, tool: TaskToolDefinition): void {
    const registered = server.registerTool(
      tool.name,
      tool.config,
      (input: unknown, context: unknown) => this.call(tool, input, context),
    );
    // 2025-11-25 `tools/list` shows it (the SDK strips it from 2026-07-28 answers): a task-only
    // tool must be called as a task, an inline one may be.
    registered.execution = { taskSupport: taskSupportOf(tool) };
  }

  private async call(
    tool: TaskToolDefinition,
    input: unknown,
    context: unknown,
  ): Promise<CallToolResult> {
    const extra = requestInfoOf(
      (context as { http?: { authInfo?: { extra?: Record<string, unknown> } } }).http,
    );
    const owner = extra?.owner ?? { principal: null, tenant: null };
    if (extra?.tasks) {
      const record = await this.runner.start(tool, input, owner, {
        trace: extra.trace,
        headers: extra.trace?.headers,
      });
      return createTaskResult(record) as unknown as CallToolResult;
    }
    return (await this.runner.runInline(
      tool,
      input,
      owner,
      extra?.trace,
      extra?.trace?.headers,
    )) as CallToolResult;
  }
}
