/**
 * The fixture app the official conformance suite (@modelcontextprotocol/conformance) is run
 * against: a Nest app built with this library that exposes the tools, resources and prompts the
 * suite's server scenarios call, under the names and with the behaviour those scenarios expect.
 *
 * - The `tasks-*` scenarios (src/scenarios/server/tasks/*.ts in the suite) call the task tools
 *   below (`slow_compute`, `failing_job`, `protocol_error_job`, `confirm_delete`, `multi_input`,
 *   `test_tool_with_task`) and the plain tool `greet`.
 * - The scored `--requirements 2026-07-28` set calls the suite's "everything server" fixtures
 *   (examples/servers/typescript/everything-server.ts in the suite): see `everything.ts`.
 */
import { inputRequired } from '@modelcontextprotocol/server';
import { Injectable, Module } from '@nestjs/common';
import * as z from 'zod/v4';
import { TaskTool, TasksModule, type TaskContext } from '../../src/index.js';
import { registerEverything, verifyRequestState } from './everything.js';

/** Resolves after `ms`, or rejects with the signal's reason when the task is cancelled first. */
const sleep = (ms: number, signal: AbortSignal): Promise<void> =>
  new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
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

const text = (value: string) => ({ content: [{ type: 'text' as const, text: value }] });

/** A form elicitation asking for one field. */
const elicit = (message: string, field: string, type: 'string' | 'boolean') =>
  inputRequired.elicit({
    message,
    requestedSchema: {
      type: 'object',
      properties: {
        // (narrowed per type: the SDK's schema type is a union of one shape per primitive)
        [field]:
          type === 'string' ? { type: 'string', title: field } : { type: 'boolean', title: field },
      },
      required: [field],
    },
  });

const SlowComputeInput = z.object({
  seconds: z.number().min(0).max(600),
  label: z.string().optional(),
});

const ConfirmDeleteInput = z.object({ filename: z.string() });

/** The task tools of the `tasks-*` scenarios (each scenario's header names what it needs). */
@Injectable()
export class ConformanceTaskTools {
  /**
   * Sleeps `seconds`, then completes; `tasks/cancel` while it sleeps settles it `cancelled`. Task
   * support "optional": a client without the extension gets the result synchronously.
   */
  @TaskTool({
    name: 'slow_compute',
    description: 'Sleeps `seconds` seconds, then answers.',
    input: SlowComputeInput,
    pollIntervalMs: 100,
    whenClientLacksTasks: 'inline',
  })
  async slowCompute(input: z.infer<typeof SlowComputeInput>, task: TaskContext) {
    await task.progress(`Computing ${input.label ?? ''}`.trim());
    await sleep(input.seconds * 1000, task.signal);
    return text(`Computed ${input.label ?? 'result'} after ${input.seconds}s`);
  }

  /**
   * A tool execution error (`isError: true`) after a short while: the task completes with it
   * (`failed` is for protocol errors). Requires the tasks extension (-32021 without it).
   */
  @TaskTool({
    name: 'failing_job',
    description: 'Always reports a tool execution error.',
    pollIntervalMs: 100,
  })
  async failingJob(_input: unknown, task: TaskContext) {
    await sleep(200, task.signal);
    return { ...text('The job failed'), isError: true };
  }

  /** A protocol-level error: the task ends `failed` with the JSON-RPC error inlined. */
  @TaskTool({
    name: 'protocol_error_job',
    description: 'Fails with a protocol (JSON-RPC) error.',
    pollIntervalMs: 100,
  })
  async protocolErrorJob() {
    throw Object.assign(new Error('Internal error in protocol_error_job'), { code: -32603 });
  }

  /** One elicitation (`confirm`), then completes. */
  @TaskTool({
    name: 'confirm_delete',
    description: 'Asks for confirmation, then pretends to delete the file.',
    input: ConfirmDeleteInput,
    pollIntervalMs: 100,
  })
  async confirmDelete(input: z.infer<typeof ConfirmDeleteInput>, task: TaskContext) {
    const { confirm } = await task.requireInput({
      confirm: elicit(`Delete ${input.filename}?`, 'confirm', 'boolean'),
    });
    const yes = confirm.action === 'accept';
    return text(yes ? `Deleted ${input.filename}` : `Kept ${input.filename}`);
  }

  /** Two elicitations pending at once (partial fulfilment keeps the task input_required). */
  @TaskTool({
    name: 'multi_input',
    description: 'Asks two questions at once.',
    pollIntervalMs: 100,
  })
  async multiInput(_input: unknown, task: TaskContext) {
    const answers = await task.requireInput({
      name: elicit('What is your name?', 'name', 'string'),
      confirm: elicit('Proceed?', 'confirm', 'boolean'),
    });
    return text(`Answers: ${Object.keys(answers).sort().join(', ')}`);
  }

  /**
   * The MRTR → task composition fixture: asks for `user_name` before the task exists (round 1 is
   * a synchronous `input_required` result; the retry with the answer mints the task), then
   * completes with it.
   */
  @TaskTool({
    name: 'test_tool_with_task',
    description: 'Asks for a user name, then greets it from a task.',
    pollIntervalMs: 100,
    requireInputFirst: { user_name: elicit('What is your name?', 'name', 'string') },
  })
  async toolWithTask(_input: unknown, task: TaskContext) {
    const given = (task.firstInput.user_name?.content as { name?: unknown } | undefined)?.name;
    return text(`Hello, ${typeof given === 'string' ? given : 'stranger'}!`);
  }
}

/** The fixture app: the task tools above, `greet` and the everything-server fixtures. */
@Module({
  imports: [
    TasksModule.forRoot({
      serverInfo: { name: 'nestjs-mcp-tasks-conformance', version: '0.0.0' },
      serverOptions: { requestState: { verify: verifyRequestState } },
      configure: (server, changes) => {
        server.registerTool(
          'greet',
          { description: 'Says hello.', inputSchema: z.object({ name: z.string() }) },
          ({ name }) => text(`Hello, ${name}!`),
        );
        registerEverything(server, changes);
      },
    }),
  ],
  providers: [ConformanceTaskTools],
})
export class ConformanceFixtureModule {}
