import { Module } from '@nestjs/common';
import { TasksModule } from '../../src/index.js';
import { DemoTools } from '../demo.tools.js';
import { EchoTools } from './echo.tools.js';
import { McpController } from './mcp.controller.js';

/** The name and version the rekog demo gives its MCP server, on both protocol eras. */
export const REKOG_DEMO_SERVER = { name: 'nestjs-mcp-tasks-rekog-demo', version: '0.1.0' };

/**
 * A @rekog/mcp-nest app with tasks: rekog's `echo` and the demo's task tools (`add_slowly`,
 * `greet`, `wait_for_cancel`, `fail_with`) on one endpoint, rekog's `/mcp`. `path: false`
 * mounts no endpoint of this package's own: rekog's route serves the task traffic too.
 */
@Module({
  imports: [TasksModule.forRoot({ path: false, serverInfo: REKOG_DEMO_SERVER })],
  controllers: [McpController, EchoTools],
  providers: [DemoTools],
})
export class RekogModule {}
