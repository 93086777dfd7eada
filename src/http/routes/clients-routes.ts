import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { Client } from '../../domain/resources.ts';
import { StringEnum } from '../../domain/schema-kit.ts';
import { callerOf } from '../pipeline/auth.ts';
import {
  CreateClientBody,
  DataOf,
  IdempotencyHeaders,
  IdParams,
  ok,
  PageOf,
  PageQuery,
  problems,
  Query,
} from '../schemas.ts';
import type { RouteOptions } from './options.ts';

const ListClientsQuery = Query({
  ...PageQuery,
  kind: Type.String({ description: 'individual or company; an unknown value is ignored.' }),
  archived: StringEnum(['true', 'false'], {
    description: 'true: only archived; false: only non-archived; omitted: both.',
  }),
});

export const clientRoutes: FastifyPluginAsyncTypebox<RouteOptions> = async (
  app,
  { services, writes },
) => {
  app.get(
    '/clients',
    {
      config: { scope: 'clients:read' },
      schema: {
        operationId: 'listClients',
        tags: ['Clients'],
        summary: 'List clients, by id ascending',
        description:
          'Keyset pagination like every list. Filter by `kind` (an unknown value is ignored) and `archived`. Scope `clients:read`.',
        querystring: ListClientsQuery,
        response: {
          200: ok(PageOf(Type.Ref(Client)), 'A page of clients.'),
          ...problems(401, 403, 422, 429),
        },
      },
    },
    async (request) => {
      const { limit, cursor, kind, archived } = request.query;
      return services.clients.list(callerOf(request).tenant.id, {
        limit,
        cursor,
        kind,
        archived: archived === undefined ? undefined : archived === 'true',
      });
    },
  );

  app.post(
    '/clients',
    {
      config: { scope: 'clients:write' },
      schema: {
        operationId: 'createClient',
        tags: ['Clients'],
        summary: 'Create a client',
        description: "Emits `client.created` to the tenant's active subscriptions.",
        headers: IdempotencyHeaders,
        body: CreateClientBody,
        response: {
          201: ok(DataOf(Type.Ref(Client)), 'The created client.'),
          ...problems(401, 403, 409, 422, 429),
        },
      },
    },
    async (request, reply) => {
      const tenantId = callerOf(request).tenant.id;
      return writes.run(request, reply, async () => ({
        status: 201,
        body: { data: await services.clients.create(tenantId, request.body) },
      }));
    },
  );

  app.get(
    '/clients/:id',
    {
      config: { scope: 'clients:read' },
      schema: {
        operationId: 'getClient',
        tags: ['Clients'],
        summary: 'Get a client',
        description: 'A client of the calling tenant. Scope `clients:read`.',
        params: IdParams,
        response: {
          200: ok(DataOf(Type.Ref(Client)), 'The client.'),
          ...problems(401, 403, 404, 429),
        },
      },
    },
    async (request) => ({
      data: await services.clients.get(callerOf(request).tenant.id, request.params.id),
    }),
  );
};
