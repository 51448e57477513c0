/**
 * The store contract of `nestjs-mcp-tasks/testing` can fail: a simple correct store passes every
 * case, and each deliberately broken store fails exactly the cases about what it breaks.
 */
import { AssertionError } from 'node:assert';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { isTerminal, TaskQuotaError, type TaskRecord } from '../../src/index.js';
import {
  InMemoryTaskStore,
  TaskInternalError,
  TaskStoreFullError,
  type TaskOwner,
  type TaskStore,
  type TaskStoreCleanupOptions,
  type TaskStoreCreateOptions,
  type TaskStoreListOptions,
} from '../../src/entries/store.js';
import {
  taskStoreContract,
  taskStoreContractRules,
  type TaskStoreContractCase,
} from '../../src/testing/index.js';

const tick = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

const expiry = (task: TaskRecord): number | null =>
  task.ttlMs === null ? null : task.createdAt + task.ttlMs;

/** A plain, correct store written on the public API only: one Map, cleanup scans it all. */
class MapStore implements TaskStore {
  protected readonly tasks = new Map<string, TaskRecord>();

  protected expired(record: TaskRecord, now: number): boolean {
    return record.ttlMs !== null && record.createdAt + record.ttlMs <= now;
  }

  protected live(): number {
    const now = Date.now();
    return [...this.tasks.values()].filter((record) => !this.expired(record, now)).length;
  }

  async create(record: TaskRecord, options: TaskStoreCreateOptions): Promise<void> {
    if (this.tasks.has(record.taskId)) throw new TaskInternalError('Task id already exists');
    const quota = options.maxTasksPerOwner ?? null;
    if (quota !== null) this.makeRoom(record.owner, quota);
    if (options.maxRows !== null && this.live() >= options.maxRows) {
      throw new TaskStoreFullError(options.maxRows);
    }
    this.tasks.set(record.taskId, structuredClone(record));
  }

  /** The owner's live (not expired) tasks. */
  protected owned(owner: TaskOwner): TaskRecord[] {
    const now = Date.now();
    return [...this.tasks.values()].filter(
      (task) =>
        !this.expired(task, now) &&
        task.owner.principal === owner.principal &&
        task.owner.tenant === (owner.tenant ?? null),
    );
  }

  /** At the quota, deletes the owner's finished tasks that expire first; else TaskQuotaError. */
  protected makeRoom(owner: TaskOwner, quota: number): void {
    const owned = this.owned(owner);
    const finished = owned
      .filter((task) => isTerminal(task.status))
      .sort((a, b) => (expiry(a) ?? Infinity) - (expiry(b) ?? Infinity));
    for (let count = owned.length; count >= quota; count--) {
      const oldest = finished.shift();
      if (oldest === undefined) throw new TaskQuotaError(quota);
      this.tasks.delete(oldest.taskId);
    }
  }

  async get(taskId: string, owner?: TaskOwner): Promise<TaskRecord | null> {
    const record = this.tasks.get(taskId);
    if (record === undefined || this.expired(record, Date.now())) return null;
    if (
      owner !== undefined &&
      (record.owner.principal !== owner.principal || record.owner.tenant !== (owner.tenant ?? null))
    ) {
      return null;
    }
    return structuredClone(record);
  }

  async compareAndSet(record: TaskRecord, expectedVersion: number): Promise<boolean> {
    const current = this.tasks.get(record.taskId);
    if (current === undefined || current.version !== expectedVersion) return false;
    if (this.expired(current, Date.now())) return false;
    this.tasks.set(record.taskId, structuredClone(record));
    return true;
  }

  async delete(taskId: string): Promise<boolean> {
    return this.tasks.delete(taskId);
  }

  async cleanup(now: number, options: TaskStoreCleanupOptions): Promise<number> {
    let removed = 0;
    for (const record of [...this.tasks.values()]) {
      if (this.expired(record, now) || this.finishedLongAgo(record, now, options)) {
        this.tasks.delete(record.taskId);
        removed++;
      }
    }
    return removed;
  }

  protected finishedLongAgo(
    record: TaskRecord,
    now: number,
    options: TaskStoreCleanupOptions,
  ): boolean {
    return (
      record.ttlMs === null &&
      isTerminal(record.status) &&
      record.lastUpdatedAt <= now - options.terminalTtlMs
    );
  }
}

