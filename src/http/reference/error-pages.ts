import type { FastifyPluginAsync } from 'fastify';
import type { Config } from '../../config.ts';
import { notFound, PROBLEM_TYPES, type ProblemSlug } from '../../lib/problems.ts';

/** What each problem type means and what the integrator should do about it. */
const EXPLANATIONS: Record<ProblemSlug, string> = {
  unauthorized:
    'The bearer token is missing, malformed, unknown, revoked or expired (the detail says which), or its tenant is inactive. Send <code>Authorization: Bearer tk_live_…</code> (or <code>tk_test_…</code>) with a valid token. Do not retry with the same token.',
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
    'The resource is in a state that does not allow this operation; <code>code</code> names the clash (for example <code>invalid_transition</code>, <code>in_flight</code>, <code>subscription_inactive</code>). A refused move of a trip, booking or payment (<code>invalid_transition</code>) also carries <code>from</code>, the state it is in, and <code>allowed</code>, the states it may move to; the <a href="/docs/#description/state-machines">state machines</a> list every move.',
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

/**
 * The look of the pages served beside the reference: the system font stack, the reference's
 * accent, light or dark as the reader's system is. A file of its own (no inline style), cached.
 */
const STYLESHEET = `
:root { color-scheme: light dark; --bg: #fff; --fg: #1b1b1f; --muted: #5d5d66; --line: #e3e3e8;
  --card: #f7f7f9; --accent: #2f6fdf; }
@media (prefers-color-scheme: dark) { :root { --bg: #0f0f12; --fg: #e8e8ec; --muted: #a0a0ab;
  --line: #2a2a31; --card: #17171c; --accent: #7aa5ff; } }
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--fg); line-height: 1.55;
  font: 16px/1.55 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
main { max-width: 56rem; margin: 0 auto; padding: 3rem 1.25rem 4rem; }
h1 { font-size: 2rem; margin: 0 0 .5rem; letter-spacing: -.01em; }
h2 { font-size: 1.15rem; margin: 2.25rem 0 .75rem; }
p.lead { color: var(--muted); font-size: 1.1rem; margin: 0 0 1.5rem; }
a { color: var(--accent); text-decoration: none; } a:hover { text-decoration: underline; }
code, pre { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: .9em; }
code { background: var(--card); border: 1px solid var(--line); border-radius: 4px; padding: .05em .3em; }
pre { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: .9rem 1rem;
  overflow-x: auto; }
pre code { background: none; border: 0; padding: 0; }
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(15rem, 1fr)); gap: .75rem;
  padding: 0; list-style: none; }
.cards a { display: block; height: 100%; padding: 1rem; border: 1px solid var(--line);
  border-radius: 10px; background: var(--card); color: var(--fg); }
.cards a:hover, .cards a:focus-visible { border-color: var(--accent); text-decoration: none; }
.cards strong { display: block; color: var(--accent); margin-bottom: .25rem; }
.cards span { color: var(--muted); font-size: .92rem; }
ul.plain { padding-left: 1.1rem; } ul.plain li { margin: .3rem 0; }
footer { margin-top: 3rem; color: var(--muted); font-size: .9rem; }
`;

const page = (title: string, body: string) =>
  '<!doctype html><html lang="en"><head><meta charset="utf-8">' +
  '<meta name="viewport" content="width=device-width, initial-scale=1">' +
  `<title>${escapeHtml(title)}</title><link rel="stylesheet" href="/assets/site.css"></head>` +
  `<body><main>${body}</main></body></html>\n`;

const card = (href: string, title: string, text: string) =>
  `<li><a href="${href}"><strong>${title}</strong><span>${text}</span></a></li>`;

/**
 * `GET /`: where an integrator starts; `GET /errors`: every problem type; `GET /errors/<slug>`: the
 * human page behind each problem `type` URL; `GET /checkout/<slug>`: where checkout happens. Plain HTML and one stylesheet, nothing loaded from
 * elsewhere.
 */
export const errorPages: FastifyPluginAsync<{ config: Config }> = async (app, { config }) => {
  const base = escapeHtml(config.publicBaseUrl);
  const prefix = `tk_${config.deploymentEnv}_`;
  const start = page(
    'Tour-Operator API',
    '<h1>Tour-Operator API</h1>' +
      '<p class="lead">Server-to-server API for tour operators: trips, bookings, clients, payments, ' +
      'catalogs, and webhook subscriptions with signed, retried deliveries.</p>' +
      '<h2>Start</h2>' +
      `<p>Every call under <code>${base}/api/v1</code> carries an API token: on this instance they ` +
      `start with <code>${prefix}</code> (the demo token <code>npm start</code> prints is one).</p>` +
      `<pre><code>curl -s -H "Authorization: Bearer ${prefix}…" ${base}/api/v1/me</code></pre>` +
      '<h2>Guides and references</h2><ul class="cards">' +
      card(
        '/docs/',
        'API reference',
        'Every operation, webhook event and example; try requests in the page.',
      ) +
      card(
        '/docs/#description/receiving-webhooks',
        'Receiving webhooks',
        'Verify signatures; receivers in Node and Python; <code>tourops listen</code> on a laptop.',
      ) +
      card(
        '/docs/#description/typescript-sdk',
        'TypeScript SDK',
        'Install it, iterate lists, retry writes safely, verify deliveries.',
      ) +
      card('/errors', 'Problem types', 'What each error means and what to do about it.') +
      card(
        '/v1/openapi.json',
        'OpenAPI 3.1 document',
        'The document that validates the traffic; JSON.',
      ) +
      card(
        '/v1/postman.json',
        'Postman collection',
        'Import it and set its <code>bearerToken</code> variable.',
      ) +
      '</ul>' +
      '<footer>Health: <a href="/healthz">/healthz</a> · <a href="/readyz">/readyz</a></footer>',
  );
  app.get('/', { schema: { hide: true } }, async (_request, reply) =>
    reply.type('text/html; charset=utf-8').send(start),
  );

  app.get('/assets/site.css', { schema: { hide: true } }, async (_request, reply) =>
    reply
      .type('text/css; charset=utf-8')
      .header('cache-control', 'public, max-age=3600')
      .send(STYLESHEET),
  );

  // Browsers ask for it on every page; an empty answer keeps their consoles free of 404s.
  app.get('/favicon.ico', { schema: { hide: true } }, async (_request, reply) =>
    reply.code(204).header('cache-control', 'public, max-age=86400').send(),
  );

  // `next.checkoutUrl` points here while STOREFRONT_BASE_URL is unset: a page that says where
  // checkout happens, rather than a 404 for the link the API itself handed out.
  const storefront = escapeHtml(config.storefrontBaseUrl);
  const unset = config.storefrontBaseUrl === config.publicBaseUrl;
  app.get<{ Params: { slug: string } }>(
    '/checkout/:slug',
    { schema: { hide: true } },
    async (request, reply) => {
      const slug = escapeHtml(request.params.slug);
      return reply
        .type('text/html; charset=utf-8')
        .send(
          page(
            'Checkout happens on the storefront',
            '<p><a href="/">Tour-Operator API</a></p><h1>Checkout happens on the storefront</h1>' +
              `<p class="lead">Travellers book and pay for <code>${slug}</code> on the ` +
              "operator's storefront; this server is the API and sells nothing.</p>" +
              '<p><code>next.checkoutUrl</code>, in the 501 answer of <code>POST /api/v1/bookings</code>, ' +
              'is <code>STOREFRONT_BASE_URL</code> + <code>/checkout/&lt;publicSlug&gt;</code>. ' +
              `<code>STOREFRONT_BASE_URL</code> is <code>${storefront}</code>` +
              (unset
                ? ' (unset: it defaults to <code>PUBLIC_BASE_URL</code>, this server). Set it to the storefront&#39;s address and the link leads there.'
                : '.') +
              '</p><p>To make a booking while developing, the admin API has ' +
              '<code>POST /admin/v1/bookings</code> (a published trip, a traveller name and email), then ' +
              '<code>POST /admin/v1/bookings/{id}/transition</code> to <code>deposit_paid</code> and ' +
              '<code>confirmed</code>, which sends <code>booking.confirmed</code> to your webhooks.</p>',
          ),
        );
    },
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
      .send(
        page(
          'Problem types',
          '<p><a href="/">Tour-Operator API</a></p><h1>Problem types</h1>' +
            '<p class="lead">Every error answer is <code>application/problem+json</code>; its ' +
            '<code>type</code> ends with one of these.</p>' +
            `<ul class="plain">${items}</ul>`,
        ),
      );
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
          page(
            title,
            '<p><a href="/errors">Problem types</a></p>' +
              `<h1>${escapeHtml(title)}</h1><p class="lead">HTTP status ${status}. Problem type ` +
              `<code>${slug}</code>.</p><p>${EXPLANATIONS[slug]}</p>`,
          ),
        );
    },
  );
};
