import { jest } from '@jest/globals';
import { Inject, Injectable, Module, type INestApplicationContext } from '@nestjs/common';
import { ScheduleModule, SchedulerRegistry } from '@nestjs/schedule';
import { Test } from '@nestjs/testing';
import { TasksConfigError } from '../src/errors.js';
import { ListenNotifier } from '../src/notify/listen.notifier.js';
import { TaskNotifier } from '../src/notify/task-notifier.js';
import { defaultPrincipal } from '../src/principal.js';
import { InMemoryTaskStore } from '../src/store/in-memory.task-store.js';
import { TaskStore } from '../src/store/task-store.js';
import type { TaskRecord } from '../src/task.js';
import { JANITOR_INTERVAL_NAME, TASKS_CONFIG } from '../src/tasks.constants.js';
import { TasksModule } from '../src/tasks.module.js';
import type {
  TasksConfig,
  TasksModuleOptions,
} from '../src/interfaces/tasks-module-options.interface.js';
import { resolveTasksConfig } from '../src/tasks.config.js';
import { TasksJanitor } from '../src/janitor/tasks.janitor.js';
import { TasksService } from '../src/tasks.service.js';
import { RecordingNotifier } from './support/helpers.js';

const owner = { principal: 'alice' };
const apps: INestApplicationContext[] = [];

async function boot(
  imports: unknown[],
  providers: unknown[] = [],
): Promise<INestApplicationContext> {
  const moduleRef = await Test.createTestingModule({
    imports: imports as never[],
    providers: providers as never[],
  }).compile();
  const app = await moduleRef.init();
  apps.push(app);
  return app;
}

async function bootError(imports: unknown[], providers: unknown[] = []): Promise<Error> {
  return boot(imports, providers).then(
    () => {
      throw new Error('expected the boot to fail');
    },
    (error: Error) => error,
  );
}

afterEach(async () => {
  while (apps.length > 0) await apps.pop()!.close();
});

/** A store of the app's own, with a dependency of its own, to swap in through DI. */
const STORE_PREFIX = Symbol('STORE_PREFIX');
@Injectable()
class PrefixedStore extends InMemoryTaskStore {
  constructor(@Inject(STORE_PREFIX) readonly prefix: string) {
    super();
  }
}

@Module({
  providers: [{ provide: STORE_PREFIX, useValue: 'app' }, PrefixedStore],
  exports: [PrefixedStore, STORE_PREFIX],
})
class AppStoreModule {}

