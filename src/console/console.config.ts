import { show, TasksConfigError } from '../errors.js';
import type { TasksConsoleOptions } from '../interfaces/tasks-module-options.interface.js';
import type { AppGuards } from '../mcp/mcp-app.guard.js';
import { checkGuards } from '../tasks-extras.config.js';

/** Where the task console is served when its options name no path. */
export const DEFAULT_CONSOLE_PATH = 'mcp-tasks';

/** Injection token of `console.guards` as given (classes and instances). */
export const CONSOLE_GUARDS = Symbol('nestjs-mcp-tasks:console-guards');

/** The console, as its options were checked: where it is served and who may open it. */
export interface ConsoleSettings {
  readonly path: string;
  readonly guards: AppGuards;
}

const PATH = /^\/?[A-Za-z0-9._~!$&'()*+,;=:@%/-]*$/;
const KEYS: ReadonlySet<string> = new Set(['path', 'guards']);

/**
 * The `console` extra: `undefined` (off, the default) or `{ path?, guards }`. `guards` is
 * required (the app's own admin rule: an empty list is allowed but must be written), the path
 * must be a URL path other than the MCP endpoint's (`mcpPath`). Refused with TasksConfigError,
 * naming the key, at registration.
 */
export function checkConsole(
  options: TasksConsoleOptions | undefined,
  mcpPath: string | false,
): ConsoleSettings | false {
  if (options === undefined) return false;
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw mustBe('console', 'an object { path?, guards }', options);
  }
  for (const key of Object.keys(options)) {
    if (!KEYS.has(key)) throw new TasksConfigError(`console: unknown option ${key}`);
  }
  const { path = DEFAULT_CONSOLE_PATH, guards } = options;
  if (typeof path !== 'string' || !PATH.test(path) || trimSlashes(path) === '') {
    throw mustBe('console.path', 'a URL path other than /', path);
  }
  if (mcpPath !== false && trimSlashes(path) === trimSlashes(mcpPath)) {
    throw new TasksConfigError(
      `console.path must differ from the MCP endpoint's path, got ${show(path)} for both`,
    );
  }
  if (guards === undefined) {
    throw new TasksConfigError(
      'console.guards is required: the guards that let only your admins in (e.g. [AdminGuard]); ' +
        'they run after the app-wide guards on every route of the console',
    );
  }
  return { path: trimSlashes(path), guards: checkGuards(guards, 'console.guards') };
}

const trimSlashes = (path: string): string => path.replace(/^\/+|\/+$/g, '');

const mustBe = (key: string, expectation: string, value: unknown): TasksConfigError =>
  new TasksConfigError(`${key} must be ${expectation}, got ${show(value)}`);
