import { randomUUID } from 'node:crypto';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Ajv from 'ajv';
import addFormats from 'ajv-formats';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, LogController } from 'fastify';
import type { Logger } from 'pino';
import type { Config } from '../config.ts';
import type { Database } from '../db/database.ts';
import { isDatabaseUnavailable } from '../db/unavailable.ts';
import { CODE_FORMATS } from '../domain/codes.ts';
import type { Clock } from '../lib/clock.ts';
import type { Metrics } from '../lib/metrics.ts';
import { ApiProblem, notFound, serviceUnavailable, validationFailed } from '../lib/problems.ts';
import type { RateLimits } from '../rate-limit/rate-limits.ts';
import type { AuthContext } from '../services/context.ts';
import type { Services } from '../services/index.ts';
import { adminApi } from './admin/admin-api.ts';
import { healthRoutes } from './health-routes.ts';
import { legacyRoutes } from './legacy-routes.ts';
import { registerMetricsRoute } from './metrics-route.ts';
import { ipGuardHook } from './pipeline/auth.ts';
import { GracefulClose } from './pipeline/graceful-close.ts';
import { decimalNumbersOnly, refuseNul } from './pipeline/input-guards.ts';
import {
  BODY_LIMIT_BYTES,
  exceedsDepth,
  prototypeMemberProblem,
  tooDeepProblem,
  unkeptValuesProblem,
} from './pipeline/json-body.ts';
import { lazySerializers, lazyValidator } from './pipeline/lazy-compile.ts';
import { loggedQuery } from './pipeline/log-fields.ts';
import { OutageLog } from './pipeline/outage-log.ts';
import { answerParserError } from './pipeline/parser-errors.ts';
import { internalProblem, sendProblem, toProblem } from './pipeline/problem-reply.ts';
import { RouteMethods } from './pipeline/route-methods.ts';
import { portal, sendPortalNotFound } from './portal/portal.ts';
import { publicApi } from './public-api.ts';
import { errorPages } from './reference/error-pages.ts';
import { registerReferencePage } from './reference/reference-page.ts';
import { OPTIONAL_BODY, problems, Query, SHARED_SCHEMAS } from './schemas.ts';

declare module 'fastify' {
  interface FastifyInstance {
    /** The stop `serve` runs on SIGTERM (see GracefulClose). */
    gracefulClose: GracefulClose;
  }
}

export interface AppDeps {
  config: Config;
  metrics: Metrics;
  database: Database;
  services: Services;
  rateLimits: RateLimits;
  clock: Clock;
  logger: Logger;
}

const REQUEST_ID_PATTERN = /^[\x21-\x7e]{1,200}$/;
/** The routes of the two OpenAPI documents (the public API's and the admin API's). */
const API_ROUTE = /^\/(api|admin)\/v1\//;
/** The query string of a route that takes no parameter: none may be given. */
const NO_QUERY = Query({});
/** The answer of such a route to a query parameter: 422. */
const QUERY_REFUSED = problems(422)[422];

/**
 * Bodies are validated without type coercion (a string "5" is not the integer 5); query strings
 * and paths are text, so there coercion is the point. Both report every error at once.
 */
function createValidators() {
  const shared = { allErrors: true, removeAdditional: false, strict: false } as const;
  const body = addFormats.default(
    new Ajv.default({ ...shared, coerceTypes: false, useDefaults: false }),
  );
  const query = addFormats.default(
    new Ajv.default({ ...shared, coerceTypes: 'array', useDefaults: true }),
  );
  for (const validator of [body, query]) {
    for (const schema of SHARED_SCHEMAS) validator.addSchema(schema);
    for (const [name, format] of Object.entries(CODE_FORMATS)) {
      validator.addFormat(name, { type: 'string', validate: format.validate });
    }
  }
  return { body, query };
}

