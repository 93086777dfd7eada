import { readFileSync } from 'node:fs';
import swagger from '@fastify/swagger';
import type { FastifyPluginAsync } from 'fastify';
import packageJson from '../../package.json' with { type: 'json' };
import type { Config } from '../config.ts';
import type { RateLimits } from '../rate-limit/rate-limits.ts';
import type { Services } from '../services/index.ts';
import { withGeneratedSections } from './reference/doc-sections.ts';
import { addMediaExamples, instanceExamples } from './reference/examples.ts';
import { registerPostmanCollection } from './reference/postman.ts';
import { registerReferencePage } from './reference/reference-page.ts';
import { stateMachinesMarkdown } from './reference/state-machines.ts';
import { webhookDocs } from './reference/webhook-docs.ts';
import { apiV1 } from './routes/index.ts';
import { markOptionalBodies } from './schemas.ts';

/**
 * The API description's version (api-spec "Versioning"): additive changes ship without a bump, so
 * it moves only with the contract, never with a release.
 */
const API_DESCRIPTION_VERSION = '1.1.0';

/** The software's release (package.json): shown as `x-release`, and by `tourops --version`. */
export const RELEASE: string = packageJson.version;
/** An OpenAPI extension member (the typings know only the standard ones). */
const RELEASE_EXTENSION: Record<string, string> = { 'x-release': RELEASE };

/**
 * `$ref`s to shared schemas (`Trip`, `Problem`…) become `#/components/schemas/<$id>`, so the
 * document names the same schemas that validate and serialize the traffic.
 */
export const refResolver = {
  buildLocalReference(json: { $id?: unknown }, _base: unknown, _fragment: unknown, i: number) {
    return typeof json.$id === 'string' ? json.$id : `def-${i}`;
  },
};

/** A file of the repository, as text (the docs below are the very files beside the code). */
const repositoryText = (path: string) =>
  readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8');

const snippet = (name: string) => repositoryText(`docs/snippets/${name}`).trim();

/**
 * How to verify a delivery, in the reference's introduction: the very snippets the tests run
 * against a real signed delivery (docs/snippets), so the page cannot show code that does not work.
 */
const RECEIVING_WEBHOOKS = [
  '',
  '## Receiving webhooks',
  'Verify every delivery against its raw body before acting on it; answer 2xx quickly and ' +
    "deduplicate on the event `id`. The scheme is the same as Stripe's (a 300 s tolerance on `t`), " +
    'so its libraries (`stripe.webhooks.constructEvent`) verify deliveries too. Test events ' +
    '(`POST /api/v1/webhooks/test`, optionally with an `eventType`) carry `"test": true`.',
  '### On your laptop',
  "Deliveries go to public `https` URLs only. To receive a tenant's events on your own machine, " +
    'run one of the receivers below (`PORT`, default 4242) and, where the server runs, ' +
    '`npx tourops listen --tenant <id|slug> --forward-to http://localhost:4242/webhooks`: it forwards ' +
    'every event committed while it runs, signed like a delivery with the key it prints ' +
    '(give it to the receiver as `TOUROPS_SIGNING_KEYS`). An operator can instead allow private ' +
    'targets with `WEBHOOK_ALLOW_PRIVATE_TARGETS=true` (and `WEBHOOK_CA_FILE`, a PEM file of the ' +
    "CA that signed the receiver's certificate), read at start-up.",
  '### Asymmetric signatures (Ed25519)',
  'With `standardWebhooks` and `asymmetricSignatures` on, `webhook-signature` also carries ' +
    '`v1a,<base64>`: the Ed25519 signature of `<webhook-id>.<webhook-timestamp>.<body>`, which ' +
    "the subscription's `publicKey` (`whpk_` + base64 of the raw 32-byte key) verifies: a " +
    'receiver that holds only the public key holds nothing that can sign a delivery. After a ' +
    "rotation both pairs sign during the overlap. The SDK's `verifyWebhook` takes `whpk_` keys; " +
    'the receivers below read them from `TOUROPS_PUBLIC_KEYS`.',
  '### In a browser: the webhook portal',
  "To let a tenant's engineers see their endpoints, deliveries and attempts, send test events, " +
    'redeliver and recover without reading JSON, create a link with `POST /api/v1/portal/sessions` ' +
    '(`{"readOnly": true}` to look only) and hand them its `url`: it works once, within 10 ' +
    'minutes, and signs that browser in for 1 hour. Revoking the token ends the sessions it opened.',
  '### Node: the standard library only',
  `\`\`\`js\n${snippet('receiver.mjs')}\n\`\`\``,
  '### Node: with the SDK',
  `\`\`\`ts\n${snippet('receiver-sdk.ts')}\n\`\`\``,
].join('\n\n');

