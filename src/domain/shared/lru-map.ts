/**
 * A Map bounded to `capacity` entries, least recently used out: `set` makes an entry the newest,
 * and the oldest leaves when one too many is held. A JavaScript Map keeps insertion order, so the
 * first key is the least recently set. `get` does not refresh an entry; `touch` does.
 */
export class LruMap<K, V> {
  readonly #entries = new Map<K, V>();

  constructor(private readonly capacity: number) {}

  get(key: K): V | undefined {
    return this.#entries.get(key);
  }

  /** The entry, made the newest (undefined when none is held). */
  touch(key: K): V | undefined {
    const value = this.#entries.get(key);
    if (value !== undefined) this.set(key, value);
    return value;
  }

  set(key: K, value: V): void {
    this.#entries.delete(key);
    this.#entries.set(key, value);
    if (this.#entries.size > this.capacity) this.#entries.delete(this.#entries.keys().next().value!);
  }

  delete(key: K): void {
    this.#entries.delete(key);
  }

  get size(): number {
    return this.#entries.size;
  }
}
