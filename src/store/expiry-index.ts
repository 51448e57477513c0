import { ExpiryHeap } from './expiry-heap.js';

/** Lanes kept before further lane keys go to the heap. */
const MAX_LANES = 64;

/** A run of (deadline, taskId) entries appended in deadline order; consumed from `head`. */
class Lane {
  deadlines: number[] = [];
  ids: string[] = [];
  head = 0;

  get last(): number {
    return this.deadlines.length === 0 ? -Infinity : this.deadlines[this.deadlines.length - 1]!;
  }

  get size(): number {
    return this.ids.length - this.head;
  }

  /** Drops the consumed prefix once it outweighs the rest (amortised O(1) per entry). */
  trim(): void {
    if (this.head < 1024 || this.head * 2 < this.ids.length) return;
    this.deadlines = this.deadlines.slice(this.head);
    this.ids = this.ids.slice(this.head);
    this.head = 0;
  }
}

/**
 * The in-memory store's expiry index. Tasks that share a lane key (their TTL) are created in
 * time order, so their deadlines arrive already sorted: each lane is an append-only queue, and
 * finding what is due reads the front of each lane — O(lanes + due) with sequential memory
 * access, where a heap over a million entries would jump around the whole array. An entry that
 * arrives out of order (the clock stepped back) or beyond MAX_LANES distinct keys goes to a
 * binary heap instead.
 *
 * Entries are never removed early: the store checks each due entry against the live record and
 * calls `compact` when deleted tasks have left too many stale entries behind.
 */
export class ExpiryIndex {
  private lanes = new Map<number, Lane>();
  private readonly overflow = new ExpiryHeap();

  get size(): number {
    let size = this.overflow.size;
    for (const lane of this.lanes.values()) size += lane.size;
    return size;
  }

  push(laneKey: number, deadline: number, taskId: string): void {
    let lane = this.lanes.get(laneKey);
    if (lane === undefined && this.lanes.size < MAX_LANES) {
      lane = new Lane();
      this.lanes.set(laneKey, lane);
    }
    if (lane === undefined || deadline < lane.last) {
      this.overflow.push(deadline, taskId);
      return;
    }
    lane.deadlines.push(deadline);
    lane.ids.push(taskId);
  }

  /** Removes every entry due at `until` (deadline ≤ until) and hands it to `visit`. */
  popDue(until: number, visit: (deadline: number, taskId: string) => void): void {
    for (const [key, lane] of this.lanes) {
      const { deadlines, ids } = lane;
      let head = lane.head;
      while (head < deadlines.length && deadlines[head]! <= until) {
        visit(deadlines[head]!, ids[head]!);
        head++;
      }
      lane.head = head;
      if (lane.size === 0) this.lanes.delete(key);
      else lane.trim();
    }
    const heap = this.overflow;
    while (heap.size > 0 && heap.peekDeadline() <= until) {
      const deadline = heap.peekDeadline();
      visit(deadline, heap.pop());
    }
  }

  /** Keeps only the entries `keep` accepts. O(n). */
  compact(keep: (deadline: number, taskId: string) => boolean): void {
    const lanes = new Map<number, Lane>();
    for (const [key, lane] of this.lanes) {
      const kept = new Lane();
      for (let i = lane.head; i < lane.ids.length; i++) {
        if (!keep(lane.deadlines[i]!, lane.ids[i]!)) continue;
        kept.deadlines.push(lane.deadlines[i]!);
        kept.ids.push(lane.ids[i]!);
      }
      if (kept.size > 0) lanes.set(key, kept);
    }
    this.lanes = lanes;
    this.overflow.compact(keep);
  }

  clear(): void {
    this.lanes.clear();
    this.overflow.clear();
  }
}
