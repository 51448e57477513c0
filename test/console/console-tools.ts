import { Injectable } from '@nestjs/common';
import { TaskTool, type TaskContext } from '../../src/index.js';

/** The console browser tests' tools: one held until told, one until cancelled, one in HTML. */

export const HTML_MESSAGE = '<img src=x onerror=alert(1)> <b>bold?</b>';

/** Lets the `hold` tool's calls finish when the test says so. */
@Injectable()
export class Gate {
  private waiting: (() => void)[] = [];
  wait(signal: AbortSignal): Promise<void> {
    return new Promise((done, fail) => {
      this.waiting.push(done);
      signal.addEventListener('abort', () => fail(signal.reason), { once: true });
    });
  }
  open(): void {
    for (const done of this.waiting.splice(0)) done();
  }
}

@Injectable()
export class ConsoleTools {
  constructor(private readonly gate: Gate) {}

  @TaskTool({ name: 'hold', pollIntervalMs: 100 })
  async hold(_input: unknown, task: TaskContext) {
    await task.progress('Holding until told');
    await this.gate.wait(task.signal);
    return { content: [{ type: 'text' as const, text: 'released' }] };
  }

  @TaskTool({ name: 'wait_for_cancel', pollIntervalMs: 100 })
  async waitForCancel(_input: unknown, task: TaskContext) {
    await task.progress('Working until cancelled');
    await new Promise<never>((_, reject) =>
      task.signal.addEventListener('abort', () => reject(task.signal.reason), { once: true }),
    );
  }

  @TaskTool({ name: 'html_status', pollIntervalMs: 100 })
  async htmlStatus(_input: unknown, task: TaskContext) {
    await task.progress(HTML_MESSAGE);
    await new Promise<never>((_, reject) =>
      task.signal.addEventListener('abort', () => reject(task.signal.reason), { once: true }),
    );
  }
}
