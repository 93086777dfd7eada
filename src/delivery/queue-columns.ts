import type { JsonColumn } from '../db/json-params.ts';

// The columns of the queue's batch statements, each batch one JSON parameter (see jsonRows).

/** A claim given back. */
export const GIVEN_BACK_COLUMNS: readonly JsonColumn[] = [
  ['id', 'text', 'id'],
  ['claimed_at', 'text', 'claimedAt'],
  ['next_attempt_at', 'text', 'nextAttemptAt'],
];
/** An outcome. */
export const OUTCOME_COLUMNS: readonly JsonColumn[] = [
  ['id', 'text', 'id'],
  ['claimed_at', 'text', 'claimedAt'],
  ['status', 'text', 'status'],
  ['attempts', 'integer', 'attempts'],
  ['last_response_status', 'integer', 'lastResponseStatus'],
  ['next_attempt_at', 'text', 'nextAttemptAt'],
  ['delivered_at', 'text', 'deliveredAt'],
  ['last_error', 'text', 'lastError'],
];
/** An attempt's, in the attempt log's columns (see WebhookAttemptsTable). */
export const ATTEMPT_COLUMNS: readonly JsonColumn[] = [
  ['id', 'text', 'id'],
  ['tenant_id', 'text', 'tenantId'],
  ['delivery_id', 'text', 'deliveryId'],
  ['attempt', 'integer', 'attempt'],
  ['started_at', 'text', 'startedAt'],
  ['duration_ms', 'integer', 'durationMs'],
  ['status', 'integer', 'status'],
  ['error_class', 'text', 'errorClass'],
  ['response_body', 'text', 'responseBody'],
  ['retry_after', 'text', 'retryAfter'],
  ['concurrency_limit', 'integer', 'concurrencyLimit'],
  ['cancelled', 'integer', 'cancelled'],
];