/** The fence language of a snippet, by its file's extension. */
const FENCES: Record<string, string> = {
  mjs: 'js',
  ts: 'ts',
  py: 'python',
  go: 'go',
  mod: 'text',
  php: 'php',
};

/** Markdown from docs/, each line that only links a snippet replaced by the snippet's code. */
const withSnippets = (markdown: string) =>
  markdown.replace(
    /^\[snippets\/([\w./-]+)\]\(snippets\/[\w./-]+\)$/gm,
    (_line, name: string) =>
      `\`\`\`${FENCES[name.slice(name.lastIndexOf('.') + 1)]}\n${snippet(name)}\n\`\`\``,
  );

/** docs/verifiers.md, one heading level down, with its example receivers' code. */
const VERIFIER_PACKAGES = [
  '',
  '## Verifier packages: Python, Go and PHP',
  withSnippets(demoteHeadings(repositoryText('docs/verifiers.md'))),
].join('\n\n');

/**
 * docs/brokers.md, one heading level down, each line that links a snippet replaced by the
 * snippet's code: the consumers the tests run against the machine's brokers.
 */
const BROKER_DESTINATIONS = [
  '',
  '## Broker destinations',
  withSnippets(demoteHeadings(repositoryText('docs/brokers.md'))),
].join('\n\n');

/** docs/payload-filters.md, one heading level down: the filter language, as the file beside the code. */
const PAYLOAD_FILTERS = [
  '',
  '## Payload filters',
  demoteHeadings(repositoryText('docs/payload-filters.md')),
].join('\n\n');

/**
 * docs/transformations.md, one heading level down, its generated sections (the limits) rendered
 * from the code: transformations, their sandbox and dry run, retry schedules.
 */
const TRANSFORMATIONS = [
  '',
  '## Transformations',
  demoteHeadings(withGeneratedSections(repositoryText('docs/transformations.md'))),
].join('\n\n');

/** docs/personal-data.md, one heading level down: thin payloads, one event's body, erasure. */
const PERSONAL_DATA = [
  '',
  '## Personal data',
  demoteHeadings(repositoryText('docs/personal-data.md')),
].join('\n\n');

/**
 * The SDK's own README (sdk/README.md), one heading level down, so the reference shows how to
 * install and use it and cannot drift from the file beside the code.
 */
const TYPESCRIPT_SDK = [
  '',
  '## TypeScript SDK',
  demoteHeadings(repositoryText('sdk/README.md')),
].join('\n\n');