// ----- broken stores, one fault each --------------------------------------------------------------

class IgnoresOwner extends MapStore {
  override get(taskId: string): Promise<TaskRecord | null> {
    return super.get(taskId);
  }
}

class IgnoresVersion extends MapStore {
  override async compareAndSet(record: TaskRecord): Promise<boolean> {
    const current = this.tasks.get(record.taskId);
    return current !== undefined && super.compareAndSet(record, current.version);
  }
}

/** Reads, then writes after an await: not atomic. */
class RacyCompareAndSet extends MapStore {
  override async compareAndSet(record: TaskRecord, expectedVersion: number): Promise<boolean> {
    const current = this.tasks.get(record.taskId);
    if (current === undefined || current.version !== expectedVersion) return false;
    if (this.expired(current, Date.now())) return false;
    await tick();
    this.tasks.set(record.taskId, structuredClone(record));
    return true;
  }
}

/** Merges the new record into the stored one instead of replacing it. */
class MergesOnWrite extends MapStore {
  override async compareAndSet(record: TaskRecord, expectedVersion: number): Promise<boolean> {
    const current = this.tasks.get(record.taskId);
    if (current === undefined) return false;
    return super.compareAndSet({ ...current, ...record }, expectedVersion);
  }
}

class IgnoresMaxRows extends MapStore {
  override create(record: TaskRecord, options: TaskStoreCreateOptions): Promise<void> {
    return super.create(record, { ...options, maxRows: null });
  }
}

class IgnoresQuota extends MapStore {
  override create(record: TaskRecord, options: TaskStoreCreateOptions): Promise<void> {
    return super.create(record, { ...options, maxTasksPerOwner: null });
  }
}

/** Counts the owner, then inserts after an await: not atomic. */
class RacyQuota extends MapStore {
  override async create(record: TaskRecord, options: TaskStoreCreateOptions): Promise<void> {
    const quota = options.maxTasksPerOwner ?? null;
    if (quota !== null) this.makeRoom(record.owner, quota);
    await tick();
    await super.create(record, { ...options, maxTasksPerOwner: null });
  }
}

/** At the quota, gives up the owner's oldest task, finished or not. */
class EvictsLiveTasks extends MapStore {
  protected override makeRoom(owner: TaskOwner, quota: number): void {
    const owned = this.owned(owner).sort((a, b) => a.createdAt - b.createdAt);
    while (owned.length >= quota) this.tasks.delete(owned.shift()!.taskId);
  }
}

/** Counts, then inserts after an await: not atomic. */
class RacyMaxRows extends MapStore {
  override async create(record: TaskRecord, options: TaskStoreCreateOptions): Promise<void> {
    if (options.maxRows !== null && this.live() >= options.maxRows) {
      throw new TaskStoreFullError(options.maxRows);
    }
    await tick();
    await super.create(record, { ...options, maxRows: null });
  }
}

/** Counts expired tasks against maxRows. */
class CountsExpiredRows extends MapStore {
  protected override live(): number {
    return this.tasks.size;
  }
}

/** get and compareAndSet ignore the TTL (cleanup still removes expired tasks). */
class IgnoresExpiry extends MapStore {
  override async get(taskId: string, owner?: TaskOwner): Promise<TaskRecord | null> {
    const record = this.tasks.get(taskId);
    if (record === undefined) return null;
    if (owner !== undefined && record.owner.principal !== owner.principal) return null;
    if (owner !== undefined && record.owner.tenant !== (owner.tenant ?? null)) return null;
    return structuredClone(record);
  }
  override async compareAndSet(record: TaskRecord, expectedVersion: number): Promise<boolean> {
    const current = this.tasks.get(record.taskId);
    if (current === undefined || current.version !== expectedVersion) return false;
    this.tasks.set(record.taskId, structuredClone(record));
    return true;
  }
}

/** A create of a taken id overwrites it. */
class OverwritesDuplicate extends MapStore {
  override async create(record: TaskRecord, options: TaskStoreCreateOptions): Promise<void> {
    this.tasks.delete(record.taskId);
    await super.create(record, options);
  }
}

