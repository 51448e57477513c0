import { Module } from '@nestjs/common';
import * as z from 'zod/v4';
import { TasksModule } from '../src/index.js';
import { DemoAuthGuard } from './demo-auth.guard.js';
import { DemoTools } from './demo.tools.js';

@Module({
  imports: [
    TasksModule.forRoot({
      serverInfo: { name: 'nestjs-mcp-tasks-demo', version: '0.1.0' },
      guards: [DemoAuthGuard],
      // A plain (synchronous) tool beside the task tools, on the same server.
      configure: (server) => {
        server.registerTool(
          'echo',
          { description: 'Returns the text.', inputSchema: z.object({ text: z.string() }) },
          ({ text }) => ({ content: [{ type: 'text', text }] }),
        );
      },
    }),
  ],
  providers: [DemoTools],
})
export class DemoModule {}
