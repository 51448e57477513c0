import {
  type BeforeApplicationShutdown,
  Inject,
  Injectable,
  Logger,
  type OnApplicationBootstrap,
  Optional,
} from '@nestjs/common';
import { SchedulerRegistry } from '@nestjs/schedule';
import { TaskStore } from '../store/task-store.js';
import { JANITOR_INTERVAL_NAME, TASKS_CONFIG } from '../tasks.constants.js';
import type { TasksConfig } from '../interfaces/tasks-module-options.interface.js';

/**
 * Removes expired tasks on an interval. The interval lives in the app's SchedulerRegistry when the
 * app imports `ScheduleModule.forRoot()` (the library never calls it: that would run the app's own
 * jobs twice), in a private registry otherwise. It starts when the app is bootstrapped, never
 * twice, and stops before shutdown, after the tick in flight has finished.
 */
@Injectable()
export class TasksJanitor implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('TasksJanitor');
  private readonly registry: SchedulerRegistry;
  private running: Promise<number> | undefined;
  private owned = false;

  constructor(
    @Inject(TaskStore) private readonly store: TaskStore,
    @Inject(TASKS_CONFIG) private readonly config: TasksConfig,
    @Optional() registry?: SchedulerRegistry,
  ) {
    this.registry = registry ?? new SchedulerRegistry();
  }

  onApplicationBootstrap(): void {
    const janitor = this.config.janitor;
    if (janitor === false || this.owned) return;
    if (this.registry.doesExist('interval', JANITOR_INTERVAL_NAME)) {
      this.logger.warn(
        `An interval named ${JANITOR_INTERVAL_NAME} exists already; not adding another`,
      );
      return;
    }
    const timer = setInterval(() => void this.sweep(), janitor.intervalMs);
    timer.unref();
    this.registry.addInterval(JANITOR_INTERVAL_NAME, timer);
    this.owned = true;
  }

  async beforeApplicationShutdown(): Promise<void> {
    if (this.owned && this.registry.doesExist('interval', JANITOR_INTERVAL_NAME)) {
      this.registry.deleteInterval(JANITOR_INTERVAL_NAME);
    }
    this.owned = false;
    await this.running;
  }

  /** One cleanup pass; a tick while one runs joins it. Resolves with how many tasks it removed. */
  sweep(): Promise<number> {
    if (this.running) return this.running;
    const run = this.cleanup();
    this.running = run;
    void run.then(() => {
      if (this.running === run) this.running = undefined;
    });
    return run;
  }

  private async cleanup(): Promise<number> {
    const terminalTtlMs = this.config.janitor ? this.config.janitor.terminalTtlMs : 0;
    try {
      const removed = await this.store.cleanup(Date.now(), { terminalTtlMs });
      if (removed > 0) this.logger.log(`Removed ${removed} expired task(s)`);
      else this.logger.verbose('No expired tasks');
      return removed;
    } catch (error) {
      this.logger.error(`Cleanup failed: ${(error as Error)?.message ?? String(error)}`);
      return 0;
    }
  }
}
