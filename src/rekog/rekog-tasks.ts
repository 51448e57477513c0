import { type INestApplicationContext, Logger, type Type } from '@nestjs/common';
import { DiscoveryService, ModuleRef } from '@nestjs/core';
import type { CallToolResult, ServerCapabilities } from '@modelcontextprotocol/server';
import {
  MCP_PUBLIC_METADATA_KEY,
  MCP_ROLES_MATCH_METADATA_KEY,
  MCP_ROLES_METADATA_KEY,
  MCP_SCOPES_MATCH_METADATA_KEY,
  MCP_SCOPES_METADATA_KEY,
  type McpStrategy,
  type McpTransportContext,
  ToolAuthorizationService,
  type ToolMetadata,
} from '@rekog/mcp-nest';
import { TasksConfigError } from '../errors.js';
import type { TasksConfig } from '../interfaces/tasks-module-options.interface.js';
import { BodyParsingInstaller } from '../mcp/body-parsing.installer.js';
import { ListenHandler } from '../mcp/listen.handler.js';
import { legacyTasksCapability } from '../mcp/mcp-server.factory.js';
import { McpServerNotifier } from '../mcp/mcp-server.notifier.js';
import { McpTasksFront } from '../mcp/tasks-front.js';
import { ownerOf } from '../principal.js';
import { TASKS_CONFIG, TASKS_EXTENSION_ID } from '../tasks.constants.js';
import { TasksService } from '../tasks.service.js';
import { TaskToolExplorer } from '../tools/task-tool.explorer.js';
import {
  mustBeCalledAsTask,
  TaskToolRegistry,
  type TaskToolDefinition,
  taskSupportOf,
} from '../tools/task-tool.registry.js';
import { TaskToolRunner } from '../tools/task-tool.runner.js';
import {
  connectTransport,
  TaskHttpTransport,
  transportBehind,
  type TransportTasks,
  type Verb,
} from './task-http.transport.js';

type RekogServer = ReturnType<McpTransportContext['createServer']>;
type ListKind = 'tools' | 'resources' | 'prompts';

/**
 * Adds the app's task tools to a `@rekog/mcp-nest` strategy, on rekog's own endpoint:
 *
 * - each `@TaskTool` becomes a rekog tool (`strategy.registerTool`), so rekog's `tools/list` shows
 *   it (on 2025-11-25 with `execution.taskSupport`), rekog's `@ToolScopes`/`@ToolRoles`/
 *   `@PublicTool` on the method apply to it, and rekog serves it inline to a client that cannot
 *   take a task (a tool with `whenClientLacksTasks: 'inline'`);
 * - the servers rekog builds advertise the tasks extension (2026-07-28) and the `tasks`
 *   capability (2025-11-25);
 * - every TaskHttpTransport of the strategy serves task traffic in front of rekog (see there),
 *   and rekog's list changes reach the package's `subscriptions/listen` streams.
 *
 * Call it once the strategy exists and before it starts: after `NestFactory.create`, before
 * `app.startAllMicroservices()`. The app imports `TasksModule.forRoot({ path: false, serverInfo })`
 * with the strategy's name and version as `serverInfo`: rekog's route is the endpoint, and one
 * server answers on it. Throws TasksConfigError, naming the fix, when the strategy has no
 * TaskHttpTransport, the app no TasksModule, or the two name different servers.
 */
export function attachTasks(app: INestApplicationContext, strategy: McpStrategy): void {
  const transports = strategy.options.transports.filter(
    (transport): transport is TaskHttpTransport => transport instanceof TaskHttpTransport,
  );
  if (transports.length === 0) {
    throw new TasksConfigError(
      'attachTasks: the strategy has no TaskHttpTransport. Construct the HTTP transport as ' +
        '`new TaskHttpTransport(options)` (nestjs-mcp-tasks/rekog), with the options of ' +
        "rekog's StreamableHttpTransport",
    );
  }
  const tasks = new RekogTasks(app, strategy);
  tasks.assertSameServer();
  for (const transport of transports) connectTransport(transport, tasks);
  tasks.readRouteBodies(transports);
}

