import { randomUUID } from 'node:crypto';
import createClient from 'openapi-fetch';
import type { components, operations, paths } from './api.d.ts';

type Schemas = components['schemas'];
/** The problem document of every error answer (application/problem+json). */
export type Problem = Schemas['Problem'];

/** Any answer other than a success, with its problem document. */
export class TourOpsError extends Error {
  readonly status: number;
  /** Stable identifier of the problem (a URL ending in its slug): branch on this. */
  readonly type: string;
  /** Field path to messages, on `validation-failed`. */
  readonly errors: Record<string, string[]> | undefined;
  /** `Service-Request-Id` of the request: quote it to support. */
  readonly requestId: string | undefined;
  readonly problem: Problem;

  constructor(status: number, problem: Problem, requestId: string | undefined) {
    super(`${status} ${problem.title}: ${problem.detail}`);
    this.name = 'TourOpsError';
    this.status = status;
    this.type = problem.type;
    this.errors = problem.errors;
    this.requestId = problem.requestId ?? requestId;
    this.problem = problem;
  }
}

export interface TourOpsOptions {
  /** An API token, `tk_live_…` or `tk_test_…`. */
  token: string;
  /** Where the API is, e.g. `https://api.example.com`. */
  baseUrl: string;
  /** Attempts of one write or read in all, retries included (default 4). */
  maxAttempts?: number;
  /** First wait between attempts, doubled each time, when the answer names none (default 500 ms). */
  retryBaseDelayMs?: number;
  /** Longest wait between attempts, `Retry-After` included (default 30 s). */
  maxRetryDelayMs?: number;
  /** Another fetch (tests, proxies). */
  fetch?: (request: Request) => Promise<Response>;
}

const WRITES = new Set(['POST', 'PATCH', 'PUT', 'DELETE']);

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** `Retry-After` in seconds or as an HTTP date, in milliseconds; null when absent or unreadable. */
function retryAfterMs(response: Response): number | null {
  const value = response.headers.get('retry-after');
  if (value === null) return null;
  if (/^\d+$/.test(value.trim())) return Number(value) * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? null : Math.max(0, at - Date.now());
}

/**
 * A fetch that makes requests safe to retry and retries them: every write gets an
 * `Idempotency-Key` (the caller's, or a new UUID), kept on every attempt, so a retried write runs
 * once; network errors, 429 and 5xx are retried, after `Retry-After` when the answer gives one,
 * else with exponential backoff and jitter, up to `maxAttempts`.
 */
function retryingFetch(options: Required<Omit<TourOpsOptions, 'token' | 'baseUrl'>>) {
  return async (request: Request): Promise<Response> => {
    if (WRITES.has(request.method) && !request.headers.has('idempotency-key')) {
      request.headers.set('idempotency-key', randomUUID());
    }
    for (let attempt = 1; ; attempt++) {
      const last = attempt >= options.maxAttempts;
      let response: Response;
      try {
        response = await options.fetch(request.clone());
      } catch (error) {
        if (last) throw error;
        await sleep(backoff(attempt, null, options));
        continue;
      }
      if (last || (response.status !== 429 && response.status < 500)) return response;
      // 501 (not implemented) will not change on a retry.
      if (response.status === 501) return response;
      await response.body?.cancel();
      await sleep(backoff(attempt, retryAfterMs(response), options));
    }
  };
}

function backoff(
  attempt: number,
  retryAfter: number | null,
  options: { retryBaseDelayMs: number; maxRetryDelayMs: number },
): number {
  const wait = retryAfter ?? options.retryBaseDelayMs * 2 ** (attempt - 1) * (0.5 + Math.random());
  return Math.min(wait, options.maxRetryDelayMs);
}

type Query<O extends keyof operations> = operations[O]['parameters'] extends { query?: infer Q }
  ? NonNullable<Q>
  : never;
