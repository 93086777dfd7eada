import type { TokenWithTenant } from '../repositories/tokens-repository.ts';

interface Entry {
  found: TokenWithTenant;
  scopes: ReadonlySet<string>;
  loadedAt: number;
}

/**
 * Token hash → token and tenant rows, for a few seconds. Authentication otherwise costs a
 * database round trip on every request, the largest share of a hot read. Changes made through
 * this process (revocation, tenant updates) evict at once; changes made by another process
 * (a second API process, the CLI) are seen within `ttlMs`. Unknown tokens are never cached.
 */
export class AuthCache {
  private readonly entries = new Map<string, Entry>();

  constructor(
    readonly ttlMs: number,
    private readonly maxEntries = 10_000,
  ) {}

  get(tokenHash: string, nowMs: number): Entry | undefined {
    const entry = this.entries.get(tokenHash);
    if (entry && nowMs - entry.loadedAt >= 0 && nowMs - entry.loadedAt < this.ttlMs) return entry;
    if (entry) this.entries.delete(tokenHash);
    return undefined;
  }

  set(
    tokenHash: string,
    found: TokenWithTenant,
    scopes: ReadonlySet<string>,
    nowMs: number,
  ): Entry {
    if (this.entries.size >= this.maxEntries) {
      // Oldest first: Map iterates in insertion order.
      const oldest = this.entries.keys().next();
      if (!oldest.done) this.entries.delete(oldest.value);
    }
    const entry = { found, scopes, loadedAt: nowMs };
    this.entries.set(tokenHash, entry);
    return entry;
  }

  forgetToken(tokenId: string): void {
    for (const [hash, entry] of this.entries) {
      if (entry.found.token.id === tokenId) this.entries.delete(hash);
    }
  }

  /** Applies a change announced by another process (see ChangeFeed). */
  forget(change: { tokenId?: string; tenantId?: string }): void {
    if (change.tokenId) this.forgetToken(change.tokenId);
    if (change.tenantId) this.forgetTenant(change.tenantId);
  }

  forgetTenant(tenantId: string): void {
    for (const [hash, entry] of this.entries) {
      if (entry.found.tenant.id === tenantId) this.entries.delete(hash);
    }
  }
}
