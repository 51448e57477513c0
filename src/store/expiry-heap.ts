/**
 * A binary min-heap of (deadline, taskId) pairs in two parallel arrays. The in-memory store keeps
 * one per kind of expiry, so cleanup pops only what is due: O(expired · log n), not O(n).
 * Entries are never removed from the middle; the store checks each popped entry against the
 * live record and compacts the heap when too many entries have gone stale.
 */
export class ExpiryHeap {
  private deadlines: number[] = [];
  private ids: string[] = [];

  get size(): number {
    return this.ids.length;
  }

  push(deadline: number, taskId: string): void {
    const deadlines = this.deadlines;
    const ids = this.ids;
    let index = ids.length;
    deadlines.push(deadline);
    ids.push(taskId);
    while (index > 0) {
      const parent = (index - 1) >> 1;
      if (deadlines[parent] <= deadline) break;
      deadlines[index] = deadlines[parent];
      ids[index] = ids[parent];
      index = parent;
    }
    deadlines[index] = deadline;
    ids[index] = taskId;
  }

  /** The earliest deadline, or `Infinity` when empty. */
  peekDeadline(): number {
    return this.ids.length === 0 ? Infinity : this.deadlines[0];
  }

  /** Removes the earliest entry and returns its task id (call only when not empty). */
  pop(): string {
    const deadlines = this.deadlines;
    const ids = this.ids;
    const top = ids[0];
    const lastDeadline = deadlines.pop() as number;
    const lastId = ids.pop() as string;
    const size = ids.length;
    if (size === 0) return top;
    let index = 0;
    for (;;) {
      const left = 2 * index + 1;
      if (left >= size) break;
      const right = left + 1;
      const child = right < size && deadlines[right] < deadlines[left] ? right : left;
      if (deadlines[child] >= lastDeadline) break;
      deadlines[index] = deadlines[child];
      ids[index] = ids[child];
      index = child;
    }
    deadlines[index] = lastDeadline;
    ids[index] = lastId;
    return top;
  }

  /** Rebuilds the heap from the entries `keep` accepts, in O(n). */
  compact(keep: (deadline: number, taskId: string) => boolean): void {
    const entries: [number, string][] = [];
    for (let i = 0; i < this.ids.length; i++) {
      if (keep(this.deadlines[i], this.ids[i])) entries.push([this.deadlines[i], this.ids[i]]);
    }
    this.clear();
    entries.sort((a, b) => a[0] - b[0]);
    for (const [deadline, id] of entries) {
      this.deadlines.push(deadline);
      this.ids.push(id);
    }
  }

  clear(): void {
    this.deadlines = [];
    this.ids = [];
  }
}