describe('TasksModule.forRoot', () => {
  it('provides TasksService over the in-memory store with the defaults', async () => {
    const app = await boot([TasksModule.forRoot({})]);
    const service = app.get(TasksService);
    const task = await service.create(owner);
    expect(await app.get<TaskStore>(TaskStore).get(task.taskId)).toEqual(task);
    expect(app.get(TaskStore)).toBeInstanceOf(InMemoryTaskStore);
    expect(app.get(TaskNotifier)).toBeInstanceOf(ListenNotifier);
    expect(app.get<TasksConfig>(TASKS_CONFIG)).toEqual({
      cancellation: 'immediate',
      defaultTtlMs: 3_600_000,
      maxTtlMs: 604_800_000,
      maxRows: 10_000,
      maxTasksPerOwner: 100,
      maxTaskBytes: 1_048_576,
      janitor: { intervalMs: 30_000, terminalTtlMs: 3_600_000 },
      serverInfo: { name: 'nestjs-mcp-tasks', version: '0.1.0' },
      principal: defaultPrincipal,
      tenant: undefined,
      configure: undefined,
      serverOptions: {},
      allowedHosts: undefined,
      allowedOrigins: undefined,
      maxBodyBytes: 1_048_576,
      bodies: {
        maxBytesInFlight: 16_777_216,
        maxBytesInFlightPerAddress: 4_194_304,
        timeoutMs: 10_000,
        headersTimeoutMs: 20_000,
      },
      listen: {
        keepAliveMs: 15_000,
        maxStreams: 1_024,
        maxStreamsPerPrincipal: 32,
        maxTaskIds: 256,
      },
      resultWaits: { max: 1_024, maxPerPrincipal: 32 },
      runningTasksOnShutdown: 'fail',
      shutdown: { drainMs: 10_000 },
      lease: { ttlMs: 30_000 },
      storeOutageMs: 120_000,
      telemetry: {},
    });
  });

  it('passes the options through, validated and merged with the defaults', async () => {
    const app = await boot([
      TasksModule.forRoot({
        cancellation: 'cooperative',
        maxRows: null,
        janitor: { intervalMs: 1000 },
      }),
    ]);
    expect(app.get<TasksConfig>(TASKS_CONFIG)).toMatchObject({
      cancellation: 'cooperative',
      maxRows: null,
      janitor: { intervalMs: 1000, terminalTtlMs: 3_600_000 },
    });
  });

  it('passes the drain through: 0 hands running calls over at once', async () => {
    const none = await boot([TasksModule.forRoot({ shutdown: { drainMs: 0 } })]);
    expect(none.get<TasksConfig>(TASKS_CONFIG).shutdown).toEqual({ drainMs: 0 });
    const long = await boot([
      TasksModule.forRootAsync({ useFactory: () => ({ shutdown: { drainMs: 25_000 } }) }),
    ]);
    expect(long.get<TasksConfig>(TASKS_CONFIG).shutdown).toEqual({ drainMs: 25_000 });
  });

  it('passes the stream and wait caps through, each merged with its own default', async () => {
    const app = await boot([
      TasksModule.forRoot({
        listen: { maxStreamsPerPrincipal: 4 },
        resultWaits: { maxPerPrincipal: 2 },
      }),
    ]);
    expect(app.get<TasksConfig>(TASKS_CONFIG)).toMatchObject({
      listen: { maxStreams: 1_024, maxStreamsPerPrincipal: 4 },
      resultWaits: { max: 1_024, maxPerPrincipal: 2 },
    });
  });

  it('passes the body limits through; their byte defaults grow with maxBodyBytes', async () => {
    const given = await boot([
      TasksModule.forRoot({
        bodies: { maxBytesInFlightPerAddress: null, timeoutMs: 3_000, headersTimeoutMs: null },
      }),
    ]);
    expect(given.get<TasksConfig>(TASKS_CONFIG).bodies).toEqual({
      maxBytesInFlight: 16_777_216,
      maxBytesInFlightPerAddress: null,
      timeoutMs: 3_000,
      headersTimeoutMs: null,
    });
    const large = await boot([TasksModule.forRoot({ maxBodyBytes: 8_388_608 })]);
    expect(large.get<TasksConfig>(TASKS_CONFIG).bodies).toMatchObject({
      maxBytesInFlight: 33_554_432,
      maxBytesInFlightPerAddress: 8_388_608,
    });
  });

  it('global by default: another module injects TasksService without importing TasksModule', async () => {
    @Injectable()
    class Consumer {
      constructor(readonly tasks: TasksService) {}
    }
    @Module({ providers: [Consumer] })
    class FeatureModule {}
    const app = await boot([TasksModule.forRoot({}), FeatureModule]);
    expect(app.get(Consumer).tasks).toBe(app.get(TasksService));

    const explicit = await boot([TasksModule.forRoot({ isGlobal: true }), FeatureModule]);
    expect(explicit.get(Consumer).tasks).toBe(explicit.get(TasksService));

    const notGlobal = await bootError([TasksModule.forRoot({ isGlobal: false }), FeatureModule]);
    expect(notGlobal.message).toMatch(/TasksService/);
  });

  it('maxTtlMs alone lowers the default TTL to the cap and caps an unlimited default', async () => {
    const capped = await boot([TasksModule.forRoot({ maxTtlMs: 1000 })]);
    expect(capped.get<TasksConfig>(TASKS_CONFIG)).toMatchObject({
      defaultTtlMs: 1000,
      maxTtlMs: 1000,
    });
    expect((await capped.get(TasksService).create(owner)).ttlMs).toBe(1000);

    const above = await boot([TasksModule.forRoot({ maxTtlMs: 7_200_000 })]);
    expect(above.get<TasksConfig>(TASKS_CONFIG).defaultTtlMs).toBe(3_600_000);

    const unlimited = await boot([TasksModule.forRoot({ maxTtlMs: 5000, defaultTtlMs: null })]);
    expect(unlimited.get<TasksConfig>(TASKS_CONFIG).defaultTtlMs).toBe(5000);
    expect((await unlimited.get(TasksService).create(owner)).ttlMs).toBe(5000);

    const below = await boot([TasksModule.forRoot({ maxTtlMs: 5000, defaultTtlMs: 2000 })]);
    expect(below.get<TasksConfig>(TASKS_CONFIG).defaultTtlMs).toBe(2000);
  });

  it('maxTtlMs is 7 days unless set: an unlimited default or request gets 7 days; null lifts it', async () => {
    const week = 604_800_000;
    const unlimited = await boot([TasksModule.forRoot({ defaultTtlMs: null })]);
    expect(unlimited.get<TasksConfig>(TASKS_CONFIG)).toMatchObject({
      defaultTtlMs: week,
      maxTtlMs: week,
    });
    const service = unlimited.get(TasksService);
    expect((await service.create(owner)).ttlMs).toBe(week);
    expect((await service.create(owner, { ttlMs: Number.MAX_SAFE_INTEGER })).ttlMs).toBe(week);

    const open = await boot([TasksModule.forRoot({ maxTtlMs: null, defaultTtlMs: null })]);
    expect(open.get<TasksConfig>(TASKS_CONFIG)).toMatchObject({
      defaultTtlMs: null,
      maxTtlMs: null,
    });
    expect((await open.get(TasksService).create(owner)).ttlMs).toBeNull();

    const longer = await bootError([TasksModule.forRoot({ defaultTtlMs: week + 1 })]);
    expect(longer.message).toBe(`defaultTtlMs must be at most maxTtlMs (${week}), got ${week + 1}`);
  });
});

