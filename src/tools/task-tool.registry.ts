import { Injectable } from '@nestjs/common';
import type { StandardSchemaWithJSON } from '@modelcontextprotocol/server';
import type { TaskToolOptions } from './task-tool.decorator.js';
import type { TaskRequest } from './scoped-calls.js';

/** A discovered `@TaskTool` method with everything a request needs, built once at bootstrap. */
export interface TaskToolDefinition {
  readonly name: string;
  readonly options: Readonly<TaskToolOptions>;
  /**
   * The tool's registration for the SDK's McpServer (schemas precomputed; a tool without `input`
   * has the open schema that passes the arguments on as sent).
   */
  readonly config: {
    title?: string;
    description?: string;
    inputSchema: StandardSchemaWithJSON;
    annotations?: TaskToolOptions['annotations'];
  };
  /** The decorated method itself, where other libraries' method decorators keep their metadata. */
  // eslint-disable-next-line @typescript-eslint/no-unsafe-function-type
  readonly method?: Function;
  /**
   * Calls the decorated method on its instance: for a request-scoped provider, on one resolved for
   * this call with `request` as its REQUEST (see ScopedToolCalls).
   */
  readonly invoke: (input: unknown, context: unknown, request?: TaskRequest) => unknown;
  /** The tool's provider is request-scoped: each call gets a DI sub-tree of its own. */
  readonly scoped?: true;
}

/**
 * What a 2025-11-25 `tools/list` says of a task tool: a task-only tool must be called as a task
 * (`"required"`), an inline one may be (`"optional"`).
 */
export function taskSupportOf(tool: TaskToolDefinition): 'required' | 'optional' {
  return tool.options.whenClientLacksTasks === 'reject' ? 'required' : 'optional';
}

/** Why a task-only tool called without a task is refused (an error, or a tool error result). */
export function mustBeCalledAsTask(name: string): string {
  return `Tool ${name} must be called as a task (execution.taskSupport "required")`;
}

/** The task tools of the app, by name. Filled by the explorer during module init. */
@Injectable()
export class TaskToolRegistry {
  private readonly tools = new Map<string, TaskToolDefinition>();

  add(tool: TaskToolDefinition): void {
    this.tools.set(tool.name, tool);
  }

  get(name: string): TaskToolDefinition | undefined {
    return this.tools.get(name);
  }

  has(name: string): boolean {
    return this.tools.has(name);
  }

  all(): TaskToolDefinition[] {
    return [...this.tools.values()];
  }
}
