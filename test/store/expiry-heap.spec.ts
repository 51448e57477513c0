import { ExpiryHeap } from '../../src/store/expiry-heap.js';
import { seededRandom } from '../support/helpers.js';

describe('ExpiryHeap', () => {
  it('pops in deadline order, interleaved with pushes, like a sorted list would', () => {
    const next = seededRandom(42);
    const heap = new ExpiryHeap();
    const model: [number, string][] = [];
    for (let step = 0; step < 5_000; step++) {
      if (model.length === 0 || next() < 0.6) {
        const deadline = Math.floor(next() * 1000);
        heap.push(deadline, `t${step}`);
        model.push([deadline, `t${step}`]);
      } else {
        model.sort((a, b) => a[0] - b[0]);
        const expected = model[0]![0];
        expect(heap.peekDeadline()).toBe(expected);
        const id = heap.pop();
        const index = model.findIndex(
          ([deadline, taskId]) => taskId === id && deadline === expected,
        );
        expect(index).toBeGreaterThanOrEqual(0);
        model.splice(index, 1);
      }
      expect(heap.size).toBe(model.length);
    }
  });

  it('is empty with an infinite next deadline', () => {
    const heap = new ExpiryHeap();
    expect(heap.peekDeadline()).toBe(Infinity);
    heap.push(5, 'a');
    heap.pop();
    expect(heap.peekDeadline()).toBe(Infinity);
  });

  it('compact keeps the accepted entries, still in order', () => {
    const heap = new ExpiryHeap();
    for (let i = 100; i > 0; i--) heap.push(i, `t${i}`);
    heap.compact((deadline) => deadline % 2 === 0);
    expect(heap.size).toBe(50);
    const popped: string[] = [];
    while (heap.size > 0) popped.push(heap.pop());
    expect(popped).toEqual(Array.from({ length: 50 }, (_, i) => `t${2 * (i + 1)}`));
  });
});
