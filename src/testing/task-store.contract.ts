/**
 * The TaskStore contract: the rules every store must keep, as plain test cases that any runner
 * (Jest, Vitest, node:test, Mocha) can run. It speaks to a store only through the public
 * TaskStore interface, and builds its records by hand (stores never apply lifecycle rules).
 *
 * The rules live under contract/, one file per family (records, expiry, capacity, listing,
 * leases). This file and those may import only the package's main entry, node builtins and each
 * other.
 */
import type { TaskStore } from '../entries/store.js';
import { CAPACITY_RULES } from './contract/capacity.rules.js';
import type { ContractRule } from './contract/contract-fixtures.js';
import { EXPIRY_RULES } from './contract/expiry.rules.js';
import { LEASE_RULES } from './contract/leases.rules.js';
import { LIST_ALL_RULES } from './contract/list-all.rules.js';
import { LISTING_RULES } from './contract/listing.rules.js';
import { DETAILED_RECORD_RULES, RECORD_RULES } from './contract/records.rules.js';

/** How the contract gets a store: a fresh, empty one per case, released after it. */
export interface TaskStoreHarness<S extends TaskStore = TaskStore> {
  /** A new, empty store (for a shared database: a fresh key prefix, schema or table). */
  create(): S | Promise<S>;
  /** Releases it (closes connections); runs after each case, passed or failed. Optional. */
  dispose?(store: S): void | Promise<void>;
}

/** One rule of the contract. `run` takes no arguments, so `it(c.name, c.run)` works anywhere. */
export interface TaskStoreContractCase {
  readonly name: string;
  readonly run: () => Promise<void>;
}

/**
 * The TaskStore contract as a list of `{ name, run }` cases. Each `run` creates a fresh store
 * through the harness, checks one rule with `node:assert/strict`, and disposes of the store.
 *
 * ```ts
 * for (const c of taskStoreContract({ create: () => new MyTaskStore() })) it(c.name, c.run);
 * ```
 *
 * `harness` may also be the factory alone: `taskStoreContract(() => new MyTaskStore())`.
 */
export function taskStoreContract<S extends TaskStore>(
  harness: TaskStoreHarness<S> | (() => S | Promise<S>),
): TaskStoreContractCase[] {
  const { create, dispose } =
    typeof harness === 'function' ? { create: harness, dispose: undefined } : harness;
  if (typeof create !== 'function') {
    throw new TypeError('taskStoreContract: the harness needs a create() that returns a store');
  }
  return RULES.map(([name, check]) => ({
    name,
    run: async (): Promise<void> => {
      const store = await create.call(harness);
      if (store === null || typeof store !== 'object') {
        throw new TypeError(`harness.create() must return a TaskStore, got ${String(store)}`);
      }
      try {
        await check(store);
      } finally {
        await dispose?.call(harness, store);
      }
    },
  }));
}

/** The names of the contract's cases, in order (for reports and for filtering). */
export function taskStoreContractRules(): string[] {
  return RULES.map(([name]) => name);
}

/** The rules, family by family; the order is the contract's (reports and filters name them). */
const RULES: readonly ContractRule[] = [
  ...RECORD_RULES,
  ...EXPIRY_RULES,
  ...CAPACITY_RULES,
  ...DETAILED_RECORD_RULES,
  ...LISTING_RULES,
  ...LIST_ALL_RULES,
  ...LEASE_RULES,
];
