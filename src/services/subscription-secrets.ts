import { destinationKind, keepsPassword } from '../domain/destinations.ts';
import {
  hasReceiverSecrets,
  NO_RECEIVER_SECRETS,
  nextReceiverSecrets,
  type ReceiverAuthInput,
  type ReceiverSecrets,
  setsReceiverAuth,
  shownReceiverAuth,
} from '../domain/receiver-auth.ts';
import { SECRET_MASK } from '../domain/redaction.ts';
import { fieldError, validationFailed } from '../lib/problems.ts';
import type { SecretBox } from '../lib/secret-box.ts';
import type { SubscriptionRow } from '../repositories/webhooks-repository.ts';

/** A webhook URL the address guard accepted (checkTarget). */
export interface CheckedTarget {
  /** As stored and shown: a broker password masked (see splitPassword). */
  readonly url: string;
  /** The password the URL named, in clear (SECRET_MASK when a PATCH sent the mask back). */
  readonly password: string | null;
}

/**
 * The receiver secrets a create or PATCH leaves for `url` (422 naming each fault): HTTPS
 * endpoints only; `keep`: the origin is the one the stored secrets were set for.
 */
export function receiverSecretsFor(
  url: string,
  input: ReceiverAuthInput,
  stored: ReceiverSecrets,
  keep: boolean,
  now: Date,
): ReceiverSecrets {
  const next = nextReceiverSecrets(input, stored, keep, now);
  if ('errors' in next) throw validationFailed(next.errors);
  if (
    destinationKind(url) !== 'https' &&
    (setsReceiverAuth(input) || hasReceiverSecrets(next.secrets))
  ) {
    const field =
      input.auth !== undefined && input.auth !== null
        ? 'auth'
        : input.clientCertificate !== undefined && input.clientCertificate !== null
          ? 'clientCertificate'
          : 'headers';
    throw fieldError(field, 'is for HTTPS endpoints only: a broker authenticates by its URL');
  }
  return next.secrets;
}

/** A URL's origin (scheme, host, port); '' for one that does not parse. */
export function originOf(url: string): string {
  try {
    return new URL(url).origin;
  } catch {
    return '';
  }
}

/**
 * A subscription's secrets as stored, sealed with SECRET_KEY and bound to its id: its receiver
 * authentication (beside what reads show of it) and a broker URL's password.
 */
export class SubscriptionSecrets {
  constructor(private readonly box: SecretBox) {}

  /** Receiver authentication as stored: the shown JSON and the secrets sealed (null for none). */
  receiverAuth(
    secrets: ReceiverSecrets,
    id: string,
  ): { receiverAuth: string | null; receiverSecrets: string | null } {
    if (!hasReceiverSecrets(secrets)) return { receiverAuth: null, receiverSecrets: null };
    return {
      receiverAuth: JSON.stringify(shownReceiverAuth(secrets)),
      receiverSecrets: this.box.encrypt(JSON.stringify(secrets), id),
    };
  }

  /** What a stored row's receiver authentication holds, opened (none: no secrets). */
  openReceiverAuth(row: SubscriptionRow): ReceiverSecrets {
    return row.receiverSecrets === null
      ? NO_RECEIVER_SECRETS
      : (JSON.parse(this.box.decrypt(row.receiverSecrets, row.id)) as ReceiverSecrets);
  }

  /** A new subscription's URL password, sealed; the mask is no password. */
  newPassword(checked: CheckedTarget, id: string): string | null {
    if (checked.password === SECRET_MASK) {
      throw fieldError(
        'url',
        `the password ${SECRET_MASK} stands for a stored one: send the password itself`,
      );
    }
    return checked.password === null ? null : this.box.encrypt(checked.password, id);
  }

  /**
   * A PATCHed URL's password: the mask keeps the stored one, but only for the same user, scheme,
   * host and port, so that no URL change carries it to another server.
   */
  keptPassword(current: SubscriptionRow, checked: CheckedTarget, id: string): string | null {
    if (checked.password !== SECRET_MASK) return this.newPassword(checked, id);
    if (current.urlPassword === null || !keepsPassword(current.url, checked.url)) {
      throw fieldError(
        'url',
        `the password ${SECRET_MASK} keeps the stored one only for the same user, host and port: send the password itself`,
      );
    }
    return current.urlPassword;
  }
}
