import { Payload } from '@nestjs/microservices';
import { McpController, Tool } from '@rekog/mcp-nest';
import * as z from 'zod/v4';

/**
 * The app's plain tool, written the @rekog/mcp-nest way: a `@Tool` on an `@McpController` class.
 * It answers at once, so it never becomes a task; the task tools (examples/demo.tools.ts) sit
 * beside it on the same endpoint.
 */
@McpController()
export class EchoTools {
  @Tool({
    name: 'echo',
    description: 'Returns the text.',
    parameters: z.object({ text: z.string() }),
  })
  echo(@Payload() { text }: { text: string }) {
    return { content: [{ type: 'text', text }] };
  }
}
