import { Module } from '@nestjs/common';
import { TerminusModule } from '@nestjs/terminus';
import { TasksModule } from '../tasks.module.js';
import { TasksHealthIndicator } from './tasks-health.indicator.js';

/**
 * Provides TasksHealthIndicator to the module that imports it. It reads the store and notifier of
 * the app's TasksModule registration (global by default; the bare `TasksModule` imported here
 * names the fix when there is none in reach).
 *
 * ```ts
 * imports: [TerminusModule, TasksHealthModule],
 * controllers: [HealthController],
 * ```
 */
@Module({
  imports: [TerminusModule, TasksModule],
  providers: [TasksHealthIndicator],
  exports: [TasksHealthIndicator],
})
export class TasksHealthModule {}