describe('TasksModule: bad options fail the boot naming the key and the value', () => {
  const cases: [TasksModuleOptions, string][] = [
    [{ janitor: { intervalMs: -5 } }, 'janitor.intervalMs must be a positive integer, got -5'],
    [
      { janitor: { terminalTtlMs: 1.5 } },
      'janitor.terminalTtlMs must be a positive integer, got 1.5',
    ],
    [{ janitor: 'yes' as never }, 'janitor must be an object or false, got "yes"'],
    [{ maxRows: 0 }, 'maxRows must be a positive integer or null, got 0'],
    [{ maxTasksPerOwner: 2.5 }, 'maxTasksPerOwner must be a positive integer or null, got 2.5'],
    [{ maxTaskBytes: null as never }, 'maxTaskBytes must be a positive integer, got null'],
    [{ defaultTtlMs: '1h' as never }, 'defaultTtlMs must be a positive integer or null, got "1h"'],
    [{ maxTtlMs: -1 }, 'maxTtlMs must be a positive integer or null, got -1'],
    [
      { maxTtlMs: 1000, defaultTtlMs: 5000 },
      'defaultTtlMs must be at most maxTtlMs (1000), got 5000',
    ],
    [
      { cancellation: 'later' as never },
      'cancellation must be "immediate" or "cooperative", got "later"',
    ],
    [{ maxRow: 5 } as never, 'maxRow is not an option'],
    [
      { runningTasksOnShutdown: 'keep' as never },
      'runningTasksOnShutdown must be "fail" or "leave", got "keep"',
    ],
    [{ shutdown: false as never }, 'shutdown must be an object, got false'],
    [
      { shutdown: { drainMs: -1 } },
      'shutdown.drainMs must be a positive integer or 0 (at most 2147483647), got -1',
    ],
    [
      { shutdown: { drainMs: 1.5 } },
      'shutdown.drainMs must be a positive integer or 0 (at most 2147483647), got 1.5',
    ],
    [
      { shutdown: { drainMs: 2_147_483_648 } },
      'shutdown.drainMs must be a positive integer or 0 (at most 2147483647), got 2147483648',
    ],
    [{ shutdown: { drain: 5 } } as never, 'shutdown.drain is not an option'],
    [{ storeOutageMs: -1 }, 'storeOutageMs must be an integer of 0 or more, got -1'],
    [{ storeOutageMs: '2m' as never }, 'storeOutageMs must be an integer of 0 or more, got "2m"'],
    [{ lease: 'on' as never }, 'lease must be an object or false, got "on"'],
    [{ lease: { ttlMs: 0 } }, 'lease.ttlMs must be a positive integer, got 0'],
    [{ lease: { ttlMs: 299 } }, 'lease.ttlMs must be at least 300, got 299'],
    [{ lease: { ttl: 5 } } as never, 'lease.ttl is not an option'],
    [{ listen: { maxStreams: 0 } }, 'listen.maxStreams must be a positive integer, got 0'],
    [
      { listen: { maxStreamsPerPrincipal: 0 } },
      'listen.maxStreamsPerPrincipal must be a positive integer, got 0',
    ],
    [
      { listen: { maxStreamsPerPrincipal: 2.5 } },
      'listen.maxStreamsPerPrincipal must be a positive integer, got 2.5',
    ],
    [{ listen: { maxStreamsPerOwner: 4 } } as never, 'listen.maxStreamsPerOwner is not an option'],
    [{ resultWaits: 8 as never }, 'resultWaits must be an object, got 8'],
    [{ resultWaits: { max: 0 } }, 'resultWaits.max must be a positive integer, got 0'],
    [
      { resultWaits: { maxPerPrincipal: '32' as never } },
      'resultWaits.maxPerPrincipal must be a positive integer, got "32"',
    ],
    [{ resultWaits: { perPrincipal: 4 } } as never, 'resultWaits.perPrincipal is not an option'],
    [{ listen: { keepAliveMs: -1 } }, 'listen.keepAliveMs must be a positive integer or 0, got -1'],
    [{ maxBodyBytes: 1.5 }, 'maxBodyBytes must be a positive integer, got 1.5'],
    [{ bodies: 5 as never }, 'bodies must be an object, got 5'],
    [{ bodies: { timeout: 5 } } as never, 'bodies.timeout is not an option'],
    [
      { bodies: { maxBytesInFlight: 0 } },
      'bodies.maxBytesInFlight must be a positive integer, got 0',
    ],
    [
      { maxBodyBytes: 2_000_000, bodies: { maxBytesInFlight: 1_000_000 } },
      'bodies.maxBytesInFlight must be at least maxBodyBytes (2000000), got 1000000',
    ],
    [
      { bodies: { maxBytesInFlightPerAddress: 1_000 } },
      'bodies.maxBytesInFlightPerAddress must be at least maxBodyBytes (1048576), got 1000',
    ],
    [
      { bodies: { maxBytesInFlightPerAddress: '4MB' as never } },
      'bodies.maxBytesInFlightPerAddress must be a positive integer or null, got "4MB"',
    ],
    [{ bodies: { timeoutMs: null as never } }, 'bodies.timeoutMs must be a positive integer'],
    [
      { bodies: { timeoutMs: 2 ** 31 } },
      'bodies.timeoutMs must be at most 2147483647, got 2147483648',
    ],
    [
      { bodies: { headersTimeoutMs: 0 } },
      'bodies.headersTimeoutMs must be a positive integer or null, got 0',
    ],
    [
      { serverInfo: { name: 'x' } as never },
      'serverInfo must be an object with string name and version',
    ],
    [{ principal: 'user' as never }, 'principal must be a function, got "user"'],
    [{ allowedHosts: [''] }, 'allowedHosts must be an array of host names or false'],
    [{ janitor: { interval: 5 } } as never, 'janitor.interval is not an option'],
    [{ serverOptions: 'x' as never }, "serverOptions must be an object of the SDK's ServerOptions"],
    [
      { serverOptions: { capabilities: {} } as never },
      'serverOptions must be an object of the SDK',
    ],
  ];

  it.each(cases)('forRoot(%j)', async (options, message) => {
    const error = await bootError([TasksModule.forRoot(options)]);
    expect(error).toBeInstanceOf(TasksConfigError);
    expect(error.message).toContain(message);
  });

  it('forRootAsync: the factory result is validated the same way', async () => {
    const error = await bootError([
      TasksModule.forRootAsync({ useFactory: async () => ({ janitor: { intervalMs: -5 } }) }),
    ]);
    expect(error.message).toBe('janitor.intervalMs must be a positive integer, got -5');
    const drain = await bootError([
      TasksModule.forRootAsync({
        useFactory: async () => ({ shutdown: { drainMs: '5s' as never } }),
      }),
    ]);
    expect(drain).toBeInstanceOf(TasksConfigError);
    expect(drain.message).toBe(
      'shutdown.drainMs must be a positive integer or 0 (at most 2147483647), got "5s"',
    );
  });

  it('a store that is not a TaskStore fails the boot naming what is missing', async () => {
    const error = await bootError([TasksModule.forRoot({ store: { get: () => null } as never })]);
    expect(error.message).toBe(
      'store must implement TaskStore (missing create, compareAndSet, delete, cleanup), got an object',
    );
  });

  it('a store with some of the lease methods fails the boot naming the others', async () => {
    const store = Object.assign(new InMemoryTaskStore(), { renewLease: async () => [] });
    const error = await bootError([TasksModule.forRoot({ store })]);
    expect(error.message).toMatch(
      /^store must implement all of TaskStoreLeases or none of it \(missing heldTasks, releaseTasks, releaseLease\), got /,
    );
  });

  it('a notifier without notify fails the boot', async () => {
    const error = await bootError([TasksModule.forRoot({ notifier: { useValue: 42 } as never })]);
    expect(error.message).toBe('notifier must implement TaskNotifier (a notify method), got 42');
  });

  it('a recipe naming two ways is refused at registration', () => {
    expect(() =>
      TasksModule.forRoot({
        store: { useValue: new InMemoryTaskStore(), useClass: PrefixedStore } as never,
      }),
    ).toThrow('store names useClass and useValue; give one of them');
  });
});

