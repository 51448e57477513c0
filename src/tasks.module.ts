import { type DynamicModule, Module, type NestModule, Optional } from '@nestjs/common';
import { ConfigurableModuleClass, type OPTIONS_TYPE } from './tasks.module-definition.js';
import { bareImportProviders, EXPORTED_TOKENS, TasksRegistration } from './tasks.registration.js';

/**
 * The MCP Tasks extension for a NestJS app. Register it once, in the root module; the
 * registration is global by default, so feature modules inject TasksService and the TaskStore
 * token without importing anything (a bare `imports: [TasksModule]` works too).
 *
 * ```ts
 * TasksModule.forRoot({ cancellation: 'cooperative', maxRows: 50_000 })
 * TasksModule.forRootAsync({
 *   imports: [ConfigModule],
 *   inject: [ConfigService],
 *   useFactory: (config: ConfigService) => ({ defaultTtlMs: config.get('TASK_TTL_MS') }),
 *   store: { useExisting: MY_STORE },
 * })
 * ```
 *
 * The static module (bare `TasksModule`) only re-exports what the app's registration provides;
 * `forRoot` / `forRootAsync` carry the providers, the endpoint and the exports.
 */
@Module({
  providers: bareImportProviders,
  exports: EXPORTED_TOKENS,
})
export class TasksModule extends ConfigurableModuleClass implements NestModule {
  constructor(@Optional() private readonly registration?: TasksRegistration) {
    super();
  }

  /** Runs at init before the routes are mapped: a second registration fails here. */
  configure(): void {
    this.registration?.assertOnlyOne();
  }

  /** Registers the module (once, in the root module); `forRoot()` takes every default. */
  static override forRoot(options: typeof OPTIONS_TYPE = {}): DynamicModule {
    return super.forRoot(options);
  }
}
