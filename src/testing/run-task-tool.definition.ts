/**
 * What `runTaskTool` runs: the tool's definition as the explorer builds it (from a `@TaskTool`
 * method or a plain function), and its input checked as the endpoint checks it.
 */
import { Reflector } from '@nestjs/core';
import type { StandardSchemaWithJSON } from '@modelcontextprotocol/server';
import { isPlainObject } from '../task.js';
import { TASK_TOOL_METADATA } from '../tasks.constants.js';
import { loadDtoLibraries, mayBeDtoClass } from '../tools/dto-libraries.js';
import { formatIssue, toToolInputSchema, type ValidationIssue } from '../tools/input-schema.js';
import { classPrototypes } from '../tools/prototype-chain.js';
import type { TaskContext } from '../tools/task-context.js';
import type { TaskToolOptions } from '../tools/task-tool.decorator.js';
import type { TaskToolDefinition } from '../tools/task-tool.registry.js';

/** A plain function tool: `(input, task) => result`. */
export type ToolFunction = (input: never, task: TaskContext) => unknown;

/** The input did not pass the tool's schema; the message is what the endpoint would answer. */
export class TaskToolInputError extends Error {
  constructor(
    message: string,
    readonly issues: readonly { message: string; path?: readonly unknown[] }[],
  ) {
    super(message);
    this.name = 'TaskToolInputError';
  }
}

// ---------------------------------------------------------------------------------------------
// Tool definitions, as the explorer builds them
// ---------------------------------------------------------------------------------------------

const reflector = new Reflector();

function toolOptionsOf(fn: unknown): TaskToolOptions | undefined {
  if (typeof fn !== 'function') return undefined;
  return reflector.get<TaskToolOptions | undefined>(TASK_TOOL_METADATA, fn);
}

/** The `@TaskTool` method of `instance` named `name` (its method's name or the tool's). */
export async function decoratedTool(instance: object, name: string): Promise<TaskToolDefinition> {
  if (instance === null || typeof instance !== 'object') {
    throw new TypeError(`runTaskTool: expected an instance or a function, got ${String(instance)}`);
  }
  const owner = instance.constructor?.name ?? 'the instance';
  const methods = methodNames(instance);
  let methodName = name;
  let options = toolOptionsOf((instance as Record<string, unknown>)[name]);
  if (options === undefined) {
    // Perhaps the tool's name rather than the method's.
    const found = methods.find(
      (candidate) => toolOptionsOf((instance as Record<string, unknown>)[candidate])?.name === name,
    );
    if (found !== undefined) {
      methodName = found;
      options = toolOptionsOf((instance as Record<string, unknown>)[found]);
    }
  }
  if (options === undefined) {
    const tools = methods.filter((candidate) =>
      toolOptionsOf((instance as Record<string, unknown>)[candidate]),
    );
    throw new TypeError(
      `runTaskTool: ${owner} has no @TaskTool method or tool named ${JSON.stringify(name)}` +
        (tools.length > 0 ? `; its task tools are ${tools.join(', ')}` : '; it has no @TaskTool'),
    );
  }
  const method = (instance as Record<string, (input: unknown, context: unknown) => unknown>)[
    methodName
  ]!;
  return {
    name: options.name,
    options,
    config: { inputSchema: await inputSchemaOf(options.input, options.name) },
    invoke: (input, context) => method.call(instance, input, context),
  };
}

function methodNames(instance: object): string[] {
  const names = new Set<string>();
  for (const prototype of classPrototypes(instance)) {
    for (const key of Object.getOwnPropertyNames(prototype)) {
      if (key !== 'constructor') names.add(key);
    }
  }
  return [...names];
}

/** A plain function as a tool: `name` defaults to the function's; `input` is its schema. */
export async function functionTool(
  fn: ToolFunction,
  name: string | undefined = fn.name || 'task_tool',
  input?: TaskToolOptions['input'],
): Promise<TaskToolDefinition> {
  const toolOptions: TaskToolOptions = { name, ...(input !== undefined && { input }) };
  return {
    name,
    options: toolOptions,
    config: { inputSchema: await inputSchemaOf(input, name) },
    invoke: (input, context) => fn(input as never, context as TaskContext),
  };
}

/** The tool's input schema, as the explorer builds it (class-validator loaded for a DTO class). */
async function inputSchemaOf(input: TaskToolOptions['input'], name: string) {
  if (mayBeDtoClass(input)) await loadDtoLibraries();
  return toToolInputSchema(input, name);
}

/** The tool with a run's own TTL, poll interval and first status message. */
export function withOverrides(
  tool: TaskToolDefinition,
  options: Pick<TaskToolOptions, 'ttlMs' | 'pollIntervalMs' | 'statusMessage'>,
): TaskToolDefinition {
  const { ttlMs, pollIntervalMs, statusMessage } = options;
  return {
    ...tool,
    options: {
      ...tool.options,
      ...(ttlMs !== undefined && { ttlMs }),
      ...(pollIntervalMs !== undefined && { pollIntervalMs }),
      ...(statusMessage !== undefined && { statusMessage }),
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Input validation, as the endpoint does it (src/mcp/task-tool-call.handler.ts)
// ---------------------------------------------------------------------------------------------

/** The input as the endpoint passes it to the tool, or a TaskToolInputError. */
export async function validated(tool: TaskToolDefinition, input: unknown): Promise<unknown> {
  const args = input === undefined ? {} : input;
  if (!isPlainObject(args)) {
    throw new TaskToolInputError(
      `Invalid params: the arguments of tool ${tool.name} must be an object`,
      [{ message: 'arguments must be an object' }],
    );
  }
  const schema: StandardSchemaWithJSON = tool.config.inputSchema;
  const checked = await schema['~standard'].validate(args);
  if (checked.issues !== undefined && checked.issues.length > 0) {
    const issues = checked.issues as readonly ValidationIssue[];
    const detail = issues.map(formatIssue).join(', ');
    throw new TaskToolInputError(
      `Input validation error: Invalid arguments for tool ${tool.name}: ${detail}`,
      issues.map((issue) => ({
        message: issue.message,
        ...(issue.path !== undefined && {
          path: issue.path.map((part) => (typeof part === 'object' ? part.key : part)),
        }),
      })),
    );
  }
  return (checked as { value: unknown }).value;
}
