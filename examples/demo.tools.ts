import { Injectable } from '@nestjs/common';
import { Type } from 'class-transformer';
import { IsInt, IsNumber, IsOptional, IsString, Max, Min } from 'class-validator';
import { TaskTool, type TaskContext, type WhenClientLacksTasks } from '../src/index.js';

/**
 * What the task tools do when a client does not declare the tasks extension: by default they
 * refuse; `DEMO_WHEN_CLIENT_LACKS_TASKS=inline` runs them to the end and answers their result, for
 * trying a client without tasks (such as the Inspector 1.x, see docs/inspector.md).
 */
const whenClientLacksTasks = (process.env.DEMO_WHEN_CLIENT_LACKS_TASKS ??
  'reject') as WhenClientLacksTasks;

export class AddInput {
  @IsNumber()
  a!: number;

  @IsNumber()
  b!: number;

  /** How long the addition pretends to take. */
  @IsOptional()
  @IsInt()
  @Min(0)
  @Max(60_000)
  @Type(() => Number)
  delayMs?: number;
}

export class FailInput {
  @IsInt()
  code!: number;

  @IsString()
  message!: string;
}

const sleep = (ms: number, signal: AbortSignal): Promise<void> =>
  new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        reject(signal.reason);
      },
      { once: true },
    );
  });

/** The demo's task tools: each method answers with a task the client follows to the end. */
@Injectable()
export class DemoTools {
  @TaskTool({
    name: 'add_slowly',
    title: 'Add slowly',
    description: 'Adds two numbers, reporting progress on the way.',
    input: AddInput,
    pollIntervalMs: 200,
    whenClientLacksTasks,
  })
  async addSlowly(input: AddInput, task: TaskContext) {
    const delayMs = input.delayMs ?? 500;
    const steps = 4;
    for (let step = 1; step <= steps; step++) {
      await sleep(delayMs / steps, task.signal);
      await task.progress(`Adding: ${Math.round((step / steps) * 100)}%`);
    }
    const sum = input.a + input.b;
    return { content: [{ type: 'text', text: String(sum) }], structuredContent: { sum } };
  }

  @TaskTool({
    name: 'greet',
    title: 'Greet',
    description: 'Asks for your name, then greets you.',
    pollIntervalMs: 200,
    whenClientLacksTasks,
  })
  async greet(_input: unknown, task: TaskContext) {
    const { name } = await task.requireInput(
      {
        name: {
          method: 'elicitation/create',
          params: {
            mode: 'form',
            message: 'What is your name?',
            requestedSchema: {
              type: 'object',
              properties: { name: { type: 'string', title: 'Name' } },
              required: ['name'],
            },
          },
        },
      },
      { statusMessage: 'Waiting for your name' },
    );
    const given = (name?.content as { name?: unknown } | undefined)?.name;
    if (name?.action !== 'accept' || typeof given !== 'string') {
      return { content: [{ type: 'text', text: 'Hello, stranger!' }] };
    }
    return { content: [{ type: 'text', text: `Hello, ${given}!` }] };
  }

  @TaskTool({
    name: 'wait_for_cancel',
    title: 'Wait for cancel',
    description: 'Keeps working until it is cancelled.',
    pollIntervalMs: 200,
    whenClientLacksTasks,
  })
  async waitForCancel(_input: unknown, task: TaskContext) {
    await task.progress('Working until cancelled');
    await new Promise<never>((_, reject) =>
      task.signal.addEventListener('abort', () => reject(task.signal.reason), { once: true }),
    );
  }

  @TaskTool({
    name: 'fail_with',
    title: 'Fail with',
    description: 'Fails with the JSON-RPC error you name.',
    input: FailInput,
    pollIntervalMs: 200,
    whenClientLacksTasks,
  })
  async failWith(input: FailInput) {
    throw Object.assign(new Error(input.message), { code: input.code });
  }
}
