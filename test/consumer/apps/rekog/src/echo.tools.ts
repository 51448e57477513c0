import { Payload } from '@nestjs/microservices';
import { McpController, Tool } from '@rekog/mcp-nest';
import { z } from 'zod';

/** The app's plain tool, as rekog's README writes one: it answers at once, never as a task. */
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
