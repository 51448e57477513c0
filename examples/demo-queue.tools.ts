import { Injectable } from '@nestjs/common';
import * as z from 'zod/v4';
import { TaskTool, type TaskContext } from '../src/index.js';

const LongJobInput = z.object({ seconds: z.number().int().min(0).max(3_600) });

/** Resolves after `ms`, or rejects with the signal's reason when the task is cancelled. */
const tick = (ms: number, signal: AbortSignal): Promise<void> =>
  new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', stop);
      resolve();
    }, ms);
    const stop = (): void => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    signal.addEventListener('abort', stop, { once: true });
  });

/**
 * The demo's queue-run tool (with REDIS_URL or POSTGRES_URL): each call is a job on the queue
 * `demo-jobs` (BullMQ on Redis, or pg-boss on PostgreSQL alone: see `demoQueue`), run by any demo
 * process with a worker (`npm start` or `npm run worker`).
 */
@Injectable()
export class DemoQueueTools {
  @TaskTool({
    name: 'long_job',
    description: 'Works for the given seconds on a queue worker, reporting progress each second.',
    input: LongJobInput,
    queue: 'demo-jobs',
  })
  async longJob(input: z.infer<typeof LongJobInput>, task: TaskContext) {
    for (let second = 1; second <= input.seconds; second++) {
      await tick(1_000, task.signal);
      await task.progress(`${second}s of ${input.seconds}s`);
    }
    return { content: [{ type: 'text' as const, text: `done after ${input.seconds}s` }] };
  }
}
