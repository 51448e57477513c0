/**
 * The key layout of RedisTaskStore under one prefix. Which keys share a Redis Cluster slot, and
 * why, is in docs/redis-cluster.md; these names are what existing data is stored under, so they
 * never change.
 */

/** The keys of one owner's sets (see `RedisKeys.owner`). */
export interface OwnerSets {
  /** The owner's count: the listing keys of its tasks, scored by expiry (see RESERVE). */
  readonly quota: string;
  /** The listing keys of the owner's finished tasks, scored by expiry (see RESERVE). */
  readonly done: string;
  /** The owner's listing index: listing keys, all scored 0, read by lex order. */
  readonly index: string;
}

/**
 * - A task is one hash `{prefix}{<taskId>}`; the braces are the hash tag, so every script on a
 *   task touches one slot.
 * - `{prefix}rows` scores every task by expiry (`maxRows`, and cleanup of expired rows);
 *   `{prefix}terminal` scores finished tasks without a TTL by the instant they finished.
 * - `{prefix}{{prefix}rows}created` scores every task by `createdAt` (the listing across owners),
 *   in the slot of the rows; when the prefix has a hash tag of its own, `{prefix}created`, in the
 *   prefix's slot. (A prefix with an unmatched brace can do neither, and is for a single Redis.)
 * - Each owner has `{prefix}owner:<owner>` (its listing index) and, in the slot of the rows,
 *   `…quota:<owner>` and `…done:<owner>` (its count and its finished tasks); `<owner>` is the
 *   owner key in base64url.
 * - Leases: `{prefix}{lease}instances` and `{prefix}{lease}held:<instance>`, all in the slot of
 *   the hash tag `{lease}`.
 * - A prefix with a hash tag of its own (`{tenant-7}:`) puts every key above in its slot: then
 *   one script may touch them all (`oneSlot`), on a Redis Cluster too.
 */
export class RedisKeys {
  readonly rows: string;
  /** Every task, scored by `createdAt`, in the slot of `rows`. */
  readonly created: string;
  readonly terminal: string;
  readonly instances: string;
  /** What an owner's count and finished set start with: the prefix, tagged with the rows' slot. */
  private readonly ownerSets: string;
  /**
   * Whether every key of the store lies in one Redis Cluster slot, whatever the task, owner or
   * instance: the prefix has a hash tag of its own. (On a single Redis every key is on its one
   * node anyway.)
   */
  readonly oneSlot: boolean;

  /** `prefix`: what every key starts with (a task's key is `prefix` + `{<taskId>}`). */
  constructor(readonly prefix: string) {
    this.rows = `${prefix}rows`;
    this.created = keyInSlotOf(this.rows, prefix, 'created');
    this.terminal = `${prefix}terminal`;
    this.instances = `${prefix}{lease}instances`;
    this.ownerSets = keyInSlotOf(this.rows, prefix, '');
    const slot = hashed(this.rows);
    const some = [this.owner('a'), this.owner('b')].flatMap(Object.values) as string[];
    some.push(this.task('a'), this.task('b'), this.held('a'), this.created, this.terminal);
    this.oneSlot = some.every((key) => hashed(key) === slot);
  }

  /** The key of a task; `{…}` is the Redis Cluster hash tag. */
  task(taskId: string): string {
    return `${this.prefix}{${taskId}}`;
  }

  /** The tasks an instance holds; `{lease}` is the hash tag of every lease key. */
  held(instanceId: string): string {
    return `${this.prefix}{lease}held:${instanceId}`;
  }

  /** The keys of one owner's sets; `owner` is its ownerKey, encoded once for all three. */
  owner(owner: string): OwnerSets {
    const encoded = Buffer.from(owner).toString('base64url');
    return {
      quota: `${this.ownerSets}quota:${encoded}`,
      done: `${this.ownerSets}done:${encoded}`,
      index: `${this.prefix}owner:${encoded}`,
    };
  }
}

/**
 * A key named `prefix` + `name` in the Redis Cluster slot of `key`, which starts with `prefix`:
 * when `key` has a hash tag (it lies in the prefix), `prefix` + `name`; else `key` itself is
 * made the tag. A prefix with an unmatched brace allows neither: then `prefix` + `name`, in
 * another slot (fine on a single Redis).
 */
function keyInSlotOf(key: string, prefix: string, name: string): string {
  if (hashed(key) !== key) return `${prefix}${name}`;
  const tagged = `${prefix}{${key}}${name}`;
  return hashed(tagged) === key ? tagged : `${prefix}${name}`;
}

/** The part of a key Redis Cluster hashes: its hash tag (`{…}`, not empty), else all of it. */
function hashed(key: string): string {
  const open = key.indexOf('{');
  const close = open < 0 ? -1 : key.indexOf('}', open + 1);
  return close > open + 1 ? key.slice(open + 1, close) : key;
}
