import {
  type CanActivate,
  type DynamicModule,
  type ExecutionContext,
  Global,
  type INestApplication,
  Injectable,
  Module,
  type Type,
} from '@nestjs/common';
import { APP_GUARD, Reflector } from '@nestjs/core';
import { ExpressAdapter } from '@nestjs/platform-express';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { Test } from '@nestjs/testing';
import { Observable, of } from 'rxjs';
import { TaskTool, TasksConfigError, TasksModule, TasksService } from '../src/index.js';
import { InjectTaskStore, TaskStore } from '../src/entries/store.js';
import { ADAPTERS, type AdapterName } from './support/app.js';
import { mcpRequest, post, type RawResponse } from './support/raw.js';

// ----- a small app: a task tool, an auth module with a JwtService-like provider -------------------

@Injectable()
class Tools {
  @TaskTool({ name: 'noop' })
  noop() {
    return 'ok';
  }
}

/** Stands in for @nestjs/jwt's JwtService: `Bearer token-<name>` → `<name>`. */
@Injectable()
class FakeJwtService {
  verify(token: string): string | undefined {
    return token.startsWith('token-') ? token.slice('token-'.length) : undefined;
  }
}

interface AuthRequest {
  headers: Record<string, string | undefined>;
  user?: { sub: string };
}

/** A passport-style guard with a constructor dependency: it sets `request.user` or refuses. */
@Injectable()
class JwtGuard implements CanActivate {
  calls = 0;
  lastHandler: string | undefined;
  constructor(
    private readonly jwt: FakeJwtService,
    private readonly reflector: Reflector,
  ) {}

  canActivate(context: ExecutionContext): boolean {
    this.calls++;
    // The request's own context: the endpoint's controller and handler, as in any guard.
    this.reflector.get('no-such-key', context.getHandler());
    this.lastHandler = `${context.getClass().name}.${context.getHandler().name}`;
    const request = context.switchToHttp().getRequest<AuthRequest>();
    const header = request.headers.authorization ?? '';
    const sub = this.jwt.verify(header.replace(/^Bearer /, ''));
    if (sub === undefined) return false;
    request.user = { sub };
    return true;
  }
}

@Module({ providers: [FakeJwtService], exports: [FakeJwtService] })
class AuthModule {}

@Global()
@Module({ providers: [FakeJwtService], exports: [FakeJwtService] })
class GlobalAuthModule {}

@Module({ providers: [FakeJwtService, JwtGuard], exports: [FakeJwtService, JwtGuard] })
class AuthWithGuardModule {}

// ----- helpers ------------------------------------------------------------------------------------

interface Booted {
  app: INestApplication;
  url: string;
}

const running: INestApplication[] = [];

afterEach(async () => {
  while (running.length > 0) await running.pop()!.close();
});

function create(module: Type<unknown>, adapter: AdapterName): Promise<INestApplication> {
  return Test.createTestingModule({ imports: [module] })
    .compile()
    .then((moduleRef) =>
      moduleRef.createNestApplication(
        adapter === 'express' ? new ExpressAdapter() : new FastifyAdapter(),
        { forceCloseConnections: true, logger: false },
      ),
    );
}

async function boot(module: Type<unknown>, adapter: AdapterName): Promise<Booted> {
  const app = await create(module, adapter);
  running.push(app);
  await app.listen(0, '127.0.0.1');
  const { port } = app.getHttpServer().address() as { port: number };
  return { app, url: `http://127.0.0.1:${port}/mcp` };
}

/** The boot's failure (compile or init), or a failed test when it boots. */
async function bootError(module: Type<unknown>, adapter: AdapterName): Promise<Error> {
  let app: INestApplication | undefined;
  try {
    app = await create(module, adapter);
    await app.init();
  } catch (error) {
    await app?.close().catch(() => undefined);
    return error as Error;
  }
  running.push(app);
  throw new Error('expected the boot to fail');
}

const rootWith = (imports: unknown[], providers: unknown[] = []): Type<unknown> => {
  @Module({ imports: imports as DynamicModule[], providers: providers as Type<unknown>[] })
  class RootModule {}
  return RootModule;
};

const feature = (imports: unknown[], providers: unknown[] = []): Type<unknown> => {
  @Module({ imports: imports as DynamicModule[], providers: providers as Type<unknown>[] })
  class FeatureModule {}
  return FeatureModule;
};

/** A provider of a feature module: what it was given. */
@Injectable()
class Consumer {
  constructor(
    readonly tasks: TasksService,
    @InjectTaskStore() readonly store: TaskStore,
  ) {}
}

/** Calls the task tool; answers the stored owner of the task it created. */
async function callTool(url: string, principal?: string): Promise<RawResponse> {
  return await post(url, mcpRequest('tools/call', { name: 'noop', arguments: {} }, { principal }));
}

