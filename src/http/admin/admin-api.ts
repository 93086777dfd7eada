import { createHash, timingSafeEqual } from 'node:crypto';
import swagger from '@fastify/swagger';
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '../../config.ts';
import { notFound, unauthorized } from '../../lib/problems.ts';
import type { RateLimits } from '../../rate-limit/rate-limits.ts';
import type { Services } from '../../services/index.ts';
import { ipGuardHook } from '../pipeline/auth.ts';
import { RELEASE, refResolver } from '../public-api.ts';
import { addMediaExamples, instanceExamples } from '../reference/examples.ts';
import { stateMachinesMarkdown } from '../reference/state-machines.ts';
import { pruneUnusedSchemas } from '../schemas.ts';
import { adminBookingRoutes } from './bookings-routes.ts';
import { adminClientRoutes } from './clients-routes.ts';
import { adminLibraryRoutes } from './library-routes.ts';
import { adminPaymentRoutes } from './payments-routes.ts';
import { adminPortalRoutes } from './portal-routes.ts';
import { adminTenantRoutes } from './tenants-routes.ts';
import { adminTripRoutes } from './trips-routes.ts';
import { adminWebhookRoutes } from './webhooks-routes.ts';

const sha256 = (value: string) => createHash('sha256').update(value).digest();

/**
 * The operator console's surface (docs/api-behaviour.md, "Admin API"). With ADMIN_API_TOKEN
 * unset it does not exist: every /admin route answers 404, like an unknown route.
 */
export const adminApi: FastifyPluginAsync<{
  config: Config;
  services: Services;
  rateLimits: RateLimits;
  /** Receives the way to read the admin document, for its reference page (see app.ts). */
  shareDocument?: (document: () => object) => void;
}> = async (app, { config, services, rateLimits, shareDocument }) => {
  if (config.adminApiToken === null) {
    app.addHook('onRequest', async () => {
      throw notFound('The route');
    });
  } else {
    // Compared as digests: equal lengths whatever was sent, so the time taken tells nothing of
    // the secret's length or content.
    const secret = sha256(config.adminApiToken);
    // The per-IP guard of the public API counts here too, so guessing is as slow as there.
    app.addHook('onRequest', ipGuardHook(rateLimits));
    app.addHook('onRequest', async (request: FastifyRequest) => {
      const match = /^Bearer +(\S+)$/i.exec(request.headers.authorization ?? '');
      if (!match) throw unauthorized('The admin bearer token is missing.');
      if (!timingSafeEqual(sha256(match[1]), secret)) {
        throw unauthorized('The admin bearer token is wrong.');
      }
    });
  }

  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Tour-Operator Admin API',
        version: RELEASE,
        contact: { name: 'Operator documentation', url: `${config.publicBaseUrl}/admin/docs/` },
        license: {
          name: 'Apache-2.0',
          identifier: 'Apache-2.0',
        },
        description:
          'Operator console surface: tenants, members, tokens, catalogs and the state changes ' +
          'that the public API only reads. Not part of the versioned public contract.' +
          `\n\n${stateMachinesMarkdown({ operations: true })}`,
      },
      servers: [{ url: config.publicBaseUrl }],
      components: {
        securitySchemes: {
          adminBearer: { type: 'http', scheme: 'bearer', description: 'ADMIN_API_TOKEN.' },
        },
      },
      tags: [
        { name: 'Tenants', description: 'Tenants, their plans, members and notifications.' },
        { name: 'Tokens', description: 'API tokens of a tenant: minted and revoked here.' },
        { name: 'Libraries', description: 'Catalog items of a tenant.' },
        { name: 'Clients', description: 'Clients of a tenant and their archiving.' },
        { name: 'Trips', description: 'Publication and status of trips.' },
        { name: 'Webhooks', description: 'Re-enabling paused webhook subscriptions.' },
        { name: 'Bookings', description: 'Checkout: bookings and their transitions.' },
        { name: 'Payments', description: 'The payment processor: payments and their transitions.' },
      ],
      security: [{ adminBearer: [] }],
    },
    refResolver,
    transformObject: (documentObject) =>
      'openapiObject' in documentObject
        ? instanceExamples(addMediaExamples(pruneUnusedSchemas(documentObject.openapiObject)), {
            errorsBaseUrl: config.errorsBaseUrl,
          })
        : documentObject.swaggerObject,
  });
  for (const routes of [
    adminTenantRoutes,
    adminLibraryRoutes,
    adminClientRoutes,
    adminTripRoutes,
    adminWebhookRoutes,
    adminPortalRoutes,
    adminBookingRoutes,
    adminPaymentRoutes,
  ]) {
    await app.register(routes, { prefix: '/admin/v1', services });
  }

  shareDocument?.(() => app.swagger());
  let document: string | undefined;
  app.get(
    '/admin/v1/openapi.json',
    { schema: { hide: true } },
    async (_request, reply: FastifyReply) => {
      document ??= JSON.stringify(app.swagger());
      return reply.type('application/json').send(document);
    },
  );
};
