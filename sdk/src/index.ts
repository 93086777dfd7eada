export type { components, operations, paths, webhooks } from './api.d.ts';
export {
  type Page,
  type Problem,
  TourOps,
  TourOpsError,
  type TourOpsOptions,
  type WriteOptions,
} from './client.ts';
export {
  isThinEvent,
  type ThinWebhookEvent,
  type VerificationCheck,
  type VerifyOptions,
  verifyWebhook,
  type WebhookEvent,
  WebhookVerificationError,
} from './webhooks.ts';
