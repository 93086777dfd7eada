// With the SDK (sdk/README.md): verifyWebhook checks the signature and returns the typed event.
import { verifyWebhook, WebhookVerificationError } from '@tourops/sdk';

const signingKeys = (process.env.TOUROPS_SIGNING_KEYS ?? '').split(',');

/** Call it with the raw body (a Buffer, before any JSON parsing) and the request's headers. */
export function handleDelivery(
  rawBody: Buffer,
  headers: Record<string, string | string[] | undefined>,
): { status: number; message: string } {
  let event: ReturnType<typeof verifyWebhook>;
  try {
    event = verifyWebhook(rawBody, headers, signingKeys);
  } catch (error) {
    if (error instanceof WebhookVerificationError) return { status: 400, message: error.message };
    throw error;
  }
  switch (event.type) {
    case 'booking.confirmed':
      return { status: 204, message: `booking ${event.data.bookingId} confirmed` };
    default:
      return { status: 204, message: `${event.type} ${event.id}` };
  }
}
