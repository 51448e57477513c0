/**
 * docs/limits.md's worst case, recomputed from the defaults: each line of its table is the bound
 * it names at the package's default values, in MiB, and the total their sum. A default that moves
 * without the page fails here.
 */
import { MAX_CONSOLE_STREAMS } from '../../src/console/task-console.js';
import {
  HISTORY_MESSAGE_CHARS,
  HISTORY_PER_TASK,
  HISTORY_TASKS,
} from '../../src/console/console-history.js';
import { DEFAULT_IN_MEMORY_MAX_BYTES } from '../../src/store/in-memory.task-store.js';
import { resolveTasksConfig } from '../../src/tasks.config.js';
import {
  MAX_REQUEST_ID_LENGTH,
  MAX_STREAM_BUFFERED_BYTES,
  MAX_UNCONFIRMED_WRITE_BYTES,
  MAX_UNSENT_CHANGE_BYTES,
} from '../../src/tasks.constants.js';
import { docFigure } from './figures.js';

const MiB = 1_048_576;
const PAGE = 'docs/limits.md';

describe('docs/limits.md: the worst case, computed', () => {
  const config = resolveTasksConfig({});
  const lines: Record<string, number> = {
    'worst.bodies': config.bodies.maxBytesInFlight / MiB,
    'worst.store': DEFAULT_IN_MEMORY_MAX_BYTES / MiB,
    'worst.runningArguments': (config.maxRows! * config.maxBodyBytes) / MiB,
    'worst.listenStreams':
      (config.listen.maxStreams * (MAX_STREAM_BUFFERED_BYTES + config.maxTaskBytes)) / MiB,
    'worst.consoleStreams':
      (MAX_CONSOLE_STREAMS * (MAX_STREAM_BUFFERED_BYTES + config.maxTaskBytes)) / MiB,
    // V8 keeps a string of non-Latin-1 text at two bytes a character.
    'worst.consoleHistory': (HISTORY_TASKS * HISTORY_PER_TASK * HISTORY_MESSAGE_CHARS * 2) / MiB,
    'worst.outage': (MAX_UNSENT_CHANGE_BYTES + MAX_UNCONFIRMED_WRITE_BYTES) / MiB,
    'worst.ids':
      ((config.listen.maxStreams + config.resultWaits.max) * MAX_REQUEST_ID_LENGTH * 2) / MiB,
  };

  it.each(Object.keys(lines))('states the %s line at its bound', (key) => {
    expect(docFigure(PAGE, key)).toBe(Math.round(lines[key]!));
  });

  it('states their sum', () => {
    const total = Object.keys(lines).reduce((sum, key) => sum + docFigure(PAGE, key), 0);
    expect(docFigure(PAGE, 'worst.total')).toBe(total);
  });
});
