/**
 * Open connections to brokers, one per destination (its URL with the password), shared by every
 * attempt to it and closed once idle. An opening that fails is forgotten at once, so the next
 * attempt connects again; one that is still under way is shared by the attempts that wait for it.
 */
export class LinkPool<L> {
  private readonly links = new Map<string, Entry<L>>();
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly options: {
      /** A link unused this long is closed. */
      idleMs: number;
      /** Closes a link; never rejects. */
      close: (link: L) => Promise<void>;
      /** Whether a link was closed since it opened (by the broker, the network). */
      isClosed: (link: L) => boolean;
    },
  ) {
    this.timer = setInterval(() => this.sweep(), Math.max(10, options.idleMs / 2));
    this.timer.unref();
  }

  /** The destination's open link, opened by `open` when there is none. */
  get(key: string, open: () => Promise<L>): Promise<L> {
    const now = Date.now();
    const held = this.links.get(key);
    if (held !== undefined) {
      held.lastUsed = now;
      return held.link;
    }
    const entry: Entry<L> = { link: open(), value: undefined, lastUsed: now };
    this.links.set(key, entry);
    entry.link.then(
      (value) => {
        entry.value = value;
      },
      () => {
        if (this.links.get(key) === entry) this.links.delete(key);
      },
    );
    return entry.link;
  }

  /**
   * The destination's link, as `get`; one closed since its last use (an earlier publish's refusal,
   * a restarted broker) is dropped and another opened, so the attempt gets its own answer.
   */
  async live(key: string, open: () => Promise<L>): Promise<L> {
    const link = await this.get(key, open);
    if (!this.options.isClosed(link)) return link;
    this.drop(key, link);
    return this.get(key, open);
  }

  /**
   * Forgets a link that failed and closes it, so that the next `get` opens another; one dropped
   * already, and a newer link under the same key, are left alone.
   */
  drop(key: string, link: L): void {
    const held = this.links.get(key);
    if (held === undefined || held.value !== link) return;
    this.links.delete(key);
    void this.options.close(link);
  }

  get size(): number {
    return this.links.size;
  }

  private sweep(): void {
    const idleSince = Date.now() - this.options.idleMs;
    for (const [key, entry] of this.links) {
      if (entry.lastUsed > idleSince) continue;
      this.links.delete(key);
      entry.link.then(
        (link) => this.options.close(link),
        () => undefined,
      );
    }
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    const entries = [...this.links.values()];
    this.links.clear();
    await Promise.all(
      entries.map((entry) =>
        entry.link.then(
          (link) => this.options.close(link),
          () => undefined,
        ),
      ),
    );
  }
}

interface Entry<L> {
  link: Promise<L>;
  /** The link, once open. */
  value: L | undefined;
  lastUsed: number;
}
