import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { Inject, Injectable, Logger, type OnModuleInit, Optional } from '@nestjs/common';
import { ApplicationConfig, HttpAdapterHost } from '@nestjs/core';
import { MCP_PATH, TASKS_CONFIG } from '../tasks.constants.js';
import type { TasksConfig } from '../interfaces/tasks-module-options.interface.js';
import { BodyBudget } from './body-budget.js';
import {
  type EndpointBodyLimits,
  installBodyParsing,
  installExpressParser,
} from './body-parsing.js';
import { METHOD_NOT_ALLOWED, sendJson } from './json-rpc.js';
import { requestTarget } from './request-target.js';

/**
 * The HTTP methods the SDK answers itself (405 today; they were the 2025 era's session
 * operations). Every other method but POST is answered by the endpoint the same way: the SDK would
 * turn some of them (TRACE) into a 500 while building its web Request.
 */
export const SDK_METHODS: ReadonlySet<string> = new Set(['GET', 'DELETE']);

/** What the SDK answers a method it does not serve, byte for byte, with `Allow: POST`. */
export function methodNotAllowed(res: ServerResponse): void {
  res.setHeader('allow', 'POST');
  sendJson(res, 405, METHOD_NOT_ALLOWED);
}

type ExpressMiddleware = (req: IncomingMessage, res: ServerResponse, next: () => void) => void;

interface ExpressSettings {
  enabled(setting: string): boolean;
}

/** The metadata key `readBodiesOf` marks a controller method with. */
const READS_BODIES = 'nestjs-mcp-tasks:reads-bodies';

/**
 * A test of a request's path (as sent) against an Express route path, as Express's router
 * matches one: literal segments, case-insensitive unless the app's `case sensitive routing` is
 * on, and `:name` parameters (one segment each), with a trailing slash optional unless `strict
 * routing` is on. `undefined` for any other syntax (wildcards, optional parts).
 */
export function expressRouteMatcher(
  route: string,
  caseSensitive: boolean,
  strict: boolean,
): ((pathname: string) => boolean) | undefined {
  const path = strict || route === '/' ? route : route.replace(/\/+$/, '');
  const segments: string[] = [];
  for (const segment of path.split('/')) {
    if (/^:[A-Za-z_$][\w$]*$/.test(segment)) segments.push('[^/]+');
    else if (/^[^:*?{}()[\]\\]*$/.test(segment)) segments.push(segment.replace(/[.+^$|]/g, '\\$&'));
    else return undefined;
  }
  const pattern = new RegExp(
    `^${segments.join('/')}${strict ? '' : '/?'}$`,
    caseSensitive ? '' : 'i',
  );
  return (pathname) => pattern.test(pathname);
}

interface FastifyLike {
  addHook(
    name: 'onRequest',
    hook: (
      request: { raw: IncomingMessage },
      reply: {
        code(status: number): FastifyReplyLike;
      },
      done: () => void,
    ) => void,
  ): void;
}
interface FastifyReplyLike {
  code(status: number): FastifyReplyLike;
  header(name: string, value: string): FastifyReplyLike;
  send(payload: string): unknown;
}

/**
 * Lowers an HTTP server's `headersTimeout` to `ms` when it is longer or off (0), never raising
 * it: a value the app set below `ms` stays. `null` leaves the server alone. Node reads the
 * property on each of its periodic checks, so setting it after the server was created works.
 */
export function lowerHeadersTimeout(server: unknown, ms: number | null): void {
  const http = server as Partial<Server> | null | undefined;
  if (ms === null || typeof http?.headersTimeout !== 'number') return;
  if (http.headersTimeout === 0 || http.headersTimeout > ms) http.headersTimeout = ms;
}

