// A CommonJS app on Express, as rekog's README has one: its `echo` is a rekog `@Tool`; the task
// tools are a `@TaskTool` provider on the same endpoint. `path: false`: rekog's route is the
// endpoint, and nestjs-mcp-tasks mounts none of its own.
import { Module } from '@nestjs/common';
import { TasksModule } from 'nestjs-mcp-tasks';
import { AuthModule } from './auth.js';
import { EchoTools } from './echo.tools.js';
import { GreetingTools } from './greeting.tools.js';
import { McpController } from './mcp.js';

@Module({
  imports: [
    AuthModule,
    TasksModule.forRoot({
      path: false,
      serverInfo: { name: 'consumer-rekog', version: '1.0.0' },
    }),
  ],
  controllers: [McpController, EchoTools],
  providers: [GreetingTools],
})
export class AppModule {}
