import { TasksConfigError } from './errors.js';
import type { TaskToolOptions } from './tools/task-tool.decorator.js';

/** The options of `@TaskTool()`: one given to a module says where it belongs. */
const TASK_TOOL_KEYS: ReadonlySet<string> = new Set(
  Object.keys({
    name: true,
    title: true,
    description: true,
    input: true,
    annotations: true,
    ttlMs: true,
    pollIntervalMs: true,
    statusMessage: true,
    whenClientLacksTasks: true,
    queue: true,
    keepArguments: true,
    requireInputFirst: true,
    durable: true,
  } satisfies Record<keyof TaskToolOptions, true>),
);

/** Whether `key` is an option of `@TaskTool()`. */
export function isTaskToolOption(key: string): boolean {
  return TASK_TOOL_KEYS.has(key);
}

/** The fix for a `@TaskTool()` option given to a module (`TasksModule`, `TasksQueueModule`). */
export function taskToolOptionHint(key: string, module: string): string {
  return `${key} is a @TaskTool() option, not a ${module} one: set it on each tool, @TaskTool({ name, ${key} })`;
}

/**
 * The problems of one set of module options, gathered so that one boot reports them all: each
 * check notes its problem and the validation goes on with a stand-in value, so an unknown option
 * never hides a bad value next to it. `throwIfAny` then throws one TasksConfigError: a single
 * problem as its message, several as a list under a header naming the options.
 */
export class OptionProblems {
  private readonly found: string[] = [];

  /** @param subject what the options are, for the header: `TasksModule options`. */
  constructor(private readonly subject: string) {}

  /** Notes a problem (a message that names the option and says what it must be). */
  add(message: string): void {
    this.found.push(message);
  }

  /**
   * Notes every key of `value` not in `known`, each with its likely fix (see unknownOption).
   * `where` is the path of the object (`''`, `'listen.'`).
   */
  unknownKeys(
    where: string,
    value: object,
    known: ReadonlySet<string>,
    elsewhere?: (key: string) => string | undefined,
  ): void {
    for (const key of Object.keys(value)) {
      if (!known.has(key)) this.add(unknownOption(where, key, known, elsewhere?.(key)));
    }
  }

  /** How many problems are noted so far (a check compares it before and after). */
  get count(): number {
    return this.found.length;
  }

  /** Throws the problems noted, if any, as one TasksConfigError. */
  throwIfAny(): void {
    if (this.found.length === 0) return;
    if (this.found.length === 1) throw new TasksConfigError(this.found[0]!);
    throw new TasksConfigError(
      `${this.subject} have ${this.found.length} problems:\n` +
        this.found.map((problem) => `  - ${problem}`).join('\n'),
    );
  }
}

/**
 * What an unknown option most likely meant: the hint of the caller (an option of another module
 * or of `@TaskTool()`, an option that belongs in a nested object), else a known option spelled
 * nearly the same, else the list of known options.
 */
function unknownOption(
  where: string,
  key: string,
  known: ReadonlySet<string>,
  hint: string | undefined,
): string {
  if (hint !== undefined) return hint;
  const near = nearest(key, known);
  return near === undefined
    ? `${where}${key} is not an option; expected one of ${[...known].join(', ')}`
    : `${where}${key} is not an option; did you mean ${where}${near}?`;
}

/**
 * The known option spelled most like `key`: the same but for case, or at most two edits away
 * (one for short keys, where two edits make a different word). Undefined when none is that near.
 */
function nearest(key: string, known: ReadonlySet<string>): string | undefined {
  const lower = key.toLowerCase();
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const candidate of known) {
    if (candidate.toLowerCase() === lower) return candidate;
    const distance = editDistance(lower, candidate.toLowerCase());
    if (distance < bestDistance) [best, bestDistance] = [candidate, distance];
  }
  const allowed = Math.min(key.length, best?.length ?? 0) <= 5 ? 1 : 2;
  return bestDistance <= allowed ? best : undefined;
}

/** Levenshtein distance (insert, delete, replace), two rows at a time. */
function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(
        previous[j]! + 1,
        current[j - 1]! + 1,
        previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1),
      );
    }
    previous = current;
  }
  return previous[b.length]!;
}
