import { CreationIndex } from '../../src/store/creation-index.js';
import { InMemoryTaskStore } from '../../src/store/in-memory.task-store.js';
import { newTask } from '../../src/task.js';

/** The index's entries, newest first, as `createdAt:id`. */
function entries(index: CreationIndex): string[] {
  const seen: string[] = [];
  index.walkDown(index.size, (createdAt, taskId) => {
    seen.push(`${createdAt}:${taskId}`);
    return true;
  });
  return seen;
}

describe('CreationIndex', () => {
  it('keeps listing order for entries out of order, and adds a re-created entry once', () => {
    const index = new CreationIndex();
    for (const [at, id] of [
      [5, 'b'],
      [7, 'a'],
      [5, 'a'],
      [9, 'c'],
      [1, 'z'],
      [7, 'a'],
    ] as const) {
      index.add(at, id);
    }
    expect(entries(index)).toEqual(['9:c', '7:a', '5:b', '5:a', '1:z']);
    expect(index.below(5, 'b')).toBe(2);
    expect(index.below(6, '')).toBe(3);
  });

  it('compacts once removed tasks left as many entries as there are live ones, not before', () => {
    const index = new CreationIndex();
    for (let i = 0; i < 4096; i++) index.add(i, `t${i}`);
    const live = (createdAt: number): boolean => createdAt >= 2048;
    for (let i = 0; i < 2047; i++) index.noteRemoved(live);
    expect(index.size).toBe(4096);
    index.noteRemoved(live);
    expect(index.size).toBe(2048);
    expect(entries(index).at(-1)).toBe('2048:t2048');
  });
});

describe('CreationIndex.compact', () => {
  it('keeps the live entries in order, late ones merged in, whatever the count', () => {
    const index = new CreationIndex();
    for (const [at, id] of [
      [3, 'c'],
      [8, 'h'],
      [1, 'a'],
      [5, 'e'],
    ] as const) {
      index.add(at, id);
    }
    index.compact((_, taskId) => taskId !== 'h' && taskId !== 'a');
    expect(index.size).toBe(2);
    expect(entries(index)).toEqual(['5:e', '3:c']);
    index.compact(() => false);
    expect(index.size).toBe(0);
  });
});

describe('InMemoryTaskStore.listAll', () => {
  it('ends a page after 10,000 entries looked at, with a cursor to go on', async () => {
    const store = new InMemoryTaskStore();
    const t0 = Date.now() - 60_000;
    const rare = newTask('rare', { principal: 'p' }, { ttlMs: 3_600_000 }, t0);
    await store.create({ ...rare, toolName: 'rare' }, { maxRows: null });
    for (let i = 1; i <= 12_000; i++) {
      const owner = { principal: `p${i % 10}` };
      await store.create(newTask(`w${i}`, owner, { ttlMs: 3_600_000 }, t0 + i), {
        maxRows: null,
      });
    }
    const first = await store.listAll({ limit: 10, toolName: 'rare' });
    expect(first.tasks).toEqual([]);
    expect(first.nextCursor).toBeDefined();
    const second = await store.listAll({ limit: 10, toolName: 'rare', cursor: first.nextCursor! });
    expect(second.tasks.map((task) => task.taskId)).toEqual(['rare']);
    expect(second.nextCursor).toBeUndefined();
  });

  it('reads a removed task’s entry as nothing, and forgets it when removals pile up', async () => {
    const store = new InMemoryTaskStore();
    const now = Date.now();
    for (let i = 0; i < 3000; i++) {
      await store.create(newTask(`t${i}`, { principal: 'p' }, { ttlMs: null }, now + i), {
        maxRows: null,
      });
    }
    for (let i = 0; i < 2990; i++) await store.delete(`t${i}`);
    const page = await store.listAll({ limit: 100 });
    expect(page.tasks.map((task) => task.taskId)).toEqual(
      Array.from({ length: 10 }, (_, i) => `t${2999 - i}`),
    );
    expect(page.nextCursor).toBeUndefined();
  });
});
