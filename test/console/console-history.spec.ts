import { ConsoleHistory, HISTORY_MESSAGE_CHARS } from '../../src/console/console-history.js';
import type { TaskRecord, TaskState } from '../../src/task.js';

const change = (taskId: string, version: number, status: TaskState = 'working'): TaskRecord => ({
  taskId,
  owner: { principal: 'alice', tenant: null },
  status,
  statusMessage: `v${version}`,
  createdAt: 0,
  lastUpdatedAt: version * 1_000,
  ttlMs: null,
  version,
});

describe('ConsoleHistory', () => {
  it('keeps the last changes of each task, in order, once per version', () => {
    const history = new ConsoleHistory(3, 10);
    for (const version of [1, 2, 2, 3, 4, 5]) history.hear(change('a', version));
    history.hear(change('a', 4));
    expect(history.of('a').map((heard) => heard.version)).toEqual([3, 4, 5]);
    expect(history.of('a')[2]).toEqual({
      version: 5,
      status: 'working',
      statusMessage: 'v5',
      at: 5_000,
    });
    expect(history.of('unknown')).toEqual([]);
  });

  it('holds at most so many tasks, dropping the one heard of longest ago', () => {
    const history = new ConsoleHistory(5, 2);
    history.hear(change('a', 1));
    history.hear(change('b', 1));
    history.hear(change('a', 2, 'completed'));
    history.hear(change('c', 1));
    expect(history.size).toBe(2);
    expect(history.of('b')).toEqual([]);
    expect(history.of('a').map((heard) => heard.status)).toEqual(['working', 'completed']);
    expect(history.of('c')).toHaveLength(1);
  });

  it('keeps at most HISTORY_MESSAGE_CHARS of a status message, marking the cut', () => {
    const history = new ConsoleHistory();
    history.hear({ ...change('a', 1), statusMessage: 'x'.repeat(900_000) });
    history.hear({ ...change('a', 2), statusMessage: 'y'.repeat(HISTORY_MESSAGE_CHARS) });
    const [long, exact] = history.of('a');
    expect(long!.statusMessage).toHaveLength(HISTORY_MESSAGE_CHARS);
    expect(long!.statusMessage!.endsWith('x…')).toBe(true);
    expect(exact!.statusMessage).toBe('y'.repeat(HISTORY_MESSAGE_CHARS));
  });
});
