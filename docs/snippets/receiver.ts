// A TourOps webhook receiver in Node: `node:http`, the raw body, and one call to verify it.
import { createServer } from 'node:http';
import { verifyWebhook, WebhookVerificationError } from '@tourops/sdk';
import Stripe from 'stripe';

const signingKeys = (process.env.TOUROPS_SIGNING_KEYS ?? '').split(',');

/** With the SDK: returns the typed event, or throws WebhookVerificationError. */
export function handleWithSdk(
  rawBody: Buffer,
  headers: Record<string, string | string[] | undefined>,
) {
  const event = verifyWebhook(rawBody, headers, signingKeys);
  switch (event.type) {
    case 'booking.confirmed':
      return `booking ${event.data.bookingId} confirmed`;
    default:
      return `${event.type} ${event.id}`;
  }
}

/** The same with Stripe's library: the signature scheme is compatible (one key at a time). */
export function handleWithStripe(rawBody: Buffer, signatureHeader: string) {
  const stripe = new Stripe('sk_unused');
  const event = stripe.webhooks.constructEvent(rawBody, signatureHeader, signingKeys[0], 300);
  return `${event.type} ${event.id}`;
}

export const server = createServer((request, response) => {
  const chunks: Buffer[] = [];
  request.on('data', (chunk: Buffer) => chunks.push(chunk));
  request.on('end', () => {
    try {
      console.log(handleWithSdk(Buffer.concat(chunks), request.headers));
      response.writeHead(204).end();
    } catch (error) {
      response.writeHead(error instanceof WebhookVerificationError ? 400 : 500).end();
    }
  });
});