/** Markdown without its title, every other heading one level down; code blocks untouched. */
function demoteHeadings(markdown: string): string {
  let inCode = false;
  return markdown
    .replace(/^# .*\n/, '')
    .split('\n')
    .map((line) => {
      if (line.startsWith('```')) inCode = !inCode;
      return !inCode && /^#+ /.test(line) ? `#${line}` : line;
    })
    .join('\n')
    .trim();
}

/** Every tag the public operations use, in the order readers meet them. */
const PUBLIC_TAGS = [
  {
    name: 'Token',
    description: 'Who the calling token is: its tenant, plan, scopes and environment.',
  },
  {
    name: 'Trips',
    description:
      'Trips of the tenant: created and edited here, published on the storefront through the operator console. Each change bumps `version`. Their `status` moves as [State machines](#description/state-machines) lists.',
  },
  {
    name: 'Bookings',
    description:
      'Bookings made through the storefront checkout, each pinned to the trip version it was made on. Read-only here; creating one answers 501 with the checkout URL. Their `status` moves as [State machines](#description/state-machines) lists.',
  },
  {
    name: 'Clients',
    description: 'Individuals and companies the tenant sells to; `client.created` is emitted.',
  },
  {
    name: 'Payments',
    description:
      'The read-only ledger of payments of bookings, written by the payment processor. Their `status` moves as [State machines](#description/state-machines) lists.',
  },
  {
    name: 'Libraries',
    description:
      'The reusable catalogs trips are built from: cities, hotels, activities, vehicles and guides.',
  },
  {
    name: 'Webhook endpoints',
    description:
      'Subscriptions of HTTPS endpoints (or of brokers: [Broker destinations](#description/broker-destinations)) to events, their signing keys and their deliveries. The events themselves, and what each delivery carries, are listed under Webhooks.',
  },
];

/** The versioned public API and the OpenAPI document generated from its route schemas. */
export const publicApi: FastifyPluginAsync<{
  config: Config;
  services: Services;
  rateLimits: RateLimits;
}> = async (app, { config, services, rateLimits }) => {
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Tour-Operator Public API',
        version: API_DESCRIPTION_VERSION,
        ...RELEASE_EXTENSION,
        contact: { name: 'API reference', url: `${config.publicBaseUrl}/docs/` },
        license: {
          name: 'Apache-2.0',
          identifier: 'Apache-2.0',
        },
        description:
          'Server-to-server API for tour operators: trips, bookings, clients, payments, library ' +
          'catalogs and webhooks. Every error is application/problem+json with a stable `type` ' +
          `under ${config.errorsBaseUrl}. Lists use cursor pagination (\`meta.cursor\`, ` +
          '`meta.hasMore`); trips, bookings, clients, payments and library items are ordered by id ' +
          'ascending (creation order). Every response carries `Service-Request-Id`. The events ' +
          'posted to webhook subscriptions are described under Webhooks.' +
          RECEIVING_WEBHOOKS +
          VERIFIER_PACKAGES +
          BROKER_DESTINATIONS +
          PAYLOAD_FILTERS +
          TRANSFORMATIONS +
          PERSONAL_DATA +
          `\n\n${stateMachinesMarkdown({ operations: false })}` +
          TYPESCRIPT_SDK,
      },
      servers: [{ url: config.publicBaseUrl }],
      components: {
        securitySchemes: {
          bearerAuth: {
            type: 'http',
            scheme: 'bearer',
            description: 'API token `tk_live_…` or `tk_test_…`.',
          },
        },
      },
      security: [{ bearerAuth: [] }],
      // Copied into the document as is (no $ref rewriting), so webhookDocs inlines its schemas.
      webhooks: webhookDocs({
        publicBaseUrl: config.publicBaseUrl,
        retryScheduleMs: config.webhook.retryScheduleMs,
        timeoutMs: config.webhook.timeoutMs,
      }),
      tags: PUBLIC_TAGS,
    },
    refResolver,
    transformObject: (documentObject) =>
      'openapiObject' in documentObject
        ? instanceExamples(addMediaExamples(markOptionalBodies(documentObject.openapiObject)), {
            errorsBaseUrl: config.errorsBaseUrl,
            scopes,
          })
        : documentObject.swaggerObject,
  });
  // The scope each operation requires (its route's `config.scope`), for the document.
  const scopes = new Map<string, string>();
  app.addHook('onRoute', (route) => {
    const scope = (route.config as { scope?: unknown } | undefined)?.scope;
    const operationId = (route.schema as { operationId?: unknown } | undefined)?.operationId;
    if (typeof scope === 'string' && typeof operationId === 'string') {
      scopes.set(operationId, scope);
    }
  });

  await app.register(apiV1, { prefix: '/api/v1', config, services, rateLimits });

  let document: string | undefined;
  const serveDocument = async (_request: unknown, reply: import('fastify').FastifyReply) => {
    // Routes are fixed once the app is ready, so the document is built once.
    document ??= JSON.stringify(app.swagger());
    return reply.type('application/json').send(document);
  };
  app.get('/v1/openapi.json', { schema: { hide: true } }, serveDocument);
  app.get('/openapi.json', { schema: { hide: true } }, serveDocument);
  registerPostmanCollection(app);
  await registerReferencePage(app, {
    routePrefix: '/docs',
    title: 'Tour-Operator API reference',
    document: () => app.swagger(),
  });
};
