import type { FastifyPluginAsync } from 'fastify';
import type { Config } from '../config.ts';
import { notFound, PROBLEM_TYPES, type ProblemSlug } from '../lib/problems.ts';

/** What each problem type means and what the integrator should do about it. */
const EXPLANATIONS: Record<ProblemSlug, string> = {
  unauthorized:
    'The bearer token is missing, malformed, unknown, revoked or expired (the detail says which), or its tenant is inactive. Send <code>Authorization: Bearer tk_live_…</code> with a valid token. Do not retry with the same token.',
  'scope-required':
    'The token is valid but lacks the scope this endpoint needs; <code>required_scope</code> names it. Mint a token with that scope.',
  'plan-required':
    "The tenant's plan has no API access. <code>required_plans</code> lists the plans that do; <code>current_plan</code> is the tenant's.",
  forbidden:
    'The request is understood but not allowed, usually because a per-plan quota is full; <code>code</code> says which (for example <code>trip_quota_exceeded</code>, <code>webhook_quota_exceeded</code>, <code>feature_off_for_tier</code>).',
  'not-found':
    'No such resource or route. Resources of another tenant are reported the same way, so ids cannot be probed.',
  'request-timeout':
    'The request line, headers or body did not arrive in time, so the connection was closed. Send the request again.',
  'headers-too-large':
    'The request line and headers together exceed 16 KB (a very long URL or cookie, usually). The connection was closed. Shorten them; do not retry unchanged.',
  conflict:
    'The resource is in a state that does not allow this operation; <code>code</code> names the clash (for example <code>invalid_transition</code>, <code>in_flight</code>, <code>subscription_inactive</code>).',
  'idempotency-key-reuse':
    'This Idempotency-Key was already used with a different method, path or body. Use a new key for a new operation.',
  'idempotency-in-progress':
    'A request with this Idempotency-Key is still running. Retry with the same key shortly.',
  'validation-failed':
    'The request was rejected before anything changed: bad JSON, a Content-Type other than application/json, a body over 256 KB, an unknown member, or a field failing its rule. <code>errors</code> maps each field path (<code>title</code>, <code>tags.3</code>) to messages. Fix the request; do not retry it unchanged.',
  'rate-limited':
    'Too many requests for this token (60 per second, 600 per minute) or from this address (<code>X-RateLimit-Scope: ip</code>). Wait <code>Retry-After</code> seconds, then back off exponentially on repeated hits.',
  internal:
    'An unexpected fault on our side; nothing you sent caused it. Retry with exponential backoff and jitter (capped at 60 s), with the same Idempotency-Key for writes, and quote the <code>Service-Request-Id</code> if you contact support.',
  'service-unavailable':
    'The database behind the API is unreachable or did not answer in time. Retry after <code>Retry-After</code> seconds with exponential backoff and jitter, with the same Idempotency-Key for writes.',
  'booking-create-not-supported':
    'Bookings cannot yet be created through the API. The request was valid; send the traveller to <code>next.checkoutUrl</code> to complete payment on the storefront.',
};

const escapeHtml = (text: string) =>
  text.replace(
    /[&<>"]/g,
    (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c] ?? c,
  );

const page = (title: string, body: string) =>
  `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>${escapeHtml(title)}</title></head><body>${body}</body></html>\n`;

/**
 * `GET /`: where an integrator starts; `GET /errors`: every problem type; `GET /errors/<slug>`: the
 * human page behind each problem `type` URL. Plain HTML, nothing loaded from elsewhere.
 */
export const errorPages: FastifyPluginAsync<{ config: Config }> = async (app) => {
  app.get('/', { schema: { hide: true } }, async (_request, reply) =>
    reply
      .type('text/html; charset=utf-8')
      .send(
        page(
          'Tour-Operator API',
          '<h1>Tour-Operator API</h1><ul>' +
            '<li><a href="/docs/">API reference</a>: every operation, webhook event and example</li>' +
            '<li><a href="/v1/openapi.json">OpenAPI 3.1 document</a> (JSON)</li>' +
            '<li><a href="/v1/postman.json">Postman collection</a>: set its <code>bearerToken</code> variable</li>' +
            '<li><a href="/errors">Problem types</a>: what each error means and what to do</li>' +
            '<li><a href="/healthz">/healthz</a> and <a href="/readyz">/readyz</a></li>' +
            '</ul><p>Authenticate with <code>Authorization: Bearer tk_live_…</code> under <code>/api/v1</code>.</p>',
        ),
      ),
  );

  // Browsers ask for it on every page; an empty answer keeps their consoles free of 404s.
  app.get('/favicon.ico', { schema: { hide: true } }, async (_request, reply) =>
    reply.code(204).header('cache-control', 'public, max-age=86400').send(),
  );

  app.get('/errors', { schema: { hide: true } }, async (_request, reply) => {
    const items = (Object.keys(PROBLEM_TYPES) as ProblemSlug[])
      .map((slug) => {
        const { status, title } = PROBLEM_TYPES[slug];
        return `<li><a href="/errors/${slug}"><code>${slug}</code></a> (${status}): ${escapeHtml(title)}</li>`;
      })
      .join('');
    return reply
      .type('text/html; charset=utf-8')
      .send(page('Problem types', `<h1>Problem types</h1><ul>${items}</ul>`));
  });

  app.get<{ Params: { slug: string } }>(
    '/errors/:slug',
    { schema: { hide: true } },
    async (request, reply) => {
      const slug = request.params.slug as ProblemSlug;
      if (!Object.hasOwn(PROBLEM_TYPES, slug)) throw notFound('Problem type');
      const { status, title } = PROBLEM_TYPES[slug];
      return reply
        .type('text/html; charset=utf-8')
        .send(
          `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${title}</title></head>` +
            `<body><h1>${title}</h1><p>HTTP status ${status}. Problem type <code>${slug}</code>.</p>` +
            `<p>${EXPLANATIONS[slug]}</p></body></html>\n`,
        );
    },
  );
};
