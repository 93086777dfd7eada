/**
 * A Map that a cache of derived values can grow without bound over (parsed URLs, opened keys,
 * prepared statements): once `limit` entries are held, the next one clears it first. Clearing
 * all at once, not evicting one by one, keeps the hit path a plain `get`; the values are cheap to
 * derive again, and a working set larger than the limit is not expected.
 */
export class BoundedMap<K, V> extends Map<K, V> {
  constructor(private readonly limit: number) {
    super();
  }

  /** Keeps `value` under `key` (clearing a full map first), and returns it. */
  remember(key: K, value: V): V {
    if (this.size >= this.limit) this.clear();
    this.set(key, value);
    return value;
  }
}
