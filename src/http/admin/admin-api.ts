import { timingSafeEqual } from 'node:crypto';
import swagger from '@fastify/swagger';
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '../../config.ts';
import { notFound, unauthorized } from '../../lib/problems.ts';
import type { Services } from '../../services/index.ts';
import { API_VERSION, refResolver } from '../public-api.ts';
import { adminRoutes } from './admin-routes.ts';

function sameSecret(given: string, expected: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

/**
 * The operator console's surface (contract section 2). With ADMIN_API_TOKEN unset it does not
 * exist: every /admin route answers 404, like an unknown route.
 */
export const adminApi: FastifyPluginAsync<{ config: Config; services: Services }> = async (
  app,
  { config, services },
) => {
  const secret = config.adminApiToken;
  app.addHook('onRequest', async (request: FastifyRequest) => {
    if (secret === null) throw notFound('The route');
    const match = /^Bearer +(\S+)$/i.exec(request.headers.authorization ?? '');
    if (!match) throw unauthorized('The admin bearer token is missing.');
    if (!sameSecret(match[1], secret)) throw unauthorized('The admin bearer token is wrong.');
  });

  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Tour-Operator Admin API',
        version: API_VERSION,
        description:
          'Operator console surface: tenants, members, tokens, catalogs and the state changes ' +
          'that the public API only reads. Not part of the versioned public contract.',
      },
      servers: [{ url: config.publicBaseUrl }],
      components: {
        securitySchemes: { adminBearer: { type: 'http', scheme: 'bearer' } },
      },
      security: [{ adminBearer: [] }],
    },
    refResolver,
  });
  await app.register(adminRoutes, { prefix: '/admin/v1', services });

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