/**
 * The classes rekog's `McpHttpControllerFor(transport)` made among a controller's bases (it names
 * each `BoundMcpHttpController`): their `post` hands the request to the transport's handler.
 */
function rekogControllerBases(
  controller: unknown,
): { post(req: unknown, res: unknown): unknown }[] {
  const bases: { post(req: unknown, res: unknown): unknown }[] = [];
  let prototype = (controller as { prototype?: unknown } | undefined)?.prototype;
  while (prototype !== null && typeof prototype === 'object' && prototype !== Object.prototype) {
    const own = prototype as { constructor?: { name?: unknown }; post?: unknown };
    if (
      Object.hasOwn(own, 'post') &&
      typeof own.post === 'function' &&
      own.constructor?.name === 'BoundMcpHttpController'
    ) {
      bases.push(own as { post(req: unknown, res: unknown): unknown });
    }
    prototype = Object.getPrototypeOf(prototype) as unknown;
  }
  return bases;
}

/** What a strategy's TaskHttpTransports share: the app's task parts, and the tools' rekog side. */
export class RekogTasks implements TransportTasks {
  private readonly logger = new Logger('RekogTasks');
  readonly front: McpTasksFront;
  private readonly config: TasksConfig;
  private readonly registry: TaskToolRegistry;
  private readonly explorer: TaskToolExplorer;
  private readonly runner: TaskToolRunner;
  /** What the servers of a TaskHttpTransport advertise beside rekog's own: both eras' tasks. */
  private readonly capabilities: ServerCapabilities;
  private readonly listen: ListenHandler;
  private readonly notifier: McpServerNotifier;
  private readonly bodyParsing: BodyParsingInstaller;
  private readonly discovery: DiscoveryService;
  private readonly authorization = new ToolAuthorizationService();
  /** Each task tool as rekog sees it, for its access checks. */
  private readonly metadata = new Map<string, ToolMetadata>();
  /** The transport whose announcements are passed on (one per strategy, so each is passed once). */
  private announcer: TaskHttpTransport | undefined;
  private registered: Promise<void> | undefined;

  constructor(
    app: INestApplicationContext,
    private readonly strategy: McpStrategy,
  ) {
    // Through ModuleRef: a failed `app.get` on an app made with Nest's default `abortOnError`
    // ends the process with Nest's own message instead of throwing the one that names the fix.
    const moduleRef = app.get(ModuleRef);
    const part = <T>(token: Type<T> | symbol): T => {
      try {
        return moduleRef.get<T>(token, { strict: false });
      } catch {
        throw new TasksConfigError(
          'attachTasks: the app has no TasksModule. Import TasksModule.forRoot({ path: false, ' +
            "... }) (rekog's route serves the tasks) in the app's root module",
        );
      }
    };
    this.front = part(McpTasksFront);
    this.config = part<TasksConfig>(TASKS_CONFIG);
    this.registry = part(TaskToolRegistry);
    this.explorer = part(TaskToolExplorer);
    this.runner = part(TaskToolRunner);
    this.capabilities = {
      extensions: { [TASKS_EXTENSION_ID]: {} },
      tasks: legacyTasksCapability(part(TasksService).canList),
    };
    this.listen = part(ListenHandler);
    this.notifier = part(McpServerNotifier);
    this.bodyParsing = part(BodyParsingInstaller);
    this.discovery = part(DiscoveryService);
  }

  /**
   * Has the package's parsers read the POST bodies of each controller route a TaskHttpTransport
   * of the strategy serves (a controller extending `McpHttpControllerFor(transport)`), ahead of
   * the app's body parser and with the TasksModule's limits, as they read the package's own
   * endpoint's: a malformed body is then refused as the endpoint refuses it. Nest registers the
   * routes when the app initializes, so this comes first (TasksConfigError otherwise).
   */
  readRouteBodies(transports: readonly TaskHttpTransport[]): void {
    for (const controller of this.discovery.getControllers()) {
      for (const base of rekogControllerBases(controller.metatype)) {
        const transport = transportBehind((req, res) => base.post(req, res));
        if (transport === undefined || !transports.includes(transport)) continue;
        if (this.bodyParsing.readBodiesOf(base.post)) continue;
        throw new TasksConfigError(
          'attachTasks: the app has initialized already (app.init() or app.listen() ran), so ' +
            `the route of ${controller.name} was registered before the package could read its ` +
            'bodies. Call attachTasks(app, strategy) after NestFactory.create and before ' +
            'app.init(), app.listen() and app.startAllMicroservices()',
        );
      }
    }
  }

