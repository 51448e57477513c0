// An ESM app on Fastify. Auth is an app-wide guard (APP_GUARD), TaskErrors from REST controllers
// go through TaskErrorFilter as an APP_FILTER, and the feature module imports bare TasksModule.
// The task console is on, for alice only (its assets must ship in the package).
import { type CanActivate, type ExecutionContext, Injectable, Module } from '@nestjs/common';
import { APP_FILTER, APP_GUARD } from '@nestjs/core';
import { TaskErrorFilter, TasksModule } from 'nestjs-mcp-tasks';
import { AuthModule, BearerGuard } from './auth.js';
import { GreetingTools } from './greeting.tools.js';
import { ReportsController, ReportsService } from './reports.js';

/** The console's admin rule: the user BearerGuard (app-wide) found must be alice. */
@Injectable()
export class AliceOnlyGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    return context.switchToHttp().getRequest<{ user?: { sub: string } }>().user?.sub === 'alice';
  }
}

@Module({
  imports: [TasksModule, AuthModule],
  controllers: [ReportsController],
  providers: [ReportsService, GreetingTools],
})
export class ReportsModule {}

@Module({
  imports: [
    AuthModule,
    TasksModule.forRootAsync({
      useFactory: () => ({ serverInfo: { name: 'consumer-esm-fastify', version: '1.0.0' } }),
      console: { guards: [AliceOnlyGuard] },
    }),
    ReportsModule,
  ],
  providers: [
    { provide: APP_GUARD, useExisting: BearerGuard },
    { provide: APP_FILTER, useClass: TaskErrorFilter },
  ],
})
export class AppModule {}