type Body<O extends keyof operations> = operations[O] extends {
  requestBody?: { content: { 'application/json': infer B } };
}
  ? B
  : never;
/**
 * The filters of a list operation, plus `limit`: how many items to iterate in all (default: every
 * one), and `pageSize`: items per request (1-100, default 100). The cursor is followed for you.
 */
export type ListOptions<O extends keyof operations> = Omit<Query<O>, 'cursor' | 'limit'> & {
  limit?: number;
  pageSize?: number;
};
/** Options of every write: a key of your own makes a retry of the same operation safe too. */
export interface WriteOptions {
  idempotencyKey?: string;
}
export interface Page<T> {
  data: T[];
  meta: Schemas['PageMeta'];
}
type LibraryKind = 'cities' | 'hotels' | 'activities' | 'vehicles' | 'guides';
const LIBRARY_PATHS = {
  cities: '/api/v1/libraries/cities',
  hotels: '/api/v1/libraries/hotels',
  activities: '/api/v1/libraries/activities',
  vehicles: '/api/v1/libraries/vehicles',
  guides: '/api/v1/libraries/guides',
} as const;

/**
 * The TourOps public API: one typed method per operation, lists iterated across pages, writes
 * retried safely, errors thrown as TourOpsError.
 *
 * ```ts
 * const api = new TourOps({ token: process.env.TOUROPS_TOKEN, baseUrl: 'https://api.example.com' });
 * for await (const trip of api.trips.list({ status: 'active' })) console.log(trip.title);
 * ```
 */
export class TourOps {
  readonly #client;

