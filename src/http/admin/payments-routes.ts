import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { Payment } from '../../domain/resources.ts';
import { StringEnum } from '../../domain/schema-kit.ts';
import { PAYMENT_MODES, PAYMENT_STATUSES } from '../../domain/states.ts';
import { DataOf, IdParams } from '../schemas.ts';
import { type AdminRouteOptions, adminProblems, Currency, Money, Transition } from './shared.ts';

const CreatePaymentBody = Type.Object(
  {
    mode: StringEnum(PAYMENT_MODES),
    label: Type.String({ minLength: 1, maxLength: 200 }),
    amountCents: Money,
    currency: Currency,
    kind: Type.String({ minLength: 1, maxLength: 40 }),
    scheduledFor: Type.Optional(Type.String()),
    paymentRail: Type.Optional(Type.String({ maxLength: 40 })),
  },
  { additionalProperties: false },
);

/** A booking's payments and their transitions. */
export const adminPaymentRoutes: FastifyPluginAsyncTypebox<AdminRouteOptions> = async (
  app,
  { services },
) => {
  app.post(
    '/bookings/:id/payments',
    {
      schema: {
        operationId: 'adminCreatePayment',
        tags: ['Payments'],
        summary: 'Record a payment of a booking (payment processor)',
        description: 'The first payment of a booking is its deposit (`isDeposit`).',
        params: IdParams,
        body: CreatePaymentBody,
        response: { 201: DataOf(Type.Ref(Payment)), ...adminProblems },
      },
    },
    async function createPayment(request, reply) {
      const tenantId = await services.bookings.tenantOf(request.params.id);
      const payment = await services.payments.create(tenantId, request.params.id, request.body);
      return reply.code(201).send({ data: payment });
    },
  );

  app.post(
    '/payments/:id/transition',
    {
      schema: {
        operationId: 'adminPaymentTransition',
        tags: ['Payments'],
        summary: 'Move a payment to another status',
        description:
          'Only the moves of the payment state machine are allowed ([State machines](#description/state-machines)); any other is 409 `invalid_transition` with `from` and `allowed`. The events the table names are emitted.',
        params: IdParams,
        body: Transition(PAYMENT_STATUSES),
        response: { 200: DataOf(Type.Ref(Payment)), ...adminProblems },
      },
    },
    async function transitionPayment(request) {
      const tenantId = await services.payments.tenantOf(request.params.id);
      return {
        data: await services.payments.transition(tenantId, request.params.id, request.body.to),
      };
    },
  );
};
