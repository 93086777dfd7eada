import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { callerOf } from '../pipeline/auth.ts';
import {
  DataOf,
  IdempotencyHeaders,
  OPTIONAL_BODY,
  ok,
  PortalSession,
  PortalSessionBody,
  problems,
} from '../schemas.ts';
import type { RouteOptions } from './options.ts';

/** Links into the webhook portal (pages under /portal/) for the calling token's tenant. */
export const portalRoutes: FastifyPluginAsyncTypebox<RouteOptions> = async (
  app,
  { services, writes },
) => {
  app.post(
    '/portal/sessions',
    {
      config: { scope: 'webhooks:write' },
      // The body is optional: no body means a session that can change things.
      preValidation: async (request) => {
        request.body ??= {};
      },
      schema: {
        operationId: 'createPortalSession',
        tags: ['Webhook endpoints'],
        summary: 'Open the webhook portal: a one-time sign-in link for a browser',
        description:
          "The portal shows the tenant's endpoints, deliveries, attempts and event catalog in a browser, and lets its engineers create, edit, pause, test, redeliver and recover (unless `readOnly`). Hand the `url` to the person who will open it; a used or expired link answers a page saying so. Revoking this token, or deactivating the tenant, ends the sessions it opened. Scope `webhooks:write`.",
        headers: IdempotencyHeaders,
        body: PortalSessionBody,
        [OPTIONAL_BODY]: true,
        response: {
          201: ok(DataOf(Type.Ref(PortalSession)), 'The link (shown only here).'),
          ...problems(401, 403, 409, 422, 429),
        },
      },
    },
    async (request, reply) => {
      const { tenant, token } = callerOf(request);
      return writes.run(request, reply, async () => ({
        status: 201,
        body: {
          data: await services.portal.createLink(tenant.id, {
            readOnly: request.body.readOnly === true,
            tokenId: token.id,
          }),
        },
      }));
    },
  );
};