  constructor(options: TourOpsOptions) {
    this.#client = createClient<paths>({
      baseUrl: options.baseUrl.replace(/\/+$/, ''),
      headers: { authorization: `Bearer ${options.token}` },
      fetch: retryingFetch({
        maxAttempts: options.maxAttempts ?? 4,
        retryBaseDelayMs: options.retryBaseDelayMs ?? 500,
        maxRetryDelayMs: options.maxRetryDelayMs ?? 30_000,
        fetch: options.fetch ?? ((request) => fetch(request)),
      }),
    });
  }

  /** The calling token, its tenant, plan and environment. */
  me() {
    return this.#call(this.#client.GET('/api/v1/me'));
  }

  readonly trips = {
    list: (options: ListOptions<'listTrips'> = {}) =>
      this.#all(options, (query) => this.#client.GET('/api/v1/trips', { params: { query } })),
    page: (query: Query<'listTrips'> = {}) =>
      this.#call(this.#client.GET('/api/v1/trips', { params: { query } })),
    get: (id: string) =>
      this.#data(this.#client.GET('/api/v1/trips/{id}', { params: { path: { id } } })),
    create: (body: Body<'createTrip'>, options: WriteOptions = {}) =>
      this.#data(this.#client.POST('/api/v1/trips', { body, headers: this.#key(options) })),
    update: (id: string, body: Body<'updateTrip'>, options: WriteOptions = {}) =>
      this.#data(
        this.#client.PATCH('/api/v1/trips/{id}', {
          params: { path: { id } },
          body,
          headers: this.#key(options),
        }),
      ),
  };

  readonly bookings = {
    list: (options: ListOptions<'listBookings'> = {}) =>
      this.#all(options, (query) => this.#client.GET('/api/v1/bookings', { params: { query } })),
    page: (query: Query<'listBookings'> = {}) =>
      this.#call(this.#client.GET('/api/v1/bookings', { params: { query } })),
    get: (id: string) =>
      this.#data(this.#client.GET('/api/v1/bookings/{id}', { params: { path: { id } } })),
    /** Not supported by the API yet: always throws TourOpsError 501 (`problem.next.checkoutUrl`). */
    create: (body: Body<'createBooking'>, options: WriteOptions = {}) =>
      this.#call(this.#client.POST('/api/v1/bookings', { body, headers: this.#key(options) })),
  };

  readonly clients = {
    list: (options: ListOptions<'listClients'> = {}) =>
      this.#all(options, (query) => this.#client.GET('/api/v1/clients', { params: { query } })),
    page: (query: Query<'listClients'> = {}) =>
      this.#call(this.#client.GET('/api/v1/clients', { params: { query } })),
    get: (id: string) =>
      this.#data(this.#client.GET('/api/v1/clients/{id}', { params: { path: { id } } })),
    create: (body: Body<'createClient'>, options: WriteOptions = {}) =>
      this.#data(this.#client.POST('/api/v1/clients', { body, headers: this.#key(options) })),
  };

  readonly payments = {
    list: (options: ListOptions<'listPayments'> = {}) =>
      this.#all(options, (query) => this.#client.GET('/api/v1/payments', { params: { query } })),
    page: (query: Query<'listPayments'> = {}) =>
      this.#call(this.#client.GET('/api/v1/payments', { params: { query } })),
  };

  readonly events = {
    /**
     * An event's full body, as a `full` subscription gets it (redacted after an erasure): what a
     * receiver of `thin` deliveries fetches. Needs the read scope of the event's resource.
     */
    get: (id: string) =>
      this.#data(this.#client.GET('/api/v1/events/{id}', { params: { path: { id } } })),
  };

  /** The tenant's catalogs, by kind. */
  readonly libraries = {
    list: <K extends LibraryKind>(kind: K, options: ListOptions<'listHotels'> = {}) =>
      this.#all(options, (query) =>
        // One shape for the five kinds; the path names the kind.
        this.#client.GET(LIBRARY_PATHS[kind] as '/api/v1/libraries/hotels', {
          params: { query },
        }),
      ),
  };

  readonly webhooks = {
    /** Every subscription, newest first (deleted ones included, inactive): one request. */
    list: () => this.#each(this.#client.GET('/api/v1/webhooks')),
    /** One subscription as the list shows it (a deleted one too); 404 for an unknown id. */
    get: (id: string) =>
      this.#data(this.#client.GET('/api/v1/webhooks/{id}', { params: { path: { id } } })),
    /** The answer holds `signingKey`: the only time it is shown. */
    create: (body: Body<'createWebhook'>, options: WriteOptions = {}) =>
      this.#call(this.#client.POST('/api/v1/webhooks', { body, headers: this.#key(options) })),
    /**
     * Any of `url`, `events`, `standardWebhooks`, `maxConcurrency`, `maxPerSecond`, `ordering`,
     * `active` (false pauses, true re-enables).
     */
    update: (id: string, body: Body<'updateWebhook'>, options: WriteOptions = {}) =>
      this.#data(
        this.#client.PATCH('/api/v1/webhooks/{id}', {
          params: { path: { id } },
          body,
          headers: this.#key(options),
        }),
      ),
    /**
     * One page of the subscription's ledger after `after` (the last sequence processed):
     * `{ data, meta: { hasMore } }`. A 409 `events_expired` names `firstSequence`.
     */
    events: (id: string, query: Query<'listWebhookEvents'> = {}) =>
      this.#call(
        this.#client.GET('/api/v1/webhooks/{id}/events', { params: { path: { id }, query } }),
      ),
    delete: (id: string, options: WriteOptions = {}) =>
      this.#call(
        this.#client.DELETE('/api/v1/webhooks/{id}', {
          params: { path: { id } },
          headers: this.#key(options),
        }),
      ),
    rotateKey: (id: string, options: WriteOptions = {}) =>
      this.#call(
        this.#client.POST('/api/v1/webhooks/{id}/rotate-key', {
          params: { path: { id } },
          headers: this.#key(options),
        }),
      ),
    deliveries: (id: string, options: ListOptions<'listWebhookDeliveries'> = {}) =>
      this.#all(options, (query) =>
        this.#client.GET('/api/v1/webhooks/{id}/deliveries', { params: { path: { id }, query } }),
      ),
    /** A delivery's HTTP attempts, newest first: status or error class, duration, response start. */
    attempts: (id: string, deliveryId: string, options: ListOptions<'listWebhookAttempts'> = {}) =>
      this.#all(options, (query) =>
        this.#client.GET('/api/v1/webhooks/{id}/deliveries/{deliveryId}/attempts', {
          params: { path: { id, deliveryId }, query },
        }),
      ),
    redeliver: (id: string, deliveryId: string, options: WriteOptions = {}) =>
      this.#data(
        this.#client.POST('/api/v1/webhooks/{id}/deliveries/{deliveryId}/redeliver', {
          params: { path: { id, deliveryId } },
          headers: this.#key(options),
        }),
      ),
    /** Redelivers every dead letter created in [since, until): `{ queued }`. At most 10,000. */
    recover: (id: string, body: Body<'recoverWebhook'>, options: WriteOptions = {}) =>
      this.#data(
        this.#client.POST('/api/v1/webhooks/{id}/recover', {
          params: { path: { id } },
          body,
          headers: this.#key(options),
        }),
      ),
    /** A test event: `webhook.test`, or a sample of `eventType`, marked `"test": true`. */
    test: (body: Body<'testWebhooks'> = {}, options: WriteOptions = {}) =>
      this.#data(this.#client.POST('/api/v1/webhooks/test', { body, headers: this.#key(options) })),
    /**
     * A payload filter's dry run: whether it takes `event`, or which of a subscription's last 50
     * ledger events it would have taken. Stores and sends nothing.
     */
    testFilter: (body: Body<'testWebhookFilter'>, options: WriteOptions = {}) =>
      this.#data(
        this.#client.POST('/api/v1/webhooks/filters/test', {
          body,
          headers: this.#key(options),
        }),
      ),
  };

  #key(options: WriteOptions): { 'Idempotency-Key'?: string } {
    return options.idempotencyKey === undefined
      ? {}
      : { 'Idempotency-Key': options.idempotencyKey };
  }

  /** The body of a success, or a TourOpsError for anything else. */
  async #call<D>(pending: Promise<{ data?: D; error?: unknown; response: Response }>): Promise<D> {
    const { data, error, response } = await pending;
    if (response.ok) return data as D;
    throw new TourOpsError(
      response.status,
      (error ?? { type: 'about:blank', title: response.statusText, detail: '' }) as Problem,
      response.headers.get('service-request-id') ?? undefined,
    );
  }

  async #data<D>(
    pending: Promise<{ data?: { data: D }; error?: unknown; response: Response }>,
  ): Promise<D> {
    return (await this.#call(pending)).data;
  }

  /**
   * Every item of a list, page after page, following `meta.cursor`, until `limit` items (all by
   * default); `pageSize` items a request (100, the most the API serves, by default).
   */
  async *#all<T, Q>(
    options: Q & { limit?: number; pageSize?: number },
    fetchPage: (
      query: Omit<Q, 'limit' | 'pageSize'> & { cursor?: string; limit: number },
    ) => Promise<{ data?: Page<T>; error?: unknown; response: Response }>,
  ): AsyncGenerator<T> {
    const { limit = Number.POSITIVE_INFINITY, pageSize = 100, ...filters } = options;
    let left = limit;
    let cursor: string | undefined;
    while (left > 0) {
      const query = { ...filters, cursor, limit: Math.min(pageSize, left) };
      const page = await this.#call(fetchPage(query));
      for (const item of page.data.slice(0, left)) yield item;
      left -= page.data.length;
      if (!page.meta.hasMore || page.meta.cursor === null) return;
      cursor = page.meta.cursor;
    }
  }

  /** The items of a list the API answers whole. */
  async *#each<T>(
    pending: Promise<{ data?: { data: T[] }; error?: unknown; response: Response }>,
  ): AsyncGenerator<T> {
    yield* (await this.#call(pending)).data;
  }
}
