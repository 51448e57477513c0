// A CommonJS app on Express. The endpoint's guard is a class with a dependency (UsersService),
// given in `guards`; the feature module imports nothing from nestjs-mcp-tasks and injects
// TasksService all the same.
import { Module } from '@nestjs/common';
import { TasksModule } from 'nestjs-mcp-tasks';
import { AuthModule, BearerGuard } from './auth.js';
import { GreetingTools } from './greeting.tools.js';
import { ReportsController, ReportsService } from './reports.js';

@Module({
  imports: [AuthModule],
  controllers: [ReportsController],
  providers: [ReportsService, GreetingTools],
})
export class ReportsModule {}

@Module({
  imports: [
    AuthModule,
    TasksModule.forRoot({
      serverInfo: { name: 'consumer-cjs-express', version: '1.0.0' },
      guards: [BearerGuard],
    }),
    ReportsModule,
  ],
})
export class AppModule {}
