import { Inject, Injectable, type OnModuleInit, Optional, type Provider } from '@nestjs/common';
import { ModulesContainer } from '@nestjs/core';
import { TasksConfigError } from './errors.js';
import { McpServerNotifier } from './mcp/mcp-server.notifier.js';
import { McpTasksFront } from './mcp/tasks-front.js';
import { TaskNotifier } from './notify/task-notifier.js';
import { TaskStore } from './store/task-store.js';
import { neverRegistered, notGlobal, registeredTwice } from './tasks.messages.js';
import { TasksService } from './tasks.service.js';

/**
 * One registration of the module (`forRoot` / `forRootAsync`) and the parts it exports. It marks
 * the registration's module, so an app with two registrations fails at init with a message that
 * says what to do (two would map the endpoint twice, and each request would then be read twice).
 */
@Injectable()
export class TasksRegistration implements OnModuleInit {
  constructor(
    readonly service: TasksService,
    @Inject(TaskStore) readonly store: TaskStore,
    @Optional() @Inject(TaskNotifier) readonly notifier: TaskNotifier | null,
    readonly serverNotifier: McpServerNotifier,
    readonly front: McpTasksFront,
    private readonly modules: ModulesContainer,
  ) {}

  /**
   * Throws when the app holds another registration. Called from TasksModule's `configure` (an
   * HTTP app: before the routes are mapped, where Fastify would refuse the second endpoint with a
   * message of its own) and at module init (any app, application contexts included).
   */
  assertOnlyOne(): void {
    const count = registrations(this.modules);
    if (count > 1) throw new TasksConfigError(registeredTwice(count));
  }

  onModuleInit(): void {
    this.assertOnlyOne();
  }
}

/** How many modules of this app are registrations (import the same DynamicModule twice: one). */
function registrations(modules: ModulesContainer): number {
  let count = 0;
  for (const module of modules.values()) if (module.providers.has(TasksRegistration)) count++;
  return count;
}

/**
 * The tokens a registration exports, and so what a bare `imports: [TasksModule]` offers: the
 * public injectables of src/index.ts, nothing internal.
 */
export const EXPORTED_TOKENS = [
  TasksService,
  TaskStore,
  TaskNotifier,
  McpServerNotifier,
  McpTasksFront,
];

const PARTS = new Map<unknown, (registration: TasksRegistration) => unknown>([
  [TasksService, (registration) => registration.service],
  [TaskStore, (registration) => registration.store],
  [TaskNotifier, (registration) => registration.notifier],
  [McpServerNotifier, (registration) => registration.serverNotifier],
  [McpTasksFront, (registration) => registration.front],
]);

/**
 * The providers of bare `TasksModule` (the static module a feature module may import): each
 * exported token taken from the app's registration, which is visible there when it is global.
 * Without one in reach the boot fails naming the fix. A registration overrides them with its own.
 */
export const bareImportProviders: Provider[] = EXPORTED_TOKENS.map((token) => ({
  provide: token,
  useFactory: (registration: TasksRegistration | undefined, modules: ModulesContainer) => {
    if (registration === undefined) {
      throw new TasksConfigError(registrations(modules) === 0 ? neverRegistered() : notGlobal());
    }
    return PARTS.get(token)!(registration);
  },
  inject: [{ token: TasksRegistration, optional: true }, ModulesContainer],
}));