async function ownerOf(app: INestApplication, answer: RawResponse): Promise<unknown> {
  const taskId = (answer.json?.result as { taskId?: string } | undefined)?.taskId;
  expect(typeof taskId).toBe('string');
  return (await app.get<TaskStore>(TaskStore).get(taskId!))?.owner;
}

/** A task method the endpoint answers -32602 "not found": proves the request was read and routed. */
async function serves(url: string): Promise<void> {
  const answer = await post(url, mcpRequest('tasks/get', { taskId: 'no-such-task' }));
  expect(answer.status).toBe(200);
  expect(answer.json?.error).toMatchObject({ code: -32602 });
}

// ----- the rules ------------------------------------------------------------------------------------

describe.each(ADAPTERS)('module wiring (%s)', (adapter) => {
  describe('one registration per app', () => {
    it('a second forRoot fails the boot with a TasksConfigError that says what to do', async () => {
      const error = await bootError(
        rootWith([TasksModule.forRoot(), feature([TasksModule.forRoot()])]),
        adapter,
      );
      expect(error).toBeInstanceOf(TasksConfigError);
      expect(error.message).toContain('TasksModule is registered 2 times in this app');
      expect(error.message).toContain('Register it once, in the root module');
      expect(error.message).toContain('import bare TasksModule');
    });

    it('forRoot and forRootAsync together: refused the same way, at init', async () => {
      const app = await create(
        rootWith([
          TasksModule.forRootAsync({ useFactory: () => ({}) }),
          feature([TasksModule.forRoot({ path: false })]),
        ]),
        adapter,
      );
      await expect(app.init()).rejects.toThrow(/registered 2 times/);
      await app.close();
    });

    it('the same DynamicModule object imported twice is one registration and serves', async () => {
      const tasks = TasksModule.forRoot({ isGlobal: false });
      const { app, url } = await boot(
        rootWith([tasks, feature([tasks], [Consumer])], [Tools]),
        adapter,
      );
      await serves(url);
      expect(app.get(Consumer).tasks).toBe(app.get(TasksService));
      expect((await callTool(url)).json?.result).toHaveProperty('taskId');
    });

    it('two apps in one process each have their own registration', async () => {
      const first = await boot(rootWith([TasksModule.forRoot()], [Tools]), adapter);
      const second = await boot(rootWith([TasksModule.forRoot()], [Tools]), adapter);
      await serves(first.url);
      await serves(second.url);
      expect(first.app.get(TasksService)).not.toBe(second.app.get(TasksService));
      const answer = await callTool(first.url);
      const taskId = (answer.json?.result as { taskId: string }).taskId;
      expect(await first.app.get<TaskStore>(TaskStore).get(taskId)).not.toBeNull();
      expect(await second.app.get<TaskStore>(TaskStore).get(taskId)).toBeNull();
    });
  });

  describe('feature modules', () => {
    it('inject TasksService and the TaskStore token without importing anything', async () => {
      const { app } = await boot(
        rootWith([TasksModule.forRoot(), feature([], [Consumer])]),
        adapter,
      );
      expect(app.get(Consumer).tasks).toBe(app.get(TasksService));
      expect(app.get(Consumer).store).toBe(app.get(TaskStore));
    });

    it('a bare imports: [TasksModule] works and gives the registration’s own instances', async () => {
      const { app, url } = await boot(
        rootWith([TasksModule.forRoot(), feature([TasksModule], [Consumer])], [Tools]),
        adapter,
      );
      const consumer = app.get(Consumer);
      const task = await consumer.tasks.create({ principal: 'alice' });
      expect(await app.get<TaskStore>(TaskStore).get(task.taskId)).toEqual(task);
      expect(consumer.store).toBe(app.get(TaskStore));
      await serves(url);
    });

    it('a bare import also works with forRootAsync', async () => {
      const { app } = await boot(
        rootWith([
          TasksModule.forRootAsync({ useFactory: () => ({ maxRows: 7 }) }),
          feature([TasksModule], [Consumer]),
        ]),
        adapter,
      );
      expect(app.get(Consumer).tasks).toBe(app.get(TasksService));
    });

    it('isGlobal: false and a bare import: the boot fails naming the fix', async () => {
      const error = await bootError(
        rootWith([TasksModule.forRoot({ isGlobal: false }), feature([TasksModule], [Consumer])]),
        adapter,
      );
      expect(error).toBeInstanceOf(TasksConfigError);
      expect(error.message).toContain('registration was made with isGlobal: false');
      expect(error.message).toContain('Drop isGlobal: false');
    });

    it('a bare import without any registration: the boot fails naming the fix', async () => {
      const error = await bootError(rootWith([feature([TasksModule], [Consumer])]), adapter);
      expect(error).toBeInstanceOf(TasksConfigError);
      expect(error.message).toContain('TasksModule is imported but never registered');
      expect(error.message).toContain('TasksModule.forRoot()');
    });
  });

  describe('guards with dependencies', () => {
    it('a guard the app provides (AuthModule) is the app’s own instance, run per request', async () => {
      const { app, url } = await boot(
        rootWith([AuthWithGuardModule, TasksModule.forRoot({ guards: [JwtGuard] })], [Tools]),
        adapter,
      );
      const guard = app.get(JwtGuard);
      expect((await callTool(url)).status).toBe(403);
      const answer = await callTool(url, 'token-alice');
      expect(answer.status).toBe(200);
      expect(await ownerOf(app, answer)).toEqual({ principal: 'alice', tenant: null });
      expect(guard.calls).toBe(2);
      expect(guard.lastHandler).toBe('McpController.handle');
    });

    it('a guard class nobody provides is built with the dependencies of a global module', async () => {
      const { app, url } = await boot(
        rootWith([GlobalAuthModule, TasksModule.forRoot({ guards: [JwtGuard] })], [Tools]),
        adapter,
      );
      expect((await callTool(url, 'not-a-token')).status).toBe(403);
      const answer = await callTool(url, 'token-bob');
      expect(await ownerOf(app, answer)).toEqual({ principal: 'bob', tenant: null });
    });

    it('forRootAsync({ imports: [AuthModule] }) puts the guard’s dependencies in reach', async () => {
      const { app, url } = await boot(
        rootWith(
          [
            TasksModule.forRootAsync({
              imports: [AuthModule],
              inject: [FakeJwtService],
              useFactory: (jwt: FakeJwtService) => ({
                principal: (request) =>
                  jwt.verify(String((request as AuthRequest).headers['x-token'])),
              }),
              guards: [JwtGuard],
            }),
          ],
          [Tools],
        ),
        adapter,
      );
      expect((await callTool(url)).status).toBe(403);
      const answer = await callTool(url, 'token-carol');
      expect(answer.status).toBe(200);
      // The principal resolver of the factory sees no x-token: the guard's request.user is not used.
      expect(await ownerOf(app, answer)).toEqual({ principal: null, tenant: null });
    });

    it('a guard whose dependencies are out of reach fails the boot naming it and the fix', async () => {
      const error = await bootError(
        rootWith([TasksModule.forRoot({ guards: [JwtGuard] })], [Tools]),
        adapter,
      );
      expect(error).toBeInstanceOf(TasksConfigError);
      expect(error.message).toMatch(/^guards: JwtGuard cannot be built \(.*FakeJwtService/);
      expect(error.message).toContain('forRootAsync({ imports: [TheirModule] })');
      expect(error.message).not.toContain('\n');
    });

    it('guard instances, promises and observables: each runs, in order, until one refuses', async () => {
      const seen: string[] = [];
      const allowAsync: CanActivate = {
        canActivate: async () => {
          seen.push('promise');
          return true;
        },
      };
      const byHeader: CanActivate = {
        canActivate: (context: ExecutionContext): Observable<boolean> => {
          seen.push('observable');
          const request = context.switchToHttp().getRequest<AuthRequest>();
          return of(request.headers['x-let-in'] === 'yes');
        },
      };
      const last: CanActivate = {
        canActivate: () => {
          seen.push('last');
          return true;
        },
      };
      const { url } = await boot(
        rootWith([TasksModule.forRoot({ guards: [allowAsync, byHeader, last] })], [Tools]),
        adapter,
      );
      const refused = await post(url, mcpRequest('tools/list', {}));
      expect(refused.status).toBe(403);
      expect(seen).toEqual(['promise', 'observable']);
      seen.length = 0;
      const allowed = await post(
        url,
        mcpRequest('tools/list', {}, { headers: { 'x-let-in': 'yes' } }),
      );
      expect(allowed.status).toBe(200);
      expect(seen).toEqual(['promise', 'observable', 'last']);
    });

    it('APP_GUARD: a global guard runs before the endpoint and its request.user is the principal', async () => {
      const { app, url } = await boot(
        rootWith(
          [AuthModule, TasksModule.forRoot()],
          [Tools, { provide: APP_GUARD, useClass: JwtGuard }],
        ),
        adapter,
      );
      const refused = await callTool(url);
      expect(refused.status).toBe(403);
      const answer = await callTool(url, 'token-dave');
      expect(answer.status).toBe(200);
      expect(await ownerOf(app, answer)).toEqual({ principal: 'dave', tenant: null });
    });
  });
});