describe('TasksModule.forRootAsync', () => {
  const CONFIG = Symbol('CONFIG');
  @Module({ providers: [{ provide: CONFIG, useValue: { rows: 7 } }], exports: [CONFIG] })
  class ConfigModule {}

  it('useFactory with inject and imports', async () => {
    const app = await boot([
      TasksModule.forRootAsync({
        imports: [ConfigModule],
        inject: [CONFIG],
        useFactory: (config: { rows: number }) => ({ maxRows: config.rows }),
      }),
    ]);
    expect(app.get<TasksConfig>(TASKS_CONFIG).maxRows).toBe(7);
  });

  it('useClass: an options factory class', async () => {
    @Injectable()
    class TasksOptionsFactory {
      create(): TasksModuleOptions {
        return { cancellation: 'cooperative' };
      }
    }
    const app = await boot([TasksModule.forRootAsync({ useClass: TasksOptionsFactory })]);
    expect(app.get<TasksConfig>(TASKS_CONFIG).cancellation).toBe('cooperative');
  });

  it('useExisting: an options factory the app provides', async () => {
    @Injectable()
    class SharedOptions {
      create(): TasksModuleOptions {
        return { defaultTtlMs: 5000 };
      }
    }
    @Module({ providers: [SharedOptions], exports: [SharedOptions] })
    class SharedModule {}
    const app = await boot([
      TasksModule.forRootAsync({ imports: [SharedModule], useExisting: SharedOptions }),
    ]);
    expect(app.get<TasksConfig>(TASKS_CONFIG).defaultTtlMs).toBe(5000);
  });

  it('global by default with forRootAsync too; isGlobal: false keeps it to the importer', async () => {
    @Injectable()
    class Consumer {
      constructor(readonly tasks: TasksService) {}
    }
    @Module({ providers: [Consumer] })
    class FeatureModule {}
    const app = await boot([TasksModule.forRootAsync({ useFactory: () => ({}) }), FeatureModule]);
    expect(app.get(Consumer).tasks).toBeInstanceOf(TasksService);

    const notGlobal = await bootError([
      TasksModule.forRootAsync({ isGlobal: false, useFactory: () => ({}) }),
      FeatureModule,
    ]);
    expect(notGlobal.message).toMatch(/TasksService/);
  });
});

