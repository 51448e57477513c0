/**
 * A map that holds at most `maxEntries` entries and `maxBytes` bytes (as each entry's setter
 * counted them): past either, the oldest entries go. For what a process keeps on its own while
 * something else fails (changes the notifier could not send, writes whose answer was lost), so
 * that a long outage bounds its memory by bytes, whatever the records' sizes.
 */
export class BoundedMap<V> {
  private readonly entries = new Map<string, { value: V; bytes: number }>();
  private total = 0;

  constructor(
    private readonly maxEntries: number,
    private readonly maxBytes: number,
  ) {}

  get size(): number {
    return this.entries.size;
  }

  /** The bytes held, as counted by `set`. */
  get bytes(): number {
    return this.total;
  }

  get(key: string): V | undefined {
    return this.entries.get(key)?.value;
  }

  /** Sets `key` as the newest entry (a former value goes), then drops the oldest past a bound. */
  set(key: string, value: V, bytes: number): void {
    this.delete(key);
    this.entries.set(key, { value, bytes });
    this.total += bytes;
    while (this.entries.size > this.maxEntries || this.total > this.maxBytes) {
      const oldest = this.entries.keys().next().value;
      if (oldest === undefined) break;
      this.delete(oldest);
    }
  }

  delete(key: string): void {
    const entry = this.entries.get(key);
    if (entry === undefined) return;
    this.entries.delete(key);
    this.total -= entry.bytes;
  }

  /** Every value, oldest first, and the map emptied. */
  drain(): V[] {
    const values = [...this.entries.values()].map((entry) => entry.value);
    this.clear();
    return values;
  }

  clear(): void {
    this.entries.clear();
    this.total = 0;
  }
}
