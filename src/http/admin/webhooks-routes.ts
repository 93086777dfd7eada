import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { DataOf, IdParams } from '../schemas.ts';
import { WebhookSubscription } from '../webhook-schemas.ts';
import { type AdminRouteOptions, adminProblems } from './shared.ts';

/** Re-enabling a paused webhook subscription. */
export const adminWebhookRoutes: FastifyPluginAsyncTypebox<AdminRouteOptions> = async (
  app,
  { services },
) => {
  app.post(
    '/webhooks/:id/enable',
    {
      schema: {
        operationId: 'adminEnableWebhook',
        tags: ['Webhooks'],
        summary: 'Re-enable a paused webhook subscription',
        description: 'Active again with its counters cleared; its pending deliveries resume.',
        params: IdParams,
        response: { 200: DataOf(Type.Ref(WebhookSubscription)), ...adminProblems },
      },
    },
    async function enableWebhook(request) {
      return { data: await services.webhooks.enable(request.params.id) };
    },
  );
};
