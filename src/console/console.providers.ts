import type { Provider } from '@nestjs/common';
import { CONSOLE_GUARDS, type ConsoleSettings } from './console.config.js';
import { ConsoleAppGuard, ConsoleHostGuard } from './console.guards.js';
import { TaskConsole } from './task-console.js';

/** The console's providers when it is on; none when it is off (nothing listens, nothing is kept). */
export function consoleProviders(settings: ConsoleSettings | false): Provider[] {
  if (settings === false) return [];
  return [
    { provide: CONSOLE_GUARDS, useValue: settings.guards },
    ConsoleAppGuard,
    ConsoleHostGuard,
    TaskConsole,
  ];
}
