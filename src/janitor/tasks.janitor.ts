import {
  type BeforeApplicationShutdown,
  Inject,
  Injectable,
  Logger,
  type OnApplicationBootstrap,
  Optional,
} from '@nestjs/common';
import { DiscoveryService } from '@nestjs/core';
import { messageOf } from '../errors.js';
import { TaskStore } from '../store/task-store.js';
import { JANITOR_INTERVAL_NAME, TASKS_CONFIG } from '../tasks.constants.js';
import type { TasksConfig } from '../interfaces/tasks-module-options.interface.js';

/** What the janitor uses of `@nestjs/schedule`'s SchedulerRegistry. */
export interface IntervalRegistry {
  doesExist(type: 'interval', name: string): boolean;
  addInterval(name: string, intervalId: ReturnType<typeof setInterval>): void;
  deleteInterval(name: string): void;
}

/** The janitor's own intervals, when the app has no SchedulerRegistry. */
class OwnIntervals implements IntervalRegistry {
  private readonly intervals = new Map<string, ReturnType<typeof setInterval>>();

  doesExist(_type: 'interval', name: string): boolean {
    return this.intervals.has(name);
  }

  addInterval(name: string, intervalId: ReturnType<typeof setInterval>): void {
    this.intervals.set(name, intervalId);
  }

  deleteInterval(name: string): void {
    clearInterval(this.intervals.get(name));
    this.intervals.delete(name);
  }
}

/**
 * Removes expired tasks on an interval. The interval lives in the app's SchedulerRegistry when the
 * app imports `ScheduleModule.forRoot()` (the library never calls it: that would run the app's own
 * jobs twice), in the janitor's own registry otherwise; `@nestjs/schedule` is loaded only when the
 * app has it. It starts when the app is bootstrapped, never twice, and stops before shutdown,
 * after the tick in flight has finished.
 */
@Injectable()
export class TasksJanitor implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('TasksJanitor');
  private running: Promise<number> | undefined;
  private owned = false;

  constructor(
    @Inject(TaskStore) private readonly store: TaskStore,
    @Inject(TASKS_CONFIG) private readonly config: TasksConfig,
    @Optional() private readonly discovery?: DiscoveryService,
    /** Where the interval goes (for hand wiring); found at bootstrap when not given. */
    @Optional() private registry?: IntervalRegistry,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    const janitor = this.config.janitor;
    if (janitor === false || this.owned) return;
    this.registry ??= (await this.appRegistry()) ?? new OwnIntervals();
    if (this.owned) return;
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
    if (this.owned && this.registry?.doesExist('interval', JANITOR_INTERVAL_NAME)) {
      this.registry.deleteInterval(JANITOR_INTERVAL_NAME);
    }
    this.owned = false;
    await this.running;
  }

  /**
   * The app's SchedulerRegistry, when it imports ScheduleModule. Its provider is found by name, so
   * an app without it never loads `@nestjs/schedule`; an app with it has loaded the package
   * already, and the instance is checked against the package's own class.
   */
  private async appRegistry(): Promise<IntervalRegistry | undefined> {
    const wrapper = this.discovery
      ?.getProviders()
      .find((candidate) => candidate.name === 'SchedulerRegistry' && candidate.instance);
    if (!wrapper) return undefined;
    try {
      const { SchedulerRegistry } = await import('@nestjs/schedule');
      return wrapper.instance instanceof SchedulerRegistry ? wrapper.instance : undefined;
    } catch {
      return undefined;
    }
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
      this.logger.error(`Cleanup failed: ${messageOf(error)}`);
      return 0;
    }
  }
}
