/** Where a subscription's concurrency limit starts (new, or after a restart of the limit). */
export const INITIAL_CONCURRENCY = 4;
/** `maxConcurrency` when the subscription does not set it, and its bounds. */
export const DEFAULT_MAX_CONCURRENCY = 16;
export const MAX_CONCURRENCY = 64;

/** `ordering` of a subscription: `per_object` sends one delivery per object at a time. */
export const ORDERINGS = ['none', 'per_object'] as const;
export type Ordering = (typeof ORDERINGS)[number];

/**
 * The object an event is about, for `per_object` ordering: the booking of booking, dispute and
 * payment events, the trip of trip events, the client of client events; null for others (a test
 * fire), which are never held back.
 */
export function orderingKey(type: string, data: Readonly<Record<string, unknown>>): string | null {
  const [family] = type.split('.', 1);
  const member =
    family === 'booking' || family === 'dispute' || family === 'payment'
      ? 'bookingId'
      : family === 'trip'
        ? 'tripId'
        : family === 'client'
          ? 'clientId'
          : null;
  const value = member === null ? undefined : data[member];
  return typeof value === 'string' ? value : null;
}