describe('TasksModule: a custom store through DI', () => {
  async function storeIn(app: INestApplicationContext): Promise<TaskStore> {
    const service = app.get(TasksService);
    const store = app.get<TaskStore>(TaskStore);
    const task = await service.create(owner);
    expect(await store.get(task.taskId)).toEqual(task);
    return store;
  }

  it('an instance', async () => {
    const mine = new InMemoryTaskStore();
    const app = await boot([TasksModule.forRoot({ store: mine })]);
    expect(await storeIn(app)).toBe(mine);
    expect(mine.size).toBe(1);
  });

  it('a class, built through DI with its own dependencies', async () => {
    const app = await boot([
      TasksModule.forRootAsync({
        imports: [AppStoreModule],
        useFactory: () => ({}),
        store: PrefixedStore,
      }),
    ]);
    const store = await storeIn(app);
    expect(store).toBeInstanceOf(PrefixedStore);
    expect((store as PrefixedStore).prefix).toBe('app');
  });

  it('useExisting of a provider the app builds: the very same instance', async () => {
    const app = await boot([
      AppStoreModule,
      TasksModule.forRootAsync({
        imports: [AppStoreModule],
        useFactory: () => ({}),
        store: { useExisting: PrefixedStore },
      }),
    ]);
    const store = await storeIn(app);
    expect(store).toBe(app.get(PrefixedStore));
  });

  it('useFactory with inject', async () => {
    const app = await boot([
      TasksModule.forRootAsync({
        imports: [AppStoreModule],
        useFactory: () => ({}),
        store: {
          useFactory: (prefix: string) => new PrefixedStore(`${prefix}-made`),
          inject: [STORE_PREFIX],
        },
      }),
    ]);
    expect(((await storeIn(app)) as PrefixedStore).prefix).toBe('app-made');
  });
});

