/** Entries removed tasks may leave before `compact` is worth its O(n). */
const MIN_STALE = 1024;

/**
 * The in-memory store's listing index (one across owners, one per owner): each task's `createdAt`
 * and id in listing order (creation, then id), in two parallel arrays, a number and a string
 * reference per task.
 * Tasks are created in time order, so an entry is almost always appended. One that arrives out of
 * order (the clock stepped back, records made with older `createdAt`s, as an import does) waits
 * in a side list, and the next read sorts that list and merges it in: O(k log k + n) once per
 * read that follows such entries, never O(n) per entry.
 *
 * Entries are never removed one by one: the store says when a task goes (`noteRemoved`), checks
 * each entry it reads against the live record, and the index compacts itself once removed tasks
 * have left as many entries behind as live ones (amortised O(1) per task). The owners' indexes
 * are compacted by the store instead (`compact`), all in one pass, on the same rule.
 */
export class CreationIndex {
  private createdAt: number[] = [];
  private ids: string[] = [];
  /**
   * Entries that arrived out of order, not merged yet; made when one arrives (the store keeps an
   * index per owner, most of them small and in order).
   */
  private late: { createdAt: number[]; ids: string[] } | undefined;
  private stale = 0;

  get size(): number {
    return this.ids.length + (this.late?.ids.length ?? 0);
  }

  add(createdAt: number, taskId: string): void {
    const last = this.ids.length - 1;
    if (last < 0) {
      // Arrays of one, not pushes onto empty ones (which reserve room for 16): an owner's index
      // often holds a task or two.
      this.createdAt = [createdAt];
      this.ids = [taskId];
    } else if (before(this.createdAt[last]!, this.ids[last]!, createdAt, taskId)) {
      this.createdAt.push(createdAt);
      this.ids.push(taskId);
    } else if (this.late === undefined) {
      this.late = { createdAt: [createdAt], ids: [taskId] };
    } else {
      this.late.createdAt.push(createdAt);
      this.late.ids.push(taskId);
    }
  }

  /** How many entries sort before (`createdAt`, `taskId`): where a walk down from it starts. */
  below(createdAt: number, taskId: string): number {
    this.settle();
    let low = 0;
    let high = this.ids.length;
    while (low < high) {
      const middle = (low + high) >>> 1;
      if (before(this.createdAt[middle]!, this.ids[middle]!, createdAt, taskId)) low = middle + 1;
      else high = middle;
    }
    return low;
  }

  /**
   * Hands the entries below position `from` to `visit`, newest first, until it returns false.
   * Returns the position of the entry that stopped it, or -1 when it visited them all.
   */
  walkDown(from: number, visit: (createdAt: number, taskId: string) => boolean): number {
    this.settle();
    const { createdAt, ids } = this;
    for (let i = Math.min(from, ids.length) - 1; i >= 0; i--) {
      if (!visit(createdAt[i]!, ids[i]!)) return i;
    }
    return -1;
  }

  /** Counts a task removed from the store; compacts with `live` once stale entries pile up. */
  noteRemoved(live: (createdAt: number, taskId: string) => boolean): void {
    if (++this.stale < MIN_STALE || this.stale * 2 < this.size) return;
    this.compact(live);
  }

  /**
   * Keeps only the entries `live` accepts: O(n). For an owner of the store, whose removals the
   * store counts itself and sweeps all owners at once (`noteRemoved` does it for one index).
   */
  compact(live: (createdAt: number, taskId: string) => boolean): void {
    this.settle();
    const createdAt: number[] = [];
    const ids: string[] = [];
    for (let i = 0; i < this.ids.length; i++) {
      if (!live(this.createdAt[i]!, this.ids[i]!)) continue;
      createdAt.push(this.createdAt[i]!);
      ids.push(this.ids[i]!);
    }
    this.createdAt = createdAt;
    this.ids = ids;
    this.stale = 0;
  }

  clear(): void {
    this.createdAt = [];
    this.ids = [];
    this.late = undefined;
    this.stale = 0;
  }

  /**
   * Merges the entries that arrived out of order into place; an entry equal to one there (a
   * task re-created with the same id and instant) is kept once.
   */
  private settle(): void {
    if (this.late === undefined) return;
    const { createdAt: lateCreatedAt, ids: lateIds } = this.late;
    const order = Array.from(lateIds.keys()).sort((a, b) =>
      before(lateCreatedAt[a]!, lateIds[a]!, lateCreatedAt[b]!, lateIds[b]!)
        ? -1
        : before(lateCreatedAt[b]!, lateIds[b]!, lateCreatedAt[a]!, lateIds[a]!)
          ? 1
          : 0,
    );
    const createdAt: number[] = [];
    const ids: string[] = [];
    const put = (at: number, id: string): void => {
      const last = ids.length - 1;
      if (last >= 0 && createdAt[last] === at && ids[last] === id) return;
      createdAt.push(at);
      ids.push(id);
    };
    let i = 0;
    for (const late of order) {
      const at = lateCreatedAt[late]!;
      const id = lateIds[late]!;
      while (i < this.ids.length && !before(at, id, this.createdAt[i]!, this.ids[i]!)) {
        put(this.createdAt[i]!, this.ids[i]!);
        i++;
      }
      put(at, id);
    }
    for (; i < this.ids.length; i++) put(this.createdAt[i]!, this.ids[i]!);
    this.createdAt = createdAt;
    this.ids = ids;
    this.late = undefined;
  }
}

/** Whether (a, aId) sorts before (b, bId) in listing order. */
function before(a: number, aId: string, b: number, bId: string): boolean {
  return a < b || (a === b && aId < bId);
}