class DeleteAlwaysTrue extends MapStore {
  override async delete(taskId: string): Promise<boolean> {
    await super.delete(taskId);
    return true;
  }
}

/**
 * Cleanup reads the clock instead of the `now` it is given (a clock that has moved on by at least a
 * millisecond since the caller read it: +1 keeps the outcome from depending on timing).
 */
class CleanupUsesClock extends MapStore {
  override cleanup(_now: number, options: TaskStoreCleanupOptions): Promise<number> {
    return super.cleanup(Date.now() + 1, options);
  }
}

/** Cleanup also removes finished tasks that still have a TTL to run. */
class CleanupIgnoresTtlOfFinished extends MapStore {
  protected override finishedLongAgo(
    record: TaskRecord,
    now: number,
    options: TaskStoreCleanupOptions,
  ): boolean {
    return isTerminal(record.status) && record.lastUpdatedAt <= now - options.terminalTtlMs;
  }
}

/** Cleanup uses `<` where the contract says "at": tasks due exactly now are kept. */
class CleanupOffByOne extends MapStore {
  override async cleanup(now: number, options: TaskStoreCleanupOptions): Promise<number> {
    return super.cleanup(now - 1, options);
  }
}

/** Cleanup never removes finished tasks without a TTL. */
class CleanupKeepsFinished extends MapStore {
  protected override finishedLongAgo(): boolean {
    return false;
  }
}

/** Loses `usedInputKeys` on the way in (a column nobody mapped). */
class DropsAField extends MapStore {
  override async create(record: TaskRecord, options: TaskStoreCreateOptions): Promise<void> {
    const { usedInputKeys, ...kept } = record;
    await super.create(kept, options);
  }
  override async compareAndSet(record: TaskRecord, expectedVersion: number): Promise<boolean> {
    const { usedInputKeys, ...kept } = record;
    return super.compareAndSet(kept, expectedVersion);
  }
}

// ----- running the cases ------------------------------------------------------------------------

interface Outcome {
  failed: string[];
  errors: Map<string, unknown>;
}

async function outcome(cases: TaskStoreContractCase[]): Promise<Outcome> {
  const failed: string[] = [];
  const errors = new Map<string, unknown>();
  for (const c of cases) {
    try {
      await c.run();
    } catch (error) {
      failed.push(c.name);
      errors.set(c.name, error);
    }
  }
  return { failed, errors };
}

const rules = taskStoreContractRules();
const rule = (start: string): string => {
  const found = rules.filter((name) => name.startsWith(start));
  if (found.length !== 1) throw new Error(`no single rule starts with ${start}`);
  return found[0]!;
};

const OWNER = rule('owner-scoped get');
const TENANT = rule('an absent tenant');
const ANONYMOUS = rule('anonymous tasks');
const CAS = rule('compareAndSet writes when');
const WHOLE = rule('compareAndSet replaces the whole record');
const RACE = rule('of many concurrent compareAndSets');
const MAX_ROWS = rule('maxRows: a create beyond');
const MAX_ROWS_EXPIRED = rule('maxRows: expired tasks');
const MAX_ROWS_RACE = rule('maxRows is enforced under concurrent');
const EXPIRED = rule('an expired task is not returned');
const DUPLICATE = rule('create refuses an id');
const DELETE = rule('delete removes the task');
const CLEANUP_NOW = rule('cleanup judges expiry');
const CLEANUP_EXACT = rule('cleanup removes exactly');
const CLEANUP_TERMINAL = rule('cleanup removes terminal tasks');
const CLEANUP_BOUNDARY = rule('cleanup of finished tasks without a TTL');
const CLEANUP_TTL_KEPT = rule('cleanup keeps a finished task with a TTL');
const FIELDS = rule('keeps every field');
const QUOTA = rule('maxTasksPerOwner: at the quota');
const QUOTA_OWNERS = rule('maxTasksPerOwner: owners are compared');
const QUOTA_RACE = rule('maxTasksPerOwner is enforced under concurrent');

