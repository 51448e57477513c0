// An ESM app on Fastify. Auth is an app-wide guard (APP_GUARD), TaskErrors from REST controllers
// go through TaskErrorFilter as an APP_FILTER, and the feature module imports bare TasksModule.
import { Module } from '@nestjs/common';
import { APP_FILTER, APP_GUARD } from '@nestjs/core';
import { TaskErrorFilter, TasksModule } from 'nestjs-mcp-tasks';
import { AuthModule, BearerGuard } from './auth.js';
import { GreetingTools } from './greeting.tools.js';
import { ReportsController, ReportsService } from './reports.js';

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
    }),
    ReportsModule,
  ],
  providers: [
    { provide: APP_GUARD, useExisting: BearerGuard },
    { provide: APP_FILTER, useClass: TaskErrorFilter },
  ],
})
export class AppModule {}
