import { ListenFeed } from '../../src/notify/listen-feed.js';
import type { TaskRecord } from '../../src/task.js';

const record = (taskId: string, version = 1): TaskRecord => ({
  taskId,
  owner: { principal: 'alice', tenant: null },
  status: 'working',
  createdAt: 0,
  lastUpdatedAt: 0,
  ttlMs: null,
  version,
});

describe('TaskFeed.listenAll', () => {
  it('hears every task, beside the listeners of one task; unsubscribing twice is harmless', () => {
    const feed = new ListenFeed();
    const all: string[] = [];
    const one: string[] = [];
    const stop = feed.listenAll((task) => all.push(`${task.taskId}@${task.version}`));
    feed.listen('a', (task) => one.push(`${task.taskId}@${task.version}`));
    feed.publish(record('a'));
    feed.publish(record('b'));
    feed.publish(record('a', 2));
    expect(all).toEqual(['a@1', 'b@1', 'a@2']);
    expect(one).toEqual(['a@1', 'a@2']);
    stop();
    stop();
    feed.publish(record('b', 2));
    expect(all).toHaveLength(3);
    expect(feed.watchedTasks).toBe(1);
  });

  it('a listener of every task that throws keeps the others, and the publisher, from no news', () => {
    const feed = new ListenFeed();
    const heard: string[] = [];
    feed.listenAll(() => {
      throw new Error('faulty');
    });
    feed.listenAll((task) => heard.push(`all ${task.taskId}`));
    feed.listen('a', (task) => heard.push(`one ${task.taskId}`));
    expect(() => feed.publish(record('a'))).not.toThrow();
    expect(heard).toEqual(['all a', 'one a']);
  });
});