describe('taskStoreContract', () => {
  it('has every rule of the former suite and more, each with a distinct name', () => {
    expect(rules.length).toBeGreaterThanOrEqual(23);
    expect(new Set(rules).size).toBe(rules.length);
    const cases = taskStoreContract(() => new MapStore());
    expect(cases.map((c) => c.name)).toEqual(rules);
    // Jest treats a test function with a parameter as a done-callback test.
    for (const c of cases) expect(c.run.length).toBe(0);
  });

  it('a plain correct store, written on the public API only, passes every case', async () => {
    const { failed, errors } = await outcome(taskStoreContract(() => new MapStore()));
    expect(failed).toEqual([]);
    expect(errors.size).toBe(0);
  });

  const broken: Array<[string, () => TaskStore, string[]]> = [
    ['get ignores the owner', () => new IgnoresOwner(), [OWNER, TENANT, ANONYMOUS]],
    ['compareAndSet ignores the version', () => new IgnoresVersion(), [CAS, RACE]],
    ['compareAndSet is not atomic', () => new RacyCompareAndSet(), [RACE]],
    ['compareAndSet merges instead of replacing', () => new MergesOnWrite(), [WHOLE, FIELDS]],
    ['create ignores maxRows', () => new IgnoresMaxRows(), [MAX_ROWS, MAX_ROWS_RACE]],
    ['create ignores the quota', () => new IgnoresQuota(), [QUOTA, QUOTA_OWNERS, QUOTA_RACE]],
    ['the quota is checked apart from the insert', () => new RacyQuota(), [QUOTA_RACE]],
    [
      'the quota gives up live tasks',
      () => new EvictsLiveTasks(),
      [QUOTA, QUOTA_OWNERS, QUOTA_RACE],
    ],
    ['maxRows is checked apart from the insert', () => new RacyMaxRows(), [MAX_ROWS_RACE]],
    ['expired tasks hold rows', () => new CountsExpiredRows(), [MAX_ROWS_EXPIRED]],
    ['get and compareAndSet ignore expiry', () => new IgnoresExpiry(), [EXPIRED]],
    ['create overwrites a taken id', () => new OverwritesDuplicate(), [DUPLICATE]],
    ['delete always says true', () => new DeleteAlwaysTrue(), [DELETE]],
    [
      'cleanup reads the clock instead of now',
      () => new CleanupUsesClock(),
      [CLEANUP_NOW, CLEANUP_BOUNDARY],
    ],
    [
      'cleanup removes finished tasks whose TTL runs on',
      () => new CleanupIgnoresTtlOfFinished(),
      [CLEANUP_TTL_KEPT],
    ],
    [
      'cleanup keeps what is due exactly now',
      () => new CleanupOffByOne(),
      [CLEANUP_EXACT, CLEANUP_BOUNDARY],
    ],
    [
      'cleanup keeps finished tasks without a TTL',
      () => new CleanupKeepsFinished(),
      [CLEANUP_TERMINAL, CLEANUP_BOUNDARY],
    ],
    ['a field is lost', () => new DropsAField(), [WHOLE, FIELDS]],
  ];

  it.each(broken)('a store where %s fails exactly those cases', async (_fault, make, expected) => {
    const { failed, errors } = await outcome(taskStoreContract(make));
    expect(failed).toEqual(rules.filter((name) => expected.includes(name)));
    for (const error of errors.values()) expect(error).toBeInstanceOf(AssertionError);
  });

  it('says what the store did wrong', async () => {
    const { errors } = await outcome(taskStoreContract(() => new IgnoresOwner()));
    expect((errors.get(OWNER) as Error).message).toBe(
      'get(taskId, another principal of the same tenant): expected null, got a record (status working, version 1)',
    );
    const race = await outcome(taskStoreContract(() => new IgnoresVersion()));
    expect((race.errors.get(RACE) as Error).message).toBe(
      '50 concurrent compareAndSets on one version: number that returned true: expected 1, got 50',
    );
    const full = await outcome(taskStoreContract(() => new IgnoresMaxRows()));
    expect((full.errors.get(MAX_ROWS) as Error).message).toBe(
      'create(a 4th task, maxRows 3): expected a refusal (a rejected promise), it resolved',
    );
    const lossy = await outcome(taskStoreContract(() => new DropsAField()));
    const message = (lossy.errors.get(FIELDS) as Error).message;
    expect(message).toMatch(/^get\(a record with every field\): the record read back differs/);
    expect(message).toContain('usedInputKeys');
  });

  it('disposes of every store it created, failed cases included', async () => {
    const created: TaskStore[] = [];
    const disposed: TaskStore[] = [];
    const cases = taskStoreContract({
      create: () => {
        const store = new IgnoresOwner();
        created.push(store);
        return store;
      },
      dispose: async (store) => {
        disposed.push(store);
      },
    });
    const { failed } = await outcome(cases);
    expect(failed.length).toBe(3);
    expect(created.length).toBe(cases.length);
    expect(new Set(created).size).toBe(created.length);
    expect(disposed.map((store) => created.indexOf(store))).toEqual(created.map((_, i) => i));
  });

  it('is written on the public API: it imports only the main and /store entries, node builtins and itself', () => {
    // The suite is task-store.contract.ts and its rule families under contract/.
    const root = join(process.cwd(), 'src/testing');
    const files = [
      'task-store.contract.ts',
      ...readdirSync(join(root, 'contract')).map((name) => `contract/${name}`),
    ];
    expect(files.length).toBeGreaterThan(5);
    for (const file of files) {
      const source = readFileSync(join(root, file), 'utf8');
      const up = file.startsWith('contract/') ? '../../' : '../';
      const entries = [`${up}index.js`, `${up}entries/store.js`];
      const own = file.startsWith('contract/')
        ? /^\.\/[\w.-]+\.js$/
        : /^\.\/contract\/[\w.-]+\.js$/;
      const specifiers = [...source.matchAll(/\bfrom\s+'([^']+)'/g)].map((match) => match[1]!);
      expect(specifiers.length).toBeGreaterThan(0);
      const foreign = specifiers.filter(
        (s) => !entries.includes(s) && !s.startsWith('node:') && !own.test(s),
      );
      expect(`${file}: ${foreign.join(', ')}`).toBe(`${file}: `);
      expect(source).not.toMatch(/\bimport\(/);
    }
  });

  it('refuses a harness without create', () => {
    expect(() => taskStoreContract({} as never)).toThrow(/create\(\)/);
  });
});

// ----- the status filter of listing ---------------------------------------------------------------

/** Declares that it filters by status, and hands back every state. */
class IgnoresStatus extends InMemoryTaskStore {
  override list(owner: TaskOwner, options: TaskStoreListOptions) {
    const { status, ...rest } = options;
    return super.list(owner, rest);
  }
}

/** Filters the first page only: a cursor forgets the filter. */
class ForgetsStatusAfterCursor extends InMemoryTaskStore {
  override list(owner: TaskOwner, options: TaskStoreListOptions) {
    const { status, ...rest } = options;
    return super.list(owner, options.cursor === undefined ? options : rest);
  }
}

/** The in-memory store as a store written before the filter: it does not declare it. */
class UndeclaredFilter extends InMemoryTaskStore {
  override readonly listsByStatus = false;
}

describe('taskStoreContract: listing by status', () => {
  const CONCURRENT = rule(
    'list (when the store has it): a cursor keeps its place under concurrent',
  );
  const BY_STATUS = rule('list by status (when the store filters): one state or several');
  const RARE = rule('list by status (when the store filters): a rare state');

  it('the in-memory store passes every case, declaring the filter or not', async () => {
    expect((await outcome(taskStoreContract(() => new InMemoryTaskStore()))).failed).toEqual([]);
    expect((await outcome(taskStoreContract(() => new UndeclaredFilter()))).failed).toEqual([]);
  });

  it('a store that declares the filter and ignores it fails exactly the status cases', async () => {
    const { failed } = await outcome(taskStoreContract(() => new IgnoresStatus()));
    expect(failed).toEqual([CONCURRENT, BY_STATUS, RARE]);
  });

  it('a store whose cursor forgets the filter fails the paged status cases', async () => {
    const { failed } = await outcome(taskStoreContract(() => new ForgetsStatusAfterCursor()));
    // (The rare states are the oldest tasks: past them nothing else is left for it to show.)
    expect(failed).toEqual([CONCURRENT, BY_STATUS]);
  });
});
