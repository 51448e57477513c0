import { InMemoryTaskStore } from '../../src/store/in-memory.task-store.js';
import { ownerKey } from '../../src/store/task-listing.js';
import { newTask, type TaskState } from '../../src/task.js';
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
    // 2,400 removals: more than half the store, so the pass over the owners' indexes runs.
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

  it('lists an owner newest first (createdAt, then id) after creates out of order', async () => {
    const store = new InMemoryTaskStore();
    const t0 = Date.now() - 60_000;
    const made: [number, string][] = [];
    const create = async (at: number, id: string, principal = 'alice'): Promise<void> => {
      await store.create(newTask(id, { principal }, { ttlMs: 3_600_000 }, t0 + at), {
        maxRows: null,
      });
      if (principal === 'alice') made.push([at, id]);
    };
    for (const [at, id] of [
      [50, 'm'],
      [10, 'b'],
      [70, 'x'],
      [10, 'a'],
      [50, 'n'],
      [5, 'z'],
    ] as const) {
      await create(at, id);
      await create(at, `bob-${id}`, 'bob');
    }
    const newestFirst = (): string[] =>
      made
        .slice()
        .sort((a, b) => b[0] - a[0] || (a[1] < b[1] ? 1 : -1))
        .map(([, id]) => id);
    expect(await listAll(store, 'alice')).toEqual(newestFirst());
    // Read once (the late entries merged in), then more land out of order, and in order.
    await create(60, 'k');
    await create(1, 'y');
    await create(90, 'q');
    const pages: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await store.list(
        { principal: 'alice' },
        { limit: 2, ...(cursor && { cursor }) },
      );
      pages.push(...page.tasks.map((task) => task.taskId));
      cursor = page.nextCursor;
    } while (cursor !== undefined);
    expect(pages).toEqual(newestFirst());
    expect(pages).toEqual(['q', 'x', 'k', 'n', 'm', 'b', 'a', 'z', 'y']);
  });

  it('forgets an owner whose tasks are all removed, at the pass over the owners', async () => {
    const store = new InMemoryTaskStore();
    const { byOwner } = (
      store as unknown as { listing: { byOwner: Map<string, { size: number }> } }
    ).listing;
    const now = Date.now();
    for (let i = 0; i < 2000; i++) {
      await store.create(newTask(`s${i}`, { principal: 'stay' }, { ttlMs: null }, now + i), {
        maxRows: null,
      });
    }
    for (let i = 0; i < 1024; i++) {
      await store.create(newTask(`g${i}`, { principal: 'gone' }, { ttlMs: null }, now + i), {
        maxRows: null,
      });
    }
    // 1,023 removals: the stale entries stay (fewer than 1,024), and listing skips them.
    for (let i = 0; i < 1023; i++) await store.delete(`g${i}`);
    expect(byOwner.get(ownerKey({ principal: 'gone' }))?.size).toBe(1024);
    expect(await listAll(store, 'gone')).toEqual(['g1023']);
    // The 1,024th: as many stale entries as half the live tasks, so one pass compacts them all.
    await store.delete('g1023');
    expect(byOwner.has(ownerKey({ principal: 'gone' }))).toBe(false);
    expect(byOwner.get(ownerKey({ principal: 'stay' }))?.size).toBe(2000);
    expect(await listAll(store, 'gone')).toEqual([]);
    const stay = await listAll(store, 'stay');
    expect(stay).toHaveLength(2000);
    expect(stay[0]).toBe('s1999');
    expect(stay.at(-1)).toBe('s0');
    // The owner comes back with a task made again.
    await store.create(newTask('g5', { principal: 'gone' }, { ttlMs: null }, now), {
      maxRows: null,
    });
    expect(await listAll(store, 'gone')).toEqual(['g5']);
  });

  it('ends a page of a large owner after 10,000 entries looked at, short, with a cursor that resumes', async () => {
    const store = new InMemoryTaskStore();
    const t0 = Date.now() - 60_000;
    const alice = { principal: 'alice' };
    const create = async (id: string, at: number, status: TaskState, principal = 'alice') => {
      const task = newTask(id, { principal }, { ttlMs: 3_600_000 }, t0 + at);
      await store.create({ ...task, status }, { maxRows: null });
    };
    // Oldest first: a failed task, 12,000 working ones with a failed one among the newest
    // 10,000, and another owner's failed tasks in between (never in alice's pages).
    await create('rare-old', 0, 'failed');
    for (let i = 1; i <= 12_000; i++) {
      await create(`w${i}`, i, i === 11_000 ? 'failed' : 'working');
      if (i % 1000 === 0) await create(`bob${i}`, i, 'failed', 'bob');
    }
    const first = await store.list(alice, { limit: 10, status: 'failed' });
    expect(first.tasks.map((task) => task.taskId)).toEqual(['w11000']);
    expect(first.nextCursor).toBeDefined();
    const second = await store.list(alice, {
      limit: 10,
      status: 'failed',
      cursor: first.nextCursor!,
    });
    expect(second.tasks.map((task) => task.taskId)).toEqual(['rare-old']);
    expect(second.nextCursor).toBeUndefined();
    // Unfiltered, pages are full and the cursor is the last task's, as before.
    const page = await store.list(alice, { limit: 3 });
    expect(page.tasks.map((task) => task.taskId)).toEqual(['w12000', 'w11999', 'w11998']);
    const next = await store.list(alice, { limit: 3, cursor: page.nextCursor! });
    expect(next.tasks.map((task) => task.taskId)).toEqual(['w11997', 'w11996', 'w11995']);
  });
});
