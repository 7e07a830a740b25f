/**
 * A bounded map that forgets entries not used lately first: the "second chance" (CLOCK) variant of
 * LRU. A hit only marks its entry, so reading never reorders the map (a Map delete-and-set per hit
 * made hits several times slower on a full cache); at eviction, a marked oldest entry is moved to
 * the back unmarked instead of being dropped.
 */
export class Lru<K, V> {
  private readonly entries = new Map<K, { value: V; used: boolean }>();
  constructor(private readonly capacity: number) {}

  get size(): number {
    return this.entries.size;
  }

  get(key: K): V | undefined {
    const entry = this.entries.get(key);
    if (entry === undefined) return undefined;
    entry.used = true;
    return entry.value;
  }

  set(key: K, value: V): void {
    this.entries.delete(key);
    this.entries.set(key, { value, used: false });
    while (this.entries.size > this.capacity) {
      const [oldest, entry] = this.entries.entries().next().value as [K, { value: V; used: boolean }];
      this.entries.delete(oldest);
      if (entry.used) {
        entry.used = false;
        this.entries.set(oldest, entry);
      }
    }
  }

  delete(key: K): void {
    this.entries.delete(key);
  }

  clear(): void {
    this.entries.clear();
  }
}
