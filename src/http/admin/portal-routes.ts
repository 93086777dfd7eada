import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { DataOf, IdParams, OPTIONAL_BODY, PortalSession, PortalSessionBody } from '../schemas.ts';
import { type AdminRouteOptions, adminProblems } from './shared.ts';

/** Portal links for the platform to embed the webhook portal in its own console. */
export const adminPortalRoutes: FastifyPluginAsyncTypebox<AdminRouteOptions> = async (
  app,
  { services },
) => {
  app.post(
    '/tenants/:id/portal-sessions',
    {
      // The body is optional: no body means a session that can change things.
      preValidation: async (request) => {
        request.body ??= {};
      },
      schema: {
        operationId: 'adminCreatePortalSession',
        tags: ['Tenants'],
        summary: "A one-time sign-in link to the tenant's webhook portal",
        description:
          'Valid 10 minutes, once; its session lasts 1 hour and ends when the tenant is deactivated. 409 `conflict` with `code` `tenant_inactive` for an inactive tenant.',
        params: IdParams,
        body: PortalSessionBody,
        [OPTIONAL_BODY]: true,
        response: { 201: DataOf(Type.Ref(PortalSession)), ...adminProblems },
      },
    },
    async function createPortalSession(request, reply) {
      const link = await services.portal.createLink(request.params.id, {
        readOnly: request.body.readOnly === true,
        tokenId: null,
      });
      return reply.code(201).send({ data: link });
    },
  );
};