export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const { config } = deps;
  const app = Fastify({
    loggerInstance: deps.logger as FastifyBaseLogger,
    bodyLimit: BODY_LIMIT_BYTES,
    // Behind a balancer the peer is the balancer: only a trusted one's X-Forwarded-For names the
    // client (the per-IP guard, the logs); proxy-addr walks the chain.
    trustProxy: config.trustedProxies.length > 0 ? config.trustedProxies : false,
    // One line per request, written by the onResponse hook below.
    logController: new LogController({
      disableRequestLogging: true,
      requestIdLogLabel: 'requestId',
    }),
    // Echo a sane caller-supplied id; otherwise mint one.
    genReqId: (req) => {
      const given = req.headers['service-request-id'];
      return typeof given === 'string' && REQUEST_ID_PATTERN.test(given) ? given : randomUUID();
    },
    routerOptions: { ignoreTrailingSlash: false, maxParamLength: 200 },
    // A graceful stop answers every request that reaches an open connection (see GracefulClose).
    return503OnClosing: false,
    forceCloseConnections: false,
    // A path that does not decode, or a segment longer than any id: no such resource (the
    // versioned API has no 400 or 414), as problem+json with the request id.
    frameworkErrors: (_error, request, reply) => {
      // The portal answers a person: its own not-found page.
      if (request.url.startsWith('/portal/')) return sendPortalNotFound(reply);
      reply.header('Service-Request-Id', request.id);
      return sendProblem(reply, notFound('The route'), config.errorsBaseUrl);
    },
    // Node answers an HTTP/1.1 request without Host with a bare 400 of its own; the hook below
    // answers it as the contract answers what the parser refuses.
    http: { requireHostHeader: false },
    // What the HTTP parser rejects before any route (unknown method, head over 16 KB, …).
    clientErrorHandler: (error, socket) =>
      answerParserError(error as NodeJS.ErrnoException, socket, config.errorsBaseUrl),
    schemaController: lazySerializers,
  }).withTypeProvider<TypeBoxTypeProvider>();

  const validators = createValidators();
  app.setValidatorCompiler(({ schema, httpPart }) =>
    lazyValidator(() =>
      httpPart === 'body'
        ? validators.body.compile(schema)
        : decimalNumbersOnly(schema, validators.query.compile(schema)),
    ),
  );
  for (const schema of SHARED_SCHEMAS) app.addSchema(schema);

  // JSON only: without this, text/plain bodies would be accepted as strings.
  app.removeContentTypeParser('text/plain');
  // An empty JSON body is no body where none is needed (rotate-key, redeliver, the optional
  // body of the test fire; many HTTP clients send the Content-Type regardless). A route that
  // needs a body still answers 422 "The request body is empty."
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    const schema = request.routeOptions.schema as Record<string, unknown> | undefined;
    if (body === '' && (schema?.body === undefined || schema[OPTIONAL_BODY] === true)) {
      done(null, undefined);
      return;
    }
    const text = body as string;
    if (exceedsDepth(text)) {
      done(tooDeepProblem(), undefined);
      return;
    }
    parseJson(request, text, (error, value) => {
      // Valid JSON refused only for a `__proto__` member is answered naming that member.
      if (error) done(prototypeMemberProblem(text) ?? error, undefined);
      else done(unkeptValuesProblem(text, value), value);
    });
  });

  // Callback-style hooks: they run on every request, and need no promise.
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('Service-Request-Id', request.id);
    if (request.headers.host !== undefined || request.raw.httpVersion !== '1.1') {
      done();
      return;
    }
    // Malformed like what the parser refuses, and answered the same way: 422, then closed.
    reply.header('Connection', 'close');
    done(
      validationFailed(
        { host: ['is required in an HTTP/1.1 request'] },
        'An HTTP/1.1 request must carry a Host header.',
      ),
    );
  });
  app.addHook('preValidation', refuseNul);
  // Every route of the API documents validates its query string: one that takes no parameter
  // refuses any (422), as a list route refuses an unknown one, rather than ignoring it.
  app.addHook('onRoute', (route) => {
    if (!API_ROUTE.test(route.url) || route.schema?.querystring !== undefined) return;
    const response = route.schema?.response as Record<string, unknown> | undefined;
    route.schema = {
      ...route.schema,
      querystring: NO_QUERY,
      // The 422 it can now answer, in the document too.
      ...(response === undefined || '422' in response
        ? {}
        : { response: { ...response, 422: QUERY_REFUSED } }),
    };
  });
  app.decorate('gracefulClose', new GracefulClose(app));
  const outage = new OutageLog(app.log);
  const logRequests = deps.logger.isLevelEnabled('info');
  const { metrics } = deps;
  app.addHook('onResponse', (request, reply, done) => {
    if (reply.statusCode < 300 && request.routeOptions.url !== '/healthz') outage.succeeded();
    const status = reply.statusCode;
    // Route templates only (unmatched paths are one label), so labels stay few.
    metrics.observeRequest(
      request.method,
      request.routeOptions.url ?? 'unmatched',
      status,
      reply.elapsedTime / 1000,
    );
    if (status === 429) {
      metrics.rateLimited
        .labels(reply.getHeader('x-ratelimit-scope') === 'ip' ? 'ip' : 'token')
        .inc();
    }
    if (reply.getHeader('idempotency-replayed') === 'true') metrics.idempotentReplays.inc();
    if (logRequests) {
      request.log.info(
        {
          method: request.method,
          url: request.routeOptions.url ?? request.url.split('?')[0],
          query: loggedQuery(request.url),
          // A portal page's tenant is its session's.
          tenantId:
            (request as { auth?: AuthContext | null }).auth?.tenant.id ??
            (request as { portal?: { tenantId: string } | null }).portal?.tenantId,
          tokenId: (request as { auth?: AuthContext | null }).auth?.token.id,
          statusCode: reply.statusCode,
          ms: Math.round(reply.elapsedTime * 10) / 10,
        },
        'request',
      );
    }
    done();
  });

  app.setErrorHandler((error, request, reply) => {
    let problem: ApiProblem | null = null;
    try {
      // The token's 403 outranks what went wrong with the body (see authenticateHook).
      problem = request.refusal ?? toProblem(error as Error);
    } catch (mappingError) {
      // Never Fastify's default body: a fault while mapping is a fault like any other.
      request.log.error({ err: mappingError }, 'mapping an error to a problem failed');
    }
    if (problem) return sendProblem(reply, problem, config.errorsBaseUrl);
    if (isDatabaseUnavailable(error)) {
      outage.failed(error);
      return sendProblem(reply, serviceUnavailable(), config.errorsBaseUrl);
    }
    request.log.error({ err: error }, 'unhandled error');
    return sendProblem(reply, internalProblem(request), config.errorsBaseUrl);
  });
  // Before any route is added: it learns them as they are.
  const routeMethods = new RouteMethods(app);
  app.setNotFoundHandler((request, reply) => {
    const allowed = routeMethods.allowed(request.url);
    const problem =
      allowed.length === 0
        ? notFound('The route')
        : new ApiProblem(
            'not-found',
            `${request.method} is not a method of this path; it answers ${allowed.join(', ')}.`,
          );
    return sendProblem(reply, problem, config.errorsBaseUrl);
  });

  const graceful = app.gracefulClose;
  await app.register(healthRoutes, {
    database: deps.database,
    config,
    outage,
    metrics,
    draining: () => graceful.draining,
  });
  registerMetricsRoute(app, config, metrics);
  await app.register(errorPages, { config });
  await app.register(legacyRoutes, { config, clock: deps.clock });
  await app.register(publicApi, {
    config,
    services: deps.services,
    rateLimits: deps.rateLimits,
  });
  await app.register(portal, {
    prefix: '/portal',
    services: deps.services,
    rateLimits: deps.rateLimits,
  });
  app.addHook('onClose', () => deps.rateLimits.close());
  let adminDocument: (() => object) | undefined;
  await app.register(adminApi, {
    config,
    services: deps.services,
    rateLimits: deps.rateLimits,
    shareDocument: (document) => {
      adminDocument = document;
    },
  });
  // The admin API's reference exists only with the admin API. It is a page for a browser, which
  // cannot send the admin token, so it and its copy of the document stand outside the token
  // guard (behind the per-IP guard): they describe the operations, never any data.
  if (config.adminApiToken !== null) {
    await app.register(async (docs) => {
      docs.addHook('onRequest', ipGuardHook(deps.rateLimits));
      await registerReferencePage(docs, {
        routePrefix: '/admin/docs',
        title: 'Tour-Operator Admin API reference',
        document: () => (adminDocument as () => object)(),
      });
    });
  }
  return app;
}
