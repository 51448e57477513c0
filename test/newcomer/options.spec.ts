import { afterEach, describe, expect, it } from '@jest/globals';
import type { INestApplicationContext } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { TasksConfigError } from '../../src/errors.js';
import { TasksQueueModule } from '../../src/bullmq/index.js';
import { TasksModule } from '../../src/index.js';
import { resolveTasksConfig } from '../../src/tasks.config.js';

/**
 * Issue 35, item 5: every invalid option of one `forRoot` is reported at once, each with its fix;
 * an unknown option hides nothing, and one that belongs elsewhere says where it belongs.
 */

const apps: INestApplicationContext[] = [];

afterEach(async () => {
  while (apps.length > 0) await apps.pop()!.close();
});

async function bootError(...modules: unknown[]): Promise<Error> {
  try {
    const moduleRef = await Test.createTestingModule({ imports: modules as never[] }).compile();
    apps.push(await moduleRef.init());
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected the boot to fail');
}

/** The problems one TasksConfigError lists: its lines after the header, or its one message. */
function problemsOf(error: Error): string[] {
  const [first, ...rest] = error.message.split('\n');
  return rest.length === 0 ? [first!] : rest.map((line) => line.replace(/^ {2}- /, ''));
}

describe('TasksModule options: every problem at once', () => {
  it('an unknown option does not hide a negative defaultTtlMs: one boot reports both', async () => {
    const error = await bootError(
      TasksModule.forRoot({ pollIntervalMs: 500, defaultTtlMs: -5 } as never),
    );
    expect(error).toBeInstanceOf(TasksConfigError);
    expect(error.message.split('\n')[0]).toBe('TasksModule options have 2 problems:');
    expect(problemsOf(error)).toEqual([
      'pollIntervalMs is a @TaskTool() option, not a TasksModule one: set it on each tool, @TaskTool({ name, pollIntervalMs })',
      'defaultTtlMs must be a positive integer or null, got -5',
    ]);
  });

  it('forRootAsync: what the factory returns is reported the same way', async () => {
    const error = await bootError(
      TasksModule.forRootAsync({
        useFactory: () =>
          ({ maxRows: 0, listen: { maxStreams: -1, keepAliveMs: 'soon' } }) as never,
      }),
    );
    expect(problemsOf(error)).toEqual([
      'maxRows must be a positive integer or null, got 0',
      'listen.keepAliveMs must be a positive integer or 0, got "soon"',
      'listen.maxStreams must be a positive integer, got -1',
    ]);
  });

  it('suggests the option a near miss meant, and where a misplaced one belongs', () => {
    const problems = (options: object): string[] => {
      try {
        resolveTasksConfig(options as never);
      } catch (error) {
        return problemsOf(error as Error);
      }
      throw new Error('expected a TasksConfigError');
    };
    expect(problems({ defaultTTLMs: 1000, janitor: { intervalMS: 5 } })).toEqual([
      'defaultTTLMs is not an option; did you mean defaultTtlMs?',
      'janitor.intervalMS is not an option; did you mean janitor.intervalMs?',
    ]);
    expect(problems({ drainMs: 0 })).toEqual([
      'drainMs is not an option; did you mean shutdown.drainMs (shutdown: { drainMs })?',
    ]);
    expect(problems({ ttlMs: 1000 })).toEqual([
      'ttlMs is a @TaskTool() option, not a TasksModule one: set it on each tool, @TaskTool({ name, ttlMs }) (the module-wide default is defaultTtlMs)',
    ]);
    expect(problems({ store: {} })).toEqual([
      'store is not an option; it is given beside the options: forRoot({ store }), or forRootAsync({ store, useFactory }), not in what useFactory returns',
    ]);
    expect(problems({ workers: {} })).toEqual([
      'workers is a TasksQueueModule option, not a TasksModule one: TasksQueueModule.forRoot({ workers })',
    ]);
    expect(problems({ colour: 'blue' })[0]).toMatch(
      /^colour is not an option; expected one of cancellation, defaultTtlMs, /,
    );
  });

  it('TasksQueueModule: every problem at once, a @TaskTool() option named as one', async () => {
    const error = await bootError(
      TasksModule.forRoot({ janitor: false }),
      TasksQueueModule.forRoot({ concurrency: 4, pollIntervalMs: 5, worker: 'no' } as never),
    );
    expect(error).toBeInstanceOf(TasksConfigError);
    expect(error.message.split('\n')[0]).toBe('TasksQueueModule options have 3 problems:');
    expect(problemsOf(error)).toEqual([
      'concurrency is not an option; expected one of worker, workers, fair',
      'pollIntervalMs is a @TaskTool() option, not a TasksQueueModule one: set it on each tool, @TaskTool({ name, pollIntervalMs })',
      'worker must be true or false, got "no"',
    ]);
  });
});
