import type { KeyObject } from 'node:crypto';
import { ed25519SigningKey, liveRetiredKeys, type RetiredKey } from '../domain/signing.ts';
import { BoundedMap } from '../lib/bounded-map.ts';
import type { SecretBox } from '../lib/secret-box.ts';
import type { ClaimedDelivery } from './types.ts';

const CACHE_LIMIT = 10_000;

/**
 * The keys an attempt signs with, opened from their sealed form once each and kept by it (a
 * rotation seals new text, so a cached key is never stale): the current key, then every retired
 * key still within the expiry promised for it.
 */
export class SigningKeys {
  /** Opened secrets by sealed text (signing keys, a broker URL's password). */
  private readonly opened = new BoundedMap<string, string>(CACHE_LIMIT);
  /** Ed25519 key objects by sealed text. */
  private readonly pairs = new BoundedMap<string, KeyObject>(CACHE_LIMIT);
  private readonly retired = new BoundedMap<string, readonly RetiredKey[]>(CACHE_LIMIT);

  constructor(private readonly secrets: SecretBox) {}

  /** The HMAC secrets, current first. */
  hmac(delivery: ClaimedDelivery, now: string): string[] {
    const keys = [this.open(delivery.signingKey, delivery.subscriptionId)];
    for (const { key } of this.liveRetired(delivery, now)) {
      keys.push(this.open(key, delivery.subscriptionId));
    }
    return keys;
  }

  /** The current Ed25519 key, then each retired one with a key still within its expiry. */
  ed25519(delivery: ClaimedDelivery, now: string): KeyObject[] {
    const sealed = [delivery.signingKeyPair];
    for (const { pair } of this.liveRetired(delivery, now)) sealed.push(pair ?? null);
    const pairs: KeyObject[] = [];
    for (const one of sealed) {
      if (one === null) continue;
      pairs.push(
        this.pairs.get(one) ??
          this.pairs.remember(
            one,
            ed25519SigningKey(this.secrets.decrypt(one, delivery.subscriptionId)),
          ),
      );
    }
    return pairs;
  }

  /** A secret sealed for the subscription, opened (once). */
  open(sealed: string, subscriptionId: string): string {
    return (
      this.opened.get(sealed) ??
      this.opened.remember(sealed, this.secrets.decrypt(sealed, subscriptionId))
    );
  }

  private liveRetired(delivery: ClaimedDelivery, now: string): RetiredKey[] {
    if (delivery.retiredSigningKeys === '[]') return [];
    const stored = delivery.retiredSigningKeys;
    const retired =
      this.retired.get(stored) ?? this.retired.remember(stored, JSON.parse(stored) as RetiredKey[]);
    return liveRetiredKeys(retired, now);
  }
}
