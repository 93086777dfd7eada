/**
 * The requests the benchmarks load the API with, each with the check its answer must pass before
 * any load (a benchmark of errors measures nothing); shared by `npm run bench` and `bench:ab`.
 */
import { randomUUID } from 'node:crypto';
import type { SeededTenant } from './seed.ts';

export interface Probe {
  label: string;
  /** GET when omitted. */
  method?: 'GET' | 'POST';
  path: string;
  headers?: Record<string, string>;
  /** Request body, sent as is (its content-type goes in `headers`). */
  body?: string;
  /** Headers drawn anew for every request (a unique Idempotency-Key), the check's included. */
  perRequestHeaders?: () => Record<string, string>;
  /** Checks one response before any load. */
  check(status: number, body: string): string | null;
}

/**
 * The API under load: no limiter may turn the load into 429s (the limits are per token and per
 * IP, and every request of a bench comes from one token and one address).
 */
export const UNLIMITED_RATES = {
  RATE_LIMIT_BURST_PER_SEC: '1000000',
  RATE_LIMIT_PER_MIN: '100000000',
  RATE_LIMIT_IP_PER_MIN: '100000000',
} as const;

/** Sends the probe once and throws, with the answer, when its check fails. */
export async function checkProbe(baseUrl: string, probe: Probe): Promise<void> {
  const method = probe.method ?? 'GET';
  const response = await fetch(`${baseUrl}${probe.path}`, {
    method,
    headers: { ...probe.headers, ...probe.perRequestHeaders?.() },
    body: probe.body,
    signal: AbortSignal.timeout(10_000),
  });
  const body = await response.text();
  const problem = probe.check(response.status, body);
  if (problem) {
    throw new Error(
      `${probe.label}: ${problem}\n${method} ${probe.path} -> ${response.status} ${body.slice(0, 500)}`,
    );
  }
}

export function expectJson(
  check: (json: Record<string, unknown>) => string | null,
  expected = 200,
) {
  return (status: number, body: string): string | null => {
    if (status !== expected) return `expected ${expected}, got ${status}`;
    try {
      return check(JSON.parse(body) as Record<string, unknown>);
    } catch {
      return 'the body is not JSON';
    }
  };
}

export function singleTripProbe(tenant: SeededTenant): Probe {
  return {
    label: 'GET /api/v1/trips/{id}',
    path: `/api/v1/trips/${tenant.tripId}`,
    headers: { authorization: `Bearer ${tenant.token}` },
    check: expectJson((json) =>
      (json.data as { id?: string } | undefined)?.id === tenant.tripId
        ? null
        : 'not the trip asked for',
    ),
  };
}

/** The page of 50 trips after the middle of the tenant's list. */
export function listProbe(tenant: SeededTenant): Probe {
  return {
    label: `GET /api/v1/trips?limit=50 mid-list, ${tenant.trips.toLocaleString('en-US')} trips`,
    path: `/api/v1/trips?limit=50&cursor=${tenant.middleCursor}`,
    headers: { authorization: `Bearer ${tenant.token}` },
    check: expectJson((json) => {
      const data = json.data as unknown[] | undefined;
      const meta = json.meta as { hasMore?: boolean } | undefined;
      const expected = Math.min(
        50,
        tenant.trips - Math.max(0, Math.floor(tenant.trips / 2) - 1) - 1,
      );
      if (!Array.isArray(data) || data.length !== expected) {
        return `expected a page of ${expected} trips, got ${Array.isArray(data) ? data.length : 'none'}`;
      }
      return meta && typeof meta.hasMore === 'boolean' ? null : 'no meta.hasMore';
    }),
  };
}

const CLIENT_BODY = JSON.stringify({ kind: 'individual', displayName: 'Bench client' });

/** `POST /api/v1/clients`, each request creating a client; with a fresh Idempotency-Key each time. */
export function createClientProbe(tenant: SeededTenant, idempotencyKey: boolean): Probe {
  return {
    label: `POST /api/v1/clients, ${idempotencyKey ? 'unique Idempotency-Key' : 'no Idempotency-Key'}`,
    method: 'POST',
    path: '/api/v1/clients',
    headers: {
      authorization: `Bearer ${tenant.token}`,
      'content-type': 'application/json',
    },
    body: CLIENT_BODY,
    perRequestHeaders: idempotencyKey ? () => ({ 'idempotency-key': randomUUID() }) : undefined,
    check: expectJson(
      (json) =>
        (json.data as { displayName?: string } | undefined)?.displayName === 'Bench client'
          ? null
          : 'not the created client',
      201,
    ),
  };
}
