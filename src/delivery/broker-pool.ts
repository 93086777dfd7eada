/**
 * Open connections to brokers, one per destination (its URL with the password), shared by every
 * attempt to it and closed once idle. An opening that fails is forgotten at once, so the next
 * attempt connects again; one that is still under way is shared by the attempts that wait for it.
 */
export class LinkPool<L> {
  private readonly links = new Map<string, { link: Promise<L>; lastUsed: number }>();
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly options: {
      /** A link unused this long is closed. */
      idleMs: number;
      /** Closes a link; never rejects. */
      close: (link: L) => Promise<void>;
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
    const link = open();
    const entry = { link, lastUsed: now };
    this.links.set(key, entry);
    link.catch(() => {
      if (this.links.get(key) === entry) this.links.delete(key);
    });
    return link;
  }

  /** Forgets a link that failed (closing it), so the next attempt opens another. */
  drop(key: string, link: L): void {
    const held = this.links.get(key);
    if (held === undefined) return;
    held.link.then(
      (open) => {
        if (open !== link) return;
        if (this.links.get(key) === held) this.links.delete(key);
        void this.options.close(link);
      },
      () => undefined,
    );
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
