import { TasksConfigError, show } from './errors.js';
import { isTaskNotifier } from './notify/task-notifier.js';
import { mustBe } from './option-checks.js';
import { missingLeaseMethods, missingStoreMethods, type TaskStore } from './store/task-store.js';
import { DEFAULT_MCP_PATH } from './tasks.constants.js';
import type { TasksModuleExtras } from './interfaces/tasks-module-options.interface.js';

/*
 * The checks of TasksModule's registration extras (given beside the options, see EXTRA_KEYS):
 * the endpoint's path, the guards, and the store and notifier parts. Each throws at once.
 */

/** The `path` extra: where the endpoint is served, or `false` for none. */
export function checkPath(path: unknown): string | false {
  if (path === undefined) return DEFAULT_MCP_PATH;
  if (path === false) return false;
  if (typeof path !== 'string' || !/^\/?[A-Za-z0-9._~!$&'()*+,;=:@%/-]*$/.test(path)) {
    throw mustBe('path', 'a URL path or false', path);
  }
  return path;
}

/**
 * The `guards` extra (or another list of guards, named by `key`): guard classes or instances
 * (anything with a `canActivate` method).
 */
export function checkGuards(
  guards: TasksModuleExtras['guards'],
  key = 'guards',
): NonNullable<TasksModuleExtras['guards']> {
  if (guards === undefined) return [];
  if (
    !Array.isArray(guards) ||
    !guards.every(
      (guard) =>
        typeof guard === 'function' ||
        (guard !== null && typeof guard === 'object' && typeof guard.canActivate === 'function'),
    )
  ) {
    throw new TasksConfigError(
      `${key} must be an array of guard classes or instances, got ${show(guards)}`,
    );
  }
  return guards;
}

const RECIPE_KEYS = ['useClass', 'useValue', 'useExisting', 'useFactory'] as const;

/**
 * Whether a `store` / `notifier` extra that is not a class is a Nest provider recipe (else it is
 * an instance). A part naming two recipes is refused.
 */
export function isPartRecipe(key: string, part: unknown): boolean {
  const recipe =
    part !== null && typeof part === 'object' ? RECIPE_KEYS.filter((name) => name in part) : [];
  if (recipe.length > 1) {
    throw new TasksConfigError(`${key} names ${recipe.join(' and ')}; give one of them`);
  }
  return recipe.length === 1;
}

/** The check of a built `store` / `notifier` part: `problemWith` says what is wrong, or null. */
export function checkPart<T>(
  key: string,
  value: unknown,
  problemWith: (value: unknown) => string | null,
): T {
  const problem = problemWith(value);
  if (problem !== null) throw new TasksConfigError(`${key} ${problem}, got ${show(value)}`);
  return value as T;
}

/** What keeps a value from being the `store` part, or null. */
export function storeProblem(value: unknown): string | null {
  const missing = missingStoreMethods(value);
  if (missing.length > 0) return `must implement TaskStore (missing ${missing.join(', ')})`;
  const partial = missingLeaseMethods(value as TaskStore);
  return partial.length === 0
    ? null
    : `must implement all of TaskStoreLeases or none of it (missing ${partial.join(', ')})`;
}

/** What keeps a value from being the `notifier` part, or null. */
export function notifierProblem(value: unknown): string | null {
  return isTaskNotifier(value) ? null : 'must implement TaskNotifier (a notify method)';
}