  /**
   * One endpoint is one server: the task answers name the TasksModule's `serverInfo` and rekog's
   * answers the strategy's `name` and `version`, so the two must agree.
   */
  assertSameServer(): void {
    const { name, version } = this.strategy.options;
    const info = this.config.serverInfo;
    if (info.name === name && info.version === version) return;
    throw new TasksConfigError(
      `attachTasks: the TasksModule's serverInfo (${info.name} ${info.version}) is not the ` +
        `strategy's (${name} ${version}), and task answers would name another server than ` +
        `rekog's on the same endpoint. Pass serverInfo: { name: ${JSON.stringify(name)}, ` +
        `version: ${JSON.stringify(version)} } to TasksModule.forRoot (one constant for both)`,
    );
  }

  get maxBodyBytes(): number {
    return this.config.maxBodyBytes;
  }

  /** Registers the task tools into the strategy, once (the app's discovery runs first if need be). */
  ready(): Promise<void> {
    this.registered ??= (async () => {
      await this.explorer.explore();
      for (const tool of this.registry.all()) this.register(tool);
    })();
    return this.registered;
  }

  /**
   * The context a TaskHttpTransport starts rekog's transport on: rekog's, with servers that
   * advertise the tasks capabilities and show `execution.taskSupport`, and a self-mounted POST
   * route fronted by `front`. The capabilities rekog's servers advertise also decide which list
   * filters the listen streams honour.
   */
  contextFor(ctx: McpTransportContext, front: (handler: Verb) => Verb): McpTransportContext {
    const createServer = (): RekogServer => this.prepare(ctx.createServer());
    this.listen.advertise(createServer().server.getCapabilities() as ServerCapabilities);
    const adapter = ctx.httpAdapter;
    let httpAdapter = adapter;
    if (adapter !== undefined) {
      // Only `post` differs: a route the transport mounts itself is fronted too.
      httpAdapter = Object.create(adapter) as typeof adapter;
      (httpAdapter as unknown as { post(path: string, handler: Verb): unknown }).post = (
        path: string,
        handler: Verb,
      ) => {
        // A self-mounted route is outside Nest's router: the package's parsers read its bodies.
        this.bodyParsing.readBodiesAt(path);
        return (adapter as unknown as { post(path: string, h: Verb): unknown }).post(
          path,
          front(handler),
        );
      };
    }
    return {
      ...ctx,
      ...(httpAdapter !== undefined && { httpAdapter }),
      createServer,
      createBoundServer: (session, rawRequest) => {
        const server = createServer();
        ctx.bindRequestHandlers(server, session, rawRequest);
        return server;
      },
    };
  }

  /** rekog announced a changed list: the listen streams hear it once per strategy. */
  listChanged(from: TaskHttpTransport, kind: ListKind): void {
    this.announcer ??= from;
    if (from !== this.announcer) return;
    if (kind === 'tools') this.notifier.toolsChanged();
    else if (kind === 'prompts') this.notifier.promptsChanged();
    else this.notifier.resourcesChanged();
  }

  /**
   * Why the caller may not call a task tool (rekog's own rule for its tools), or `undefined`:
   * a JSON-RPC error, the one rekog would answer.
   */
  accessDenial(name: string, user: unknown): { code: number; message: string } | undefined {
    const metadata = this.metadata.get(name);
    if (metadata === undefined) return undefined;
    try {
      this.authorization.validateToolAccess(
        user as Parameters<ToolAuthorizationService['validateToolAccess']>[0],
        { metadata },
        this.strategy.options.allowUnauthenticatedAccess ?? false,
      );
      return undefined;
    } catch (error) {
      const { code, message } = error as { code?: unknown; message?: unknown };
      if (typeof code !== 'number' || typeof message !== 'string') throw error;
      return { code, message };
    }
  }

