/**
 * Every non-2xx answer is one of these problem types (`GET /errors`). The error handler renders an
 * ApiProblem as application/problem+json with `type` under ERRORS_BASE_URL.
 */
export const PROBLEM_TYPES = {
  unauthorized: { status: 401, title: 'Unauthorized' },
  'scope-required': { status: 403, title: 'Scope required' },
  'plan-required': { status: 403, title: 'Plan required' },
  forbidden: { status: 403, title: 'Forbidden' },
  'not-found': { status: 404, title: 'Not found' },
  'request-timeout': { status: 408, title: 'Request timeout' },
  conflict: { status: 409, title: 'Conflict' },
  'idempotency-key-reuse': { status: 409, title: 'Idempotency key reused' },
  'idempotency-in-progress': { status: 409, title: 'Idempotent request in progress' },
  'validation-failed': { status: 422, title: 'Validation failed' },
  'rate-limited': { status: 429, title: 'Rate limited' },
  'headers-too-large': { status: 431, title: 'Request headers too large' },
  internal: { status: 500, title: 'Internal error' },
  'booking-create-not-supported': { status: 501, title: 'Booking creation not supported' },
  'service-unavailable': { status: 503, title: 'Service unavailable' },
} as const;

export type ProblemSlug = keyof typeof PROBLEM_TYPES;

/** Field path (`title`, `tags.3`) to messages. */
export type FieldErrors = Record<string, string[]>;

export class ApiProblem extends Error {
  readonly slug: ProblemSlug;
  readonly status: number;
  readonly detail: string;
  readonly extra: Record<string, unknown>;
  readonly headers: Record<string, string>;

  constructor(
    slug: ProblemSlug,
    detail: string,
    extra: Record<string, unknown> = {},
    headers: Record<string, string> = {},
  ) {
    super(detail);
    this.name = 'ApiProblem';
    this.slug = slug;
    this.status = PROBLEM_TYPES[slug].status;
    this.detail = detail;
    this.extra = extra;
    this.headers = headers;
  }
}

export const unauthorized = (detail: string) =>
  new ApiProblem('unauthorized', detail, {}, { 'WWW-Authenticate': 'Bearer' });

export const scopeRequired = (scope: string) =>
  new ApiProblem('scope-required', `This token lacks the scope ${scope}.`, {
    required_scope: scope,
  });

/** 429; `scope` ip marks the pre-authentication guard. */
export const rateLimited = (retryAfterSeconds: number, scope: 'token' | 'ip') =>
  new ApiProblem(
    'rate-limited',
    scope === 'ip'
      ? `Too many requests from this address; retry after ${retryAfterSeconds} s.`
      : `Too many requests for this token; retry after ${retryAfterSeconds} s.`,
    {},
    {
      'Retry-After': String(retryAfterSeconds),
      ...(scope === 'ip' ? { 'X-RateLimit-Scope': 'ip' } : {}),
    },
  );

export const notFound = (what = 'The resource') =>
  new ApiProblem('not-found', `${what} was not found.`);

export const forbidden = (detail: string, code?: string) =>
  new ApiProblem('forbidden', detail, code ? { code } : {});

export const conflict = (detail: string, code?: string) =>
  new ApiProblem('conflict', detail, code ? { code } : {});

/** A refused move of a lifecycle: says where it stands and where it may go from there. */
export function invalidTransition(
  transitions: Record<string, readonly string[]>,
  from: string,
  to: string,
): ApiProblem {
  const allowed = [...(transitions[from] ?? [])];
  const next =
    allowed.length === 0 ? `${from} is final` : `from ${from} it may move to ${allowed.join(', ')}`;
  return new ApiProblem('conflict', `Cannot move from ${from} to ${to}: ${next}.`, {
    code: 'invalid_transition',
    from,
    allowed,
  });
}

export function validationFailed(errors: FieldErrors, detail?: string): ApiProblem {
  const fields = Object.keys(errors);
  return new ApiProblem(
    'validation-failed',
    detail ??
      (fields.length === 1
        ? `${fields[0]}: ${errors[fields[0]][0]}`
        : `${fields.length} fields failed validation.`),
    { errors },
  );
}

export const fieldError = (field: string, message: string) =>
  validationFailed({ [field]: [message] });

/** 503: a dependency is down or did not answer in time; about one connect time-out to wait. */
export const serviceUnavailable = (retryAfterSeconds = 2) =>
  new ApiProblem(
    'service-unavailable',
    `The database is unavailable. Retry after ${retryAfterSeconds} s, with the same Idempotency-Key for a write.`,
    {},
    { 'Retry-After': String(retryAfterSeconds) },
  );
