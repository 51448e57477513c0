import { InMemoryTaskStore } from '../../src/store/in-memory.task-store.js';
import { newTask } from '../../src/task.js';
import { taskStoreContract } from '../../src/testing/index.js';

describe('TaskStore contract: InMemoryTaskStore', () => {
  for (const rule of taskStoreContract(() => new InMemoryTaskStore())) it(rule.name, rule.run);
});

describe('InMemoryTaskStore', () => {
  it('freezes stored records so a handed-out record cannot change the store', async () => {
    const store = new InMemoryTaskStore();
    const task = newTask('a', { principal: 'x' }, { ttlMs: null }, Date.now());
    await store.create(task, { maxRows: null });
    const got = await store.get('a');
    expect(Object.isFrozen(got)).toBe(true);
    expect(() => {
      (got as { status: string }).status = 'completed';
    }).toThrow(TypeError);
  });

  it('cleanup pops only due entries and compacts stale ones after many deletes', async () => {
    const store = new InMemoryTaskStore();
    const now = Date.now();
    for (let i = 0; i < 5000; i++) {
      await store.create(newTask(`t${i}`, { principal: null }, { ttlMs: 60_000 }, now), {
        maxRows: null,
      });
    }
    for (let i = 0; i < 4000; i++) await store.delete(`t${i}`);
    expect(store.size).toBe(1000);
    expect(await store.cleanup(now + 59_999, { terminalTtlMs: 1 })).toBe(0);
    expect(await store.cleanup(now + 60_000, { terminalTtlMs: 1 })).toBe(1000);
    expect(store.size).toBe(0);
  });
});