describe('TasksModule: notifier through DI', () => {
  it('a custom notifier hears every change', async () => {
    const recorder = new RecordingNotifier();
    const app = await boot([TasksModule.forRoot({ notifier: recorder })]);
    const service = app.get(TasksService);
    const task = await service.create(owner);
    await service.complete(task.taskId, { content: [] });
    expect(recorder.for(task.taskId).map((r: TaskRecord) => r.status)).toEqual([
      'working',
      'completed',
    ]);
  });

  it('notifier: null turns notifications off', async () => {
    const app = await boot([TasksModule.forRoot({ notifier: null })]);
    expect(app.get(TaskNotifier)).toBeNull();
    const service = app.get(TasksService);
    const task = await service.create(owner);
    expect((await service.complete(task.taskId, { content: [] })).status).toBe('completed');
  });
});

describe('TasksModule: the janitor', () => {
  afterEach(() => {
    jest.useRealTimers();
    jest.restoreAllMocks();
  });

  it("runs in the app's SchedulerRegistry, once, and is removed on shutdown", async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [ScheduleModule.forRoot(), TasksModule.forRoot({ janitor: { intervalMs: 1000 } })],
    }).compile();
    const app = await moduleRef.init();
    const registry = app.get(SchedulerRegistry);
    expect(registry.getIntervals()).toEqual([JANITOR_INTERVAL_NAME]);
    await app.close();
    expect(registry.getIntervals()).toEqual([]);
  });

  it('never registers twice, even when two janitors share one registry', async () => {
    // One app holds one registration (a second one fails the boot, see module-wiring.e2e-spec),
    // so two janitors on one registry are built by hand here.
    const warn = jest.spyOn((await import('@nestjs/common')).Logger.prototype, 'warn');
    const registry = new SchedulerRegistry();
    const config = resolveTasksConfig({ janitor: { intervalMs: 1000 } });
    const first = new TasksJanitor(new InMemoryTaskStore(), config, undefined, registry);
    const second = new TasksJanitor(new InMemoryTaskStore(), config, undefined, registry);
    await first.onApplicationBootstrap();
    await second.onApplicationBootstrap();
    expect(registry.getIntervals()).toEqual([JANITOR_INTERVAL_NAME]);
    expect(warn).toHaveBeenCalledWith(expect.stringContaining('exists already'));
    await second.beforeApplicationShutdown();
    expect(registry.getIntervals()).toEqual([JANITOR_INTERVAL_NAME]);
    await first.beforeApplicationShutdown();
    expect(registry.getIntervals()).toEqual([]);
  });

  it('janitor: false registers nothing', async () => {
    const app = await boot([ScheduleModule.forRoot(), TasksModule.forRoot({ janitor: false })]);
    expect(app.get(SchedulerRegistry).getIntervals()).toEqual([]);
  });

  it('each tick removes the expired tasks and logs how many', async () => {
    jest.useFakeTimers({ doNotFake: ['nextTick', 'setImmediate', 'queueMicrotask'] });
    const log = jest.spyOn((await import('@nestjs/common')).Logger.prototype, 'log');
    const app = await boot([
      // No TTL cap, so a task can be unlimited (and then goes terminalTtlMs after it finished).
      TasksModule.forRoot({ maxTtlMs: null, janitor: { intervalMs: 1000, terminalTtlMs: 5000 } }),
    ]);
    const service = app.get(TasksService);
    const store = app.get<InMemoryTaskStore>(TaskStore);
    const short = await Promise.all([1, 2, 3].map(() => service.create(owner, { ttlMs: 1500 })));
    const long = await service.create(owner, { ttlMs: 60_000 });
    const unlimited = await service.create(owner, { ttlMs: null });
    await service.complete(unlimited.taskId, { content: [] });
    expect(store.size).toBe(5);

    await jest.advanceTimersByTimeAsync(1000); // nothing due yet
    expect(store.size).toBe(5);
    expect(log).not.toHaveBeenCalledWith(expect.stringMatching(/^Removed/));

    await jest.advanceTimersByTimeAsync(1000); // t = 2 s: the three 1.5 s tasks are past due
    expect(store.size).toBe(2);
    expect(log).toHaveBeenCalledWith('Removed 3 expired task(s)');
    for (const task of short) await expect(store.get(task.taskId)).resolves.toBeNull();

    await jest.advanceTimersByTimeAsync(4000); // t = 6 s: the finished unlimited task is 5 s+ old
    expect(store.size).toBe(1);
    expect(log).toHaveBeenLastCalledWith('Removed 1 expired task(s)');
    expect(await store.get(long.taskId)).not.toBeNull();
  });

  it('without ScheduleModule it still runs (private registry) and stops on close', async () => {
    jest.useFakeTimers({ doNotFake: ['nextTick', 'setImmediate', 'queueMicrotask'] });
    const moduleRef = await Test.createTestingModule({
      imports: [TasksModule.forRoot({ janitor: { intervalMs: 1000 } })],
    }).compile();
    const app = await moduleRef.init();
    const store = app.get<InMemoryTaskStore>(TaskStore);
    const cleanup = jest.spyOn(store, 'cleanup');
    await jest.advanceTimersByTimeAsync(3000);
    expect(cleanup).toHaveBeenCalledTimes(3);
    await app.close();
    await jest.advanceTimersByTimeAsync(3000);
    expect(cleanup).toHaveBeenCalledTimes(3);
  });

  it('a failing cleanup is logged and the janitor keeps going', async () => {
    jest.useFakeTimers({ doNotFake: ['nextTick', 'setImmediate', 'queueMicrotask'] });
    const error = jest.spyOn((await import('@nestjs/common')).Logger.prototype, 'error');
    const app = await boot([TasksModule.forRoot({ janitor: { intervalMs: 1000 } })]);
    const store = app.get<InMemoryTaskStore>(TaskStore);
    const cleanup = jest.spyOn(store, 'cleanup').mockRejectedValueOnce(new Error('store down'));
    await jest.advanceTimersByTimeAsync(2000);
    expect(error).toHaveBeenCalledWith('Cleanup failed: store down');
    expect(cleanup).toHaveBeenCalledTimes(2);
  });
});