/**
 * Puts the endpoint's own body handling in front of the app's routes, so that every request the
 * endpoint serves went through its parsing and limits (see body-parsing.ts), and settles the
 * endpoint's full path (global prefix included) at module init:
 *
 * - as soon as the HTTP adapter exists, and so before Nest registers its body parser: under
 *   Express, a first middleware that answers 405 to a method the endpoint does not serve (before
 *   any body parser reads, and refuses, its body), then the endpoint's own JSON parser;
 * - at module init: the parse-error translation (Express) or the endpoint's own parsers (Fastify),
 *   and under Fastify the 405 answers in an onRequest hook; and the HTTP server's
 *   `headersTimeout` lowered to `bodies.headersTimeoutMs` (see lowerHeadersTimeout).
 *
 * One BodyBudget counts what the endpoint's bodies hold while they arrive, for both adapters.
 *
 * The same parsers read the POST bodies of the routes another entry fronts with the package's
 * front (the `/rekog` entry's TaskHttpTransport, see `readBodiesOf` and `readBodiesAt`), with the
 * same limits and budget, so those routes refuse a malformed body as the endpoint does
 * (bodyRefusal).
 */
@Injectable()
export class BodyParsingInstaller implements OnModuleInit {
  private readonly logger = new Logger('BodyParsingInstaller');
  /** The endpoint's full path (global prefix included), settled at module init. */
  private fullPath: string | undefined;
  /** What the endpoint's bodies hold while they arrive (`bodies.maxBytesInFlight…`). */
  readonly budget: BodyBudget;
  private readonly limits: EndpointBodyLimits;
  /** The fronted routes as registered (Fastify matches a request to one before any hook runs). */
  private readonly frontedRoutes = new Set<string>();
  /** The same routes as Express's router matches a request's path to them. */
  private readonly frontedPaths: ((pathname: string) => boolean)[] = [];
  /** Set once Nest has registered the app's routes (module init comes after). */
  private routesRegistered = false;

  constructor(
    @Inject(TASKS_CONFIG) private readonly config: TasksConfig,
    @Inject(MCP_PATH) private readonly path: string | false,
    @Optional() private readonly adapterHost?: HttpAdapterHost,
    @Optional() private readonly appConfig?: ApplicationConfig,
  ) {
    this.budget = new BodyBudget(config.bodies);
    this.limits = {
      maxBytes: config.maxBodyBytes,
      budget: this.budget,
      timeoutMs: config.bodies.timeoutMs,
    };
    adapterHost?.init$.subscribe(() => {
      const adapter = adapterHost.httpAdapter;
      // None in an application context (a queue worker): nothing to parse there.
      if (!adapter) return;
      this.watchRoutes(adapter);
      if (adapter.getType() !== 'express') return;
      if (path !== false) {
        // First of all, so that no body parser reads (and refuses) the body of a method the
        // endpoint does not serve.
        (adapter.getInstance() as { use(handler: ExpressMiddleware): void }).use(
          (req, res, next) => {
            if (this.refusesMethod(req)) methodNotAllowed(res);
            else next();
          },
        );
      }
      installExpressParser(
        adapter.getInstance(),
        (pathname) => this.isEndpointPath(pathname) || this.isFrontedPath(pathname),
        this.limits,
      );
    });
  }

  onModuleInit(): void {
    this.routesRegistered = true;
    const adapter = this.adapterHost?.httpAdapter;
    // Every fronted route is known by now: Nest has registered the app's routes.
    if (!adapter || (this.path === false && this.frontedRoutes.size === 0)) return;
    if (this.path !== false) {
      this.fullPath = `/${[this.appConfig?.getGlobalPrefix() ?? '', this.path].join('/')}`
        .replace(/\/{2,}/g, '/')
        .replace(/(.)\/$/, '$1');
    }
    installBodyParsing(
      adapter.getType(),
      adapter.getInstance(),
      this.fullPath,
      this.limits,
      // The route as registered; Fastify builds `routeOptions` on each read, so only when needed.
      (request) => {
        if (this.frontedRoutes.size === 0) return false;
        const route = request.routeOptions?.url;
        return route !== undefined && this.frontedRoutes.has(route);
      },
    );
    lowerHeadersTimeout(adapter.getHttpServer(), this.config.bodies.headersTimeoutMs);
    if (this.path !== false && adapter.getType() === 'fastify') {
      this.answerUnroutedMethods(adapter.getInstance());
    }
  }

