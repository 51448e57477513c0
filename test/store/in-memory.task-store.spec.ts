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

describe('InMemoryTaskStore listing', () => {
  const listAll = async (store: InMemoryTaskStore, principal: string): Promise<string[]> => {
    const ids: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await store.list({ principal }, { limit: 100, ...(cursor && { cursor }) });
      ids.push(...page.tasks.map((task) => task.taskId));
      cursor = page.nextCursor;
    } while (cursor !== undefined);
    return ids;
  };

  it('stays exact through the pass that drops the ids of removed tasks (many deletes)', async () => {
    const store = new InMemoryTaskStore();
    const now = Date.now();
    for (let i = 0; i < 3000; i++) {
      const owner = { principal: i % 3 === 0 ? 'bob' : 'alice' };
      await store.create(newTask(`t${i}`, owner, { ttlMs: 60_000 }, now + i), { maxRows: null });
    }
    // 2,400 removals: more than half the store, so the pass over the owners' sets runs.
    for (let i = 0; i < 2400; i++) await store.delete(`t${i}`);
    const alice = await listAll(store, 'alice');
    const expected: string[] = [];
    for (let i = 2999; i >= 2400; i--) if (i % 3 !== 0) expected.push(`t${i}`);
    expect(alice).toEqual(expected);
    expect(await listAll(store, 'bob')).toHaveLength(200);
    // An id made again after its removal is listed once, for its new owner only.
    await store.create(newTask('t0', { principal: 'carol' }, { ttlMs: 60_000 }, now), {
      maxRows: null,
    });
    expect(await listAll(store, 'carol')).toEqual(['t0']);
    expect(await listAll(store, 'bob')).toHaveLength(200);
  });

  it('owner keys keep owners apart whatever their strings hold', async () => {
    const store = new InMemoryTaskStore();
    const owners = [
      { principal: 'a', tenant: 'b' },
      { principal: 'a:b', tenant: null },
      { principal: '1:a', tenant: null },
      { principal: null, tenant: 'a' },
      { principal: 'a', tenant: null },
    ];
    for (const [i, owner] of owners.entries()) {
      await store.create(newTask(`o${i}`, owner, { ttlMs: 60_000 }, Date.now()), { maxRows: null });
    }
    for (const [i, owner] of owners.entries()) {
      const page = await store.list(owner, { limit: 10 });
      expect(page.tasks.map((task) => task.taskId)).toEqual([`o${i}`]);
    }
  });
});
