import type { KeyObject } from 'node:crypto';
import { asymmetricSignatures, signatureHeader, standardSignature } from './signing.ts';
import { type PayloadForm, thinDataText } from './thin-payload.ts';

/** An event as stored: its data is the validated JSON text. */
export interface StoredEvent {
  id: string;
  type: string;
  data: string;
  isTest: boolean;
  /** Its place in the subscription's ledger; null for a test fire (and in `tourops listen`). */
  sequence: number | null;
}

/** What one attempt sends, besides the event itself. */
export interface AttemptLabels {
  /** `Service-Request-Id`: distinct per attempt. */
  requestId: string;
  attempt: number;
  userAgent: string;
}

/**
 * The body and headers of one delivery attempt, signed with `keys` (the current key first), and,
 * with Standard Webhooks, with `keyPairs` too (`v1a`, Ed25519: current first). The
 * worker and `tourops listen` both send this, so a receiver cannot tell them apart. The full data
 * is spliced in, not parsed and re-serialized; the thin form (`payload: 'thin'`) is built from it.
 * Either way the signature covers the exact text sent.
 */
export function deliveryRequest(
  event: StoredEvent,
  createdSeconds: number,
  keys: readonly string[],
  labels: AttemptLabels,
  options: {
    standardWebhooks?: boolean;
    keyPairs?: readonly KeyObject[];
    payload?: PayloadForm;
    /** The body to sign and send instead of the event's: a transformation's. */
    body?: string;
  } = {},
): { body: string; headers: Record<string, string> } {
  const body = options.body ?? deliveryBody(event, createdSeconds, options.payload);
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    'user-agent': labels.userAgent,
    'service-signature': signatureHeader(createdSeconds, body, keys),
    'service-event-type': event.type,
    'service-event-id': event.id,
    'service-request-id': labels.requestId,
    'service-delivery-attempt': String(labels.attempt),
  };
  if (event.sequence !== null) headers['service-event-sequence'] = String(event.sequence);
  if (options.standardWebhooks) {
    const signature = [
      standardSignature(event.id, createdSeconds, body, keys),
      ...asymmetricSignatures(event.id, createdSeconds, body, options.keyPairs ?? []),
    ]
      .filter((part) => part !== '')
      .join(' ');
    if (signature !== '') {
      headers['webhook-id'] = event.id;
      headers['webhook-timestamp'] = String(createdSeconds);
      headers['webhook-signature'] = signature;
    }
  }
  return { body, headers };
}

/** The body of a delivery of `event` created at `createdSeconds`, in the subscription's form. */
export function deliveryBody(
  event: StoredEvent,
  createdSeconds: number,
  payload: PayloadForm = 'full',
): string {
  const test = event.isTest ? ',"test":true' : '';
  const sequence = event.sequence === null ? '' : `,"sequence":${event.sequence}`;
  const data = payload === 'thin' ? thinDataText(event.data) : event.data;
  return `{"id":"${event.id}","type":"${event.type}","created":${createdSeconds}${test}${sequence},"data":${data}}`;
}

/**
 * `tourops listen` reads the database, not a server: it names itself rather than an address it
 * cannot know (PUBLIC_BASE_URL defaults to this shell's PORT, not the server's).
 */
export const LISTEN_USER_AGENT = 'Service-Webhooks/1.0 (tourops listen)';

/** The `User-Agent` of every delivery from an instance. */
export function deliveryUserAgent(publicBaseUrl: string): string {
  return `Service-Webhooks/1.0 (+${publicBaseUrl})`;
}
