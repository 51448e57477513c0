import { ConfigurableModuleBuilder, type DynamicModule, type Type } from '@nestjs/common';
import { show } from '../errors.js';
import { isObject } from '../object-shape.js';
import { isTaskToolOption, OptionProblems, taskToolOptionHint } from '../option-problems.js';
import { TaskQueue } from './task-queue.js';

/**
 * The module definition of a queue runner's `TasksQueueModule` (`nestjs-mcp-tasks/bullmq`,
 * `nestjs-mcp-tasks/pg-boss`): `forRoot(options)` / `forRootAsync(...)` under the runner's options
 * token, registered globally, providing the runner's queue as the TaskQueue port and its workers.
 * Both runners are one shape (switching is an import and a connection), so they share this.
 */
export function queueModuleDefinition<Options extends object>(
  optionsInjectionToken: string | symbol,
  queue: Type<TaskQueue>,
  workers: Type<unknown>,
) {
  return new ConfigurableModuleBuilder<Options>({
    moduleName: 'TasksQueue',
    optionsInjectionToken,
  })
    .setClassMethodName('forRoot')
    .setExtras({}, (definition: DynamicModule): DynamicModule => ({
      ...definition,
      global: true,
      providers: [
        ...(definition.providers ?? []),
        queue,
        { provide: TaskQueue, useExisting: queue },
        workers,
      ],
      exports: [TaskQueue],
    }))
    .build();
}

/**
 * Whether the queue of that name takes fair turns, by a runner's `fair` option: on every queue
 * (`true` or absent), on none (`false`), or per queue name (a queue not named is fair).
 */
export function isFairQueue(
  fair: boolean | Readonly<Record<string, boolean>> | undefined,
  queue: string,
): boolean {
  if (fair === undefined || typeof fair === 'boolean') return fair ?? true;
  return Object.hasOwn(fair, queue) ? fair[queue] !== false : true;
}

/**
 * The checks of a runner's TasksQueueModule options that both runners share: an object, no
 * unknown option (a `@TaskTool()` option says where it belongs), `worker` and `fair`. Returns the
 * problems gathered, for the runner to add its own and throw them all at once, and the options
 * when they are an object.
 */
export function queueOptionProblems(
  given: unknown,
  keys: ReadonlySet<string>,
): { problems: OptionProblems; options: Record<string, unknown> | undefined } {
  const problems = new OptionProblems('TasksQueueModule options');
  const options = given ?? {};
  if (!isObject(options)) {
    problems.add(`TasksQueueModule options must be an object, got ${show(options)}`);
    return { problems, options: undefined };
  }
  problems.unknownKeys('', options, keys, (key) =>
    isTaskToolOption(key) ? taskToolOptionHint(key, 'TasksQueueModule') : undefined,
  );
  const { worker, fair } = options;
  if (worker !== undefined && typeof worker !== 'boolean') {
    problems.add(`worker must be true or false, got ${show(worker)}`);
  }
  if (
    fair !== undefined &&
    typeof fair !== 'boolean' &&
    !(isObject(fair) && Object.values(fair).every((value) => typeof value === 'boolean'))
  ) {
    problems.add(
      'TasksQueueModule option "fair" must be true, false or an object of booleans by queue ' +
        `name (e.g. { reports: false }), got ${JSON.stringify(fair) ?? String(fair)}`,
    );
  }
  return { problems, options };
}