  logFault(error: unknown): void {
    this.logger.error(`Request failed: ${(error as Error)?.stack ?? String(error)}`);
  }

  private register(tool: TaskToolDefinition): void {
    const access = rekogAccess(tool.method);
    const description = tool.config.description ?? tool.config.title ?? tool.name;
    this.metadata.set(tool.name, { name: tool.name, description, ...access });
    this.strategy.registerTool({
      name: tool.name,
      description,
      parameters: tool.config.inputSchema,
      ...(tool.config.annotations !== undefined && { annotations: tool.config.annotations }),
      ...access,
      // A call rekog serves is one the front passed on (a client that cannot take a task), or
      // one over another transport of rekog's (STDIO): the tool runs inline if it may. The owner
      // is read from the request, as the front reads it.
      handler: (input, _context, request: unknown) =>
        tool.options.whenClientLacksTasks === 'reject'
          ? mustBeTask(tool.name)
          : this.runner.runInline(
              tool,
              input,
              ownerOf(request, this.config.principal, this.config.tenant),
            ),
    });
  }

  /**
   * A server rekog built for a TaskHttpTransport, before rekog binds its handlers: the tasks
   * capabilities of both eras, and a `tools/list` whose task tools carry their `title` and
   * `execution.taskSupport` (2025-11-25 clients read it; the SDK leaves it out of 2026-07-28
   * answers).
   */
  private prepare(server: RekogServer): RekogServer {
    const low = server.server;
    // On these servers only: rekog's other transports (STDIO) carry no task traffic.
    low.registerCapabilities(this.capabilities as Parameters<typeof low.registerCapabilities>[0]);
    const setRequestHandler = low.setRequestHandler.bind(low) as (...args: unknown[]) => unknown;
    (low as { setRequestHandler: unknown }).setRequestHandler = (...args: unknown[]) => {
      const handler = args[args.length - 1];
      if (args[0] === 'tools/list' && typeof handler === 'function') {
        args[args.length - 1] = async (...call: unknown[]) =>
          this.withTaskSupport(await (handler as (...a: unknown[]) => unknown)(...call));
      }
      return setRequestHandler(...args);
    };
    return server;
  }

  private withTaskSupport(result: unknown): unknown {
    const tools = (result as { tools?: unknown } | null)?.tools;
    if (!Array.isArray(tools)) return result;
    for (const entry of tools as { name?: unknown; title?: unknown; execution?: unknown }[]) {
      const tool = typeof entry?.name === 'string' ? this.registry.get(entry.name) : undefined;
      if (tool === undefined) continue;
      entry.execution = { taskSupport: taskSupportOf(tool) };
      // rekog's registration has no title; the tool's own endpoint lists it.
      if (tool.config.title !== undefined) entry.title = tool.config.title;
    }
    return result;
  }
}

/** A task-only tool called where no task can be made: the tool error rekog answers. */
function mustBeTask(name: string): CallToolResult {
  return { content: [{ type: 'text', text: mustBeCalledAsTask(name) }], isError: true };
}

/** rekog's access decorators on a `@TaskTool` method (`@ToolScopes`, `@ToolRoles`, `@PublicTool`). */
// eslint-disable-next-line @typescript-eslint/no-unsafe-function-type
function rekogAccess(method: Function | undefined): Partial<ToolMetadata> {
  if (method === undefined) return {};
  const read = (key: string): unknown => Reflect.getMetadata(key, method);
  const access: Record<string, unknown> = {
    isPublic: read(MCP_PUBLIC_METADATA_KEY),
    requiredScopes: read(MCP_SCOPES_METADATA_KEY),
    requiredScopesMatch: read(MCP_SCOPES_MATCH_METADATA_KEY),
    requiredRoles: read(MCP_ROLES_METADATA_KEY),
    requiredRolesMatch: read(MCP_ROLES_MATCH_METADATA_KEY),
  };
  for (const key of Object.keys(access)) if (access[key] === undefined) delete access[key];
  return access as Partial<ToolMetadata>;
}
