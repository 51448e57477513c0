import { Inject, Injectable, Logger, type OnApplicationBootstrap } from '@nestjs/common';
import { messageOf, TasksConfigError } from '../errors.js';
import type { TasksConfig } from '../interfaces/tasks-module-options.interface.js';
import { TaskStore } from '../store/task-store.js';
import { TASKS_CONFIG } from '../tasks.constants.js';

/** How soon the store is asked again while startup waits for it. */
const RETRY_MS = 1_000;
/** While startup waits, the store's failure is logged when the wait starts, then this often. */
const LOG_EVERY_MS = 15_000;

/**
 * Startup waits for the task store's first answer (its `ping`; a store without one is not asked):
 * an app whose store is unreachable (a wrong address, Redis or PostgreSQL not up yet) does not
 * start serving calls that could only fail. While it waits, the store's error is logged at once,
 * naming the address it tried and what to check, then every 15 s; the store is asked again every
 * second. The wait is bounded by `storeOutageMs`, the time this package lets a store be away:
 * past it the boot fails with that error (`0`: the first failure fails it). A store that answers
 * within it starts the app as usual: a deploy during a short outage waits it out.
 */
@Injectable()
export class StoreStartup implements OnApplicationBootstrap {
  private readonly logger = new Logger('TasksModule');
  private reaching: Promise<void> | undefined;

  constructor(
    @Inject(TaskStore) private readonly store: TaskStore,
    @Inject(TASKS_CONFIG) private readonly config: TasksConfig,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    await this.reached();
  }

  /**
   * Resolves once the store has answered (at once for a store without `ping`); rejects, naming
   * the store's error, when it did not answer within `storeOutageMs`. One wait per registration,
   * whoever asks (the lease starts after it). The app cannot be closed meanwhile: Nest lets a
   * startup finish before it shuts down.
   */
  reached(): Promise<void> {
    this.reaching ??= this.reach();
    return this.reaching;
  }

  private async reach(): Promise<void> {
    if (typeof this.store.ping !== 'function') return;
    const started = Date.now();
    const boundMs = this.config.storeOutageMs;
    let loggedAt: number | undefined;
    let lastError: unknown;
    for (;;) {
      try {
        // A ping may take the store's own timeout; the wait ends on time all the same.
        await this.within(this.store.ping(), boundMs - (Date.now() - started), lastError);
        if (loggedAt !== undefined) {
          this.logger.log(`The task store answers after ${seconds(Date.now() - started)} s`);
        }
        return;
      } catch (error) {
        lastError = error;
        const waited = Date.now() - started;
        if (waited >= boundMs) {
          throw new TasksConfigError(
            `The task store did not answer within storeOutageMs (${seconds(boundMs)} s) of ` +
              `startup: ${messageOf(error)}`,
          );
        }
        if (loggedAt === undefined || Date.now() - loggedAt >= LOG_EVERY_MS) {
          loggedAt = Date.now();
          this.logger.error(
            `The task store does not answer: ${messageOf(error)}. Startup waits for it up to ` +
              `storeOutageMs (${seconds(boundMs)} s), asking every ${seconds(RETRY_MS)} s`,
          );
        }
        await new Promise((resolve) => setTimeout(resolve, Math.min(RETRY_MS, boundMs - waited)));
      }
    }
  }

  /**
   * `ping`, or a rejection once `ms` have passed (the wait's time is up): with the store's last
   * error, else saying it did not answer.
   */
  private async within(ping: Promise<void>, ms: number, lastError: unknown): Promise<void> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(lastError ?? new Error(`the store did not answer within ${ms} ms`)),
        Math.max(0, ms),
      );
    });
    ping.catch(() => undefined);
    try {
      await Promise.race([ping, late]);
    } finally {
      clearTimeout(timer);
    }
  }
}

const seconds = (ms: number): number => Math.round(ms / 100) / 10;
