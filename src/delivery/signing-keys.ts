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

  /**
   * What an attempt at `now` signs with: the HMAC secrets, current first, and for a Standard
   * Webhooks subscription with asymmetric signatures its Ed25519 keys too: the current one, then
   * each retired one with a key still within its expiry.
   */
  forAttempt(delivery: ClaimedDelivery, now: string): { secrets: string[]; keyPairs: KeyObject[] } {
    const retired = this.liveRetired(delivery, now);
    const secrets = [this.open(delivery.signingKey, delivery.subscriptionId)];
    for (const { key } of retired) secrets.push(this.open(key, delivery.subscriptionId));
    const keyPairs: KeyObject[] = [];
    if (!delivery.standardWebhooks || !delivery.asymmetricSignatures) return { secrets, keyPairs };
    for (const sealed of [delivery.signingKeyPair, ...retired.map(({ pair }) => pair ?? null)]) {
      if (sealed === null) continue;
      keyPairs.push(
        this.pairs.get(sealed) ??
          this.pairs.remember(
            sealed,
            ed25519SigningKey(this.secrets.decrypt(sealed, delivery.subscriptionId)),
          ),
      );
    }
    return { secrets, keyPairs };
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
