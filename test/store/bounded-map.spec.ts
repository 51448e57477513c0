import { BoundedMap } from '../../src/store/bounded-map.js';

describe('BoundedMap', () => {
  it('drops the oldest entries past its entry bound', () => {
    const map = new BoundedMap<number>(3, 1_000);
    for (let i = 0; i < 5; i++) map.set(`k${i}`, i, 10);
    expect(map.drain()).toEqual([2, 3, 4]);
    expect(map.bytes).toBe(0);
  });

  it('drops the oldest entries past its byte bound, and a setter that alone passes it keeps nothing', () => {
    const map = new BoundedMap<string>(100, 100);
    map.set('a', 'a', 40);
    map.set('b', 'b', 40);
    map.set('c', 'c', 40);
    expect(map.size).toBe(2);
    expect(map.get('a')).toBeUndefined();
    expect(map.bytes).toBe(80);
    map.set('huge', 'huge', 101);
    expect(map.size).toBe(0);
    expect(map.bytes).toBe(0);
  });

  it('setting a key again replaces its bytes and makes it the newest', () => {
    const map = new BoundedMap<number>(2, 1_000);
    map.set('a', 1, 10);
    map.set('b', 2, 10);
    map.set('a', 3, 30);
    expect(map.bytes).toBe(40);
    map.set('c', 4, 10);
    expect(map.get('b')).toBeUndefined();
    expect(map.drain()).toEqual([3, 4]);
  });
});
