import { Injectable } from '@nestjs/common';
import { IsString, MaxLength } from 'class-validator';
import { TaskTool, type TaskContext } from 'nestjs-mcp-tasks';

export class GreetInput {
  @IsString()
  @MaxLength(40)
  greeting!: string;
}

/** Task tools of the app: one asks the client a question, one runs until it is cancelled. */
@Injectable()
export class GreetingTools {
  @TaskTool({ name: 'greet', description: 'Asks for a name, then greets it.', input: GreetInput })
  async greet(input: GreetInput, task: TaskContext) {
    await task.progress('Asking for a name');
    const { name } = await task.requireInput({
      name: {
        method: 'elicitation/create',
        params: {
          message: 'Whom shall I greet?',
          requestedSchema: {
            type: 'object',
            properties: { name: { type: 'string' } },
            required: ['name'],
          },
        },
      },
    });
    const content = name.content as { name?: unknown } | undefined;
    const who =
      name.action === 'accept' && typeof content?.name === 'string' ? content.name : 'stranger';
    return { content: [{ type: 'text', text: `${input.greeting}, ${who}!` }] };
  }

  @TaskTool({ name: 'wait_for_cancel', description: 'Works until it is cancelled.' })
  async waitForCancel(_input: object, task: TaskContext) {
    await task.progress('Waiting to be cancelled');
    await new Promise((resolve) => task.signal.addEventListener('abort', resolve, { once: true }));
    return 'cancelled';
  }
}