  /** Whether `pathname` (as sent, undecoded) is the endpoint's path: one exact spelling. */
  isEndpointPath(pathname: string): boolean {
    return this.fullPath !== undefined && pathname === this.fullPath;
  }

  /**
   * Has the package read the POST bodies of the routes Nest registers for a controller method
   * (its `@Post()` handler): Nest copies a route method's metadata onto the handler it registers,
   * where `watchRoutes` finds this mark. `false`, and nothing marked, once the routes are
   * registered (the app initialized): it is too late then.
   */
  readBodiesOf(method: object): boolean {
    if (this.routesRegistered) return false;
    Reflect.defineMetadata(READS_BODIES, true, method);
    return true;
  }

  /**
   * Has the package read the POST bodies of a route registered at `path` (the path as given to the
   * HTTP adapter): a marked controller method's (see `readBodiesOf`), or one mounted on the
   * adapter outside Nest's router (rekog's self-mounted route).
   */
  readBodiesAt(path: string): void {
    this.frontedRoutes.add(path);
    const instance = this.adapterHost?.httpAdapter?.getInstance() as ExpressSettings | undefined;
    if (this.adapterHost?.httpAdapter?.getType() !== 'express' || instance === undefined) return;
    const matches = expressRouteMatcher(
      path,
      instance.enabled('case sensitive routing'),
      instance.enabled('strict routing'),
    );
    if (matches) this.frontedPaths.push(matches);
    else {
      this.logger.warn(
        `The route ${path} uses path syntax the package does not match (wildcards, optional ` +
          "parts): its bodies are read by the app's body parser, with that parser's limits",
      );
    }
  }

  private isFrontedPath(pathname: string): boolean {
    return this.frontedPaths.some((matches) => matches(pathname));
  }

  /** Watches the routes Nest registers on the adapter for those `readBodiesOf` marked. */
  private watchRoutes(adapter: object): void {
    const router = adapter as { post(...args: unknown[]): unknown };
    const post = router.post;
    router.post = (...args: unknown[]): unknown => {
      const [path] = args;
      const handler = args[args.length - 1];
      if (
        typeof path === 'string' &&
        typeof handler === 'function' &&
        Reflect.getMetadata(READS_BODIES, handler) === true
      ) {
        this.readBodiesAt(path);
      }
      return post.apply(router, args);
    };
  }

  /**
   * Under Fastify, a method the endpoint does not serve is answered at the endpoint's path in an
   * onRequest hook, before Fastify reads a body for it: its JSON parser would answer a PUT with an
   * empty or broken JSON body 400 in its own words, and a method it cannot route (PURGE, LINK…)
   * would end in the app's 404. (Under Express a first middleware does the same.)
   */
  private answerUnroutedMethods(instance: unknown): void {
    const fastify = instance as FastifyLike;
    fastify.addHook('onRequest', (request, reply, done) => {
      if (!this.refusesMethod(request.raw)) return done();
      reply
        .code(405)
        .header('allow', 'POST')
        .header('content-type', 'application/json')
        .send(JSON.stringify(METHOD_NOT_ALLOWED));
    });
  }

  /**
   * Whether the request is to the endpoint's path with a method it answers 405 before any body
   * parser runs: anything but POST, GET and DELETE (the SDK's), and a CORS preflight.
   */
  private refusesMethod(req: IncomingMessage): boolean {
    const method = req.method ?? '';
    if (method === 'POST' || SDK_METHODS.has(method)) return false;
    if (method === 'OPTIONS' && req.headers['access-control-request-method'] !== undefined) {
      return false;
    }
    const pathname = requestTarget(req.url ?? '')?.pathname;
    return pathname !== undefined && this.isEndpointPath(pathname);
  }
}
