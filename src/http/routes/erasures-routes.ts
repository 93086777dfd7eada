import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { ERASED_CLIENT, ERASURE_STATUSES, ERASURE_STORES } from '../../domain/erasure.ts';
import { At, StringEnum } from '../../domain/schema-kit.ts';
import { callerOf } from '../pipeline/auth.ts';
import { DataOf, IdempotencyHeaders, IdParams, ok, problems } from '../schemas.ts';
import type { RouteOptions } from './options.ts';

const ClientIdMember = Type.String({ minLength: 1, description: 'A client of the tenant.' });
const BookingIdMember = Type.String({ minLength: 1, description: 'A booking of the tenant.' });
const EmailMember = Type.String({
  format: 'email',
  maxLength: 254,
  description: 'Every client and booking traveller with this address, case-insensitive.',
});

const CreateErasureBody = Type.Object(
  {
    clientId: Type.Optional(ClientIdMember),
    bookingId: Type.Optional(BookingIdMember),
    email: Type.Optional(EmailMember),
  },
  {
    additionalProperties: false,
    minProperties: 1,
    maxProperties: 1,
    description: 'Exactly one of `clientId`, `bookingId`, `email`.',
    examples: [{ clientId: 'cli_01JD3X7E9P2QK5VN4T8R6MZWYC' }],
  },
);

const Erasure = Type.Object(
  {
    id: Type.String({ description: 'The erasure (`era_…`).' }),
    status: StringEnum(ERASURE_STATUSES, {
      description:
        '`pending` until a worker takes it, `running` while its batches run, `done` once every store is redacted and `personal_data.erased` is sent.',
    }),
    subject: Type.Object(
      {
        clientId: Type.Optional(ClientIdMember),
        bookingId: Type.Optional(BookingIdMember),
        email: Type.Optional(
          Type.String({ description: 'The address named; `***` once the erasure is done.' }),
        ),
      },
      { additionalProperties: false, description: 'What was named.' },
    ),
    requestedAt: Type.String({ format: 'date-time', description: 'When it was asked for.' }),
    completedAt: At('When it was done.'),
    redacted: Type.Object(
      Object.fromEntries(
        ERASURE_STORES.map((store) => [store, Type.Integer({ minimum: 0 })]),
      ) as Record<(typeof ERASURE_STORES)[number], ReturnType<typeof Type.Integer>>,
      {
        additionalProperties: false,
        description:
          "Rows changed so far, by store: the live `clients` and `bookings`, stored `events` bodies, `webhookAttempts` (receivers' answers that echoed the data) and `idempotencyKeys` (saved answers). No copy of what was removed is kept.",
      },
    ),
  },
  {
    additionalProperties: false,
    examples: [
      {
        id: 'era_01JD3X7E9P2QK5VN4T8R6MZWYC',
        status: 'done',
        subject: { email: '***' },
        requestedAt: '2026-11-30T09:12:44.120Z',
        completedAt: '2026-11-30T09:12:46.480Z',
        redacted: { clients: 1, bookings: 2, events: 14, webhookAttempts: 9, idempotencyKeys: 1 },
      },
    ],
  },
);

/** A person's erasure (GDPR article 17): asked for, then followed. */
export const erasureRoutes: FastifyPluginAsyncTypebox<RouteOptions> = async (
  app,
  { services, writes },
) => {
  app.post(
    '/erasures',
    {
      config: { scope: 'clients:write' },
      schema: {
        operationId: 'createErasure',
        tags: ['Clients'],
        summary: "Erase a person's data",
        description: `Redacts one person's personal members wherever the service keeps them: the live client (\`email\`, \`phone\`, \`legalName\`, \`vatId\`, \`notes\` null, \`tags\` \`[]\`, \`displayName\` \`"${ERASED_CLIENT.displayName}"\`) or booking (\`travelerName\`, \`travelerEmail\` null), every stored event body about them (\`object\` and both sides of \`changes\`; deliveries still to be sent go out redacted, signed anew), attempt logs whose receiver echoed the data, and saved idempotent answers. Name exactly one of a client, a booking, or an e-mail address (every client and booking with it). Run by the worker in bounded batches; resumes after a restart; announced once by \`personal_data.erased\` (ids only). Copies receivers keep, and backups taken before, are outside its reach. 404 for an unknown client or booking. Scope \`clients:write\`.`,
        headers: IdempotencyHeaders,
        body: CreateErasureBody,
        response: {
          202: ok(DataOf(Erasure), 'The erasure, queued.'),
          ...problems(401, 403, 404, 409, 422, 429),
        },
      },
    },
    async (request, reply) => {
      const tenantId = callerOf(request).tenant.id;
      return writes.run(request, reply, async () => ({
        status: 202,
        body: { data: await services.erasures.create(tenantId, request.body) },
      }));
    },
  );

  app.get(
    '/erasures/:id',
    {
      config: { scope: 'clients:read' },
      schema: {
        operationId: 'getErasure',
        tags: ['Clients'],
        summary: 'Get an erasure',
        description:
          'Where the erasure stands and what it changed, by store. 404 across tenants. Scope `clients:read`.',
        params: IdParams,
        response: {
          200: ok(DataOf(Erasure), 'The erasure.'),
          ...problems(401, 403, 404, 429),
        },
      },
    },
    async (request) => ({
      data: await services.erasures.get(callerOf(request).tenant.id, request.params.id),
    }),
  );
};
