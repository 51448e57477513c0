import { WaiterFeed } from '../../src/notify/waiter-feed.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('WaiterFeed.atExpiry', () => {
  it('calls each listener once, after its task expires, in deadline order', async () => {
    const feed = new WaiterFeed();
    const heard: string[] = [];
    const now = Date.now();
    feed.atExpiry('late', now + 80, () => heard.push('late'));
    feed.atExpiry('soon', now + 20, () => heard.push('soon'));
    feed.atExpiry('soon', now + 20, () => heard.push('soon again'));
    expect(feed.expiryWatches).toBe(2);
    await sleep(50);
    expect(heard).toEqual(['soon', 'soon again']);
    await sleep(80);
    expect(heard).toEqual(['soon', 'soon again', 'late']);
    expect(feed.expiryWatches).toBe(0);
    // Nothing is called twice.
    await sleep(30);
    expect(heard).toHaveLength(3);
  });

  it('a cancelled listener is not called; cancelling twice is harmless', async () => {
    const feed = new WaiterFeed();
    const heard: string[] = [];
    const t = () => heard.push('t');
    feed.atExpiry('t', Date.now() + 20, t);
    feed.atExpiry('u', Date.now() + 20, () => heard.push('u'));
    feed.cancelExpiry('t', t);
    feed.cancelExpiry('t', t);
    expect(feed.expiryWatches).toBe(1);
    await sleep(50);
    expect(heard).toEqual(['u']);
  });

  it('a listener that throws keeps the others from no news', async () => {
    const feed = new WaiterFeed();
    const heard: string[] = [];
    feed.atExpiry('a', Date.now() + 10, () => {
      throw new Error('boom');
    });
    feed.atExpiry('a', Date.now() + 10, () => heard.push('a'));
    feed.atExpiry('b', Date.now() + 15, () => heard.push('b'));
    await sleep(50);
    expect(heard).toEqual(['a', 'b']);
  });

  it('listeners cancelled by the thousand leave nothing behind', async () => {
    const feed = new WaiterFeed();
    const far = Date.now() + 3_600_000;
    const nothing = () => undefined;
    for (let i = 0; i < 5_000; i++) {
      feed.atExpiry(`t${i}`, far + i, nothing);
      feed.cancelExpiry(`t${i}`, nothing);
    }
    expect(feed.expiryWatches).toBe(0);
    const heard: string[] = [];
    feed.atExpiry('kept', Date.now() + 10, () => heard.push('kept'));
    await sleep(40);
    expect(heard).toEqual(['kept']);
  });
});
