import { ExpiryIndex } from '../../src/store/expiry-index.js';
import { seededRandom } from '../support/helpers.js';

describe('ExpiryIndex', () => {
  it('hands out exactly the due entries, whatever the lanes and order, like a model list', () => {
    const next = seededRandom(7);
    const index = new ExpiryIndex();
    let model: [number, string][] = [];
    let clock = 1000;
    for (let step = 0; step < 20_000; step++) {
      const roll = next();
      if (roll < 0.7) {
        // Mostly increasing creation times, a few steps back, up to 100 distinct TTLs.
        clock += next() < 0.05 ? -Math.floor(next() * 50) : Math.floor(next() * 5);
        const ttl = 10 * Math.floor(next() * 100);
        index.push(ttl, clock + ttl, `t${step}`);
        model.push([clock + ttl, `t${step}`]);
      } else {
        const until = clock - 200 + Math.floor(next() * 400);
        const due: string[] = [];
        index.popDue(until, (deadline, id) => {
          expect(deadline).toBeLessThanOrEqual(until);
          due.push(id);
        });
        const expected = model.filter(([deadline]) => deadline <= until).map(([, id]) => id);
        expect(due.sort()).toEqual(expected.sort());
        model = model.filter(([deadline]) => deadline > until);
        expect(index.size).toBe(model.length);
      }
    }
  });

  it('compact keeps only accepted entries', () => {
    const index = new ExpiryIndex();
    for (let i = 0; i < 100; i++) index.push(i % 3, i, `t${i}`);
    index.compact((deadline) => deadline % 2 === 0);
    const due: number[] = [];
    index.popDue(Infinity, (deadline) => due.push(deadline));
    expect(due.sort((a, b) => a - b)).toEqual(Array.from({ length: 50 }, (_, i) => 2 * i));
    expect(index.size).toBe(0);
  });
});
