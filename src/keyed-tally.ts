/**
 * A count per key and in all, for the caps that hold one client to its share of something (slots
 * per owner, body bytes per address). A key counting nothing has no entry, so the map is only as
 * large as the keys holding something now.
 */
export class KeyedTally {
  private sum = 0;
  private readonly byKey = new Map<string, number>();

  /** The count of every key together. */
  get total(): number {
    return this.sum;
  }

  /** How many keys count something now. */
  get keys(): number {
    return this.byKey.size;
  }

  /** The count of `key` (0 when it has no entry). */
  of(key: string): number {
    return this.byKey.get(key) ?? 0;
  }

  /** Counts `amount` more for `key`. */
  add(key: string, amount: number): void {
    this.sum += amount;
    this.byKey.set(key, this.of(key) + amount);
  }

  /** Counts `amount` less for `key`; a key left with nothing loses its entry. */
  remove(key: string, amount: number): void {
    this.sum -= amount;
    const left = this.of(key) - amount;
    if (left > 0) this.byKey.set(key, left);
    else this.byKey.delete(key);
  }
}
