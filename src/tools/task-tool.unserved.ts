/**
 * The boot warning for `@TaskTool` methods that no TasksModule serves: an app that forgot to
 * import TasksModule otherwise boots without a word and answers 404 on its MCP path.
 *
 * Only the decorated class itself runs in such an app, so the check rides on its own lifecycle:
 * `@TaskTool` gives the class an `onApplicationBootstrap` (when it declares none of its own; an
 * inherited one still runs after the check). Nest calls it on every static instance, transient
 * ones included, after every module's `onModuleInit`, so by then the TasksModule explorer of the
 * same app has noted each instance it serves. An instance no explorer noted gets one WARN.
 *
 * Missed, never misreported: a class with its own `onApplicationBootstrap` is left as it is (no
 * warning for it), request-scoped providers run no bootstrap hook, and an instance shared with
 * another app that serves it counts as served.
 */
import { Logger } from '@nestjs/common';
import { TASK_TOOL_METADATA } from '../tasks.constants.js';
import { classPrototypes } from './prototype-chain.js';

/** Instances a TasksModule explorer serves, in any app of this process. */
const served = new WeakSet<object>();
/** Instances checked already (a subclass's check and its parent's may both run). */
const checked = new WeakSet<object>();
/** Prototypes that carry the check. */
const watched = new WeakSet<object>();

const logger = new Logger('TaskTool');

/** Notes an instance whose `@TaskTool` methods a TasksModule registered. */
export function noteServed(instance: object): void {
  served.add(instance);
}

/**
 * Gives the class whose prototype this is the bootstrap check, once. A class that declares its own
 * `onApplicationBootstrap` is left untouched.
 */
export function watchForTasksModule(prototype: object): void {
  if (watched.has(prototype)) return;
  watched.add(prototype);
  if (Object.hasOwn(prototype, 'onApplicationBootstrap')) return;
  Object.defineProperty(prototype, 'onApplicationBootstrap', {
    configurable: true,
    writable: true,
    enumerable: false,
    value: function onApplicationBootstrap(this: object, ...args: unknown[]): unknown {
      warnIfUnserved(this);
      // What the class would run without the check: a parent's hook, if any.
      const parent = Object.getPrototypeOf(prototype) as Record<string, unknown> | null;
      const inherited = parent?.onApplicationBootstrap;
      return typeof inherited === 'function' ? inherited.apply(this, args) : undefined;
    },
  });
}

function warnIfUnserved(instance: object): void {
  if (checked.has(instance)) return;
  checked.add(instance);
  if (served.has(instance)) return;
  const name = instance.constructor?.name || 'A provider';
  logger.warn(
    `${name} has @TaskTool methods (${toolMethods(instance).join(', ')}), but no TasksModule ` +
      'in this app serves them: import TasksModule.forRoot() (or forRootAsync) in the app module',
  );
}

/** The names of the instance's `@TaskTool` methods, its own class's first. */
function toolMethods(instance: object): string[] {
  const names = new Set<string>();
  for (const prototype of classPrototypes(instance)) {
    for (const key of Object.getOwnPropertyNames(prototype)) {
      const value = Object.getOwnPropertyDescriptor(prototype, key)?.value as unknown;
      if (typeof value === 'function' && Reflect.getMetadata(TASK_TOOL_METADATA, value)) {
        names.add(key);
      }
    }
  }
  return [...names];
}
