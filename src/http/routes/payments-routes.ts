import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { Payment } from '../../domain/resources.ts';
import { callerOf } from '../pipeline/auth.ts';
import { ok, PageOf, PageQuery, problems, Query } from '../schemas.ts';
import type { RouteOptions } from './options.ts';

const ListPaymentsQuery = Query({
  ...PageQuery,
  status: Type.String({ description: 'One payment status; an unknown value is ignored.' }),
  bookingId: Type.String(),
});

export const paymentRoutes: FastifyPluginAsyncTypebox<RouteOptions> = async (app, { services }) => {
  app.get(
    '/payments',
    {
      config: { scope: 'payments:read' },
      schema: {
        operationId: 'listPayments',
        tags: ['Payments'],
        summary: 'List payments, by id ascending (read-only ledger)',
        description:
          'Payments are created and moved by the payment processor, never through this API. Filter by `status` and `bookingId`. Scope `payments:read`.',
        querystring: ListPaymentsQuery,
        response: {
          200: ok(PageOf(Type.Ref(Payment)), 'A page of payments.'),
          ...problems(401, 403, 422, 429),
        },
      },
    },
    async (request) => {
      const { limit, cursor, status, bookingId } = request.query;
      return services.payments.list(callerOf(request).tenant.id, {
        limit,
        cursor,
        status,
        bookingId,
      });
    },
  );
};
