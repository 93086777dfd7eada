import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { Client } from '../../domain/resources.ts';
import { CreateClientBody, DataOf, IdParams } from '../schemas.ts';
import { type AdminRouteOptions, adminProblems } from './shared.ts';

/** Clients: creation in a tenant, and archiving. */
export const adminClientRoutes: FastifyPluginAsyncTypebox<AdminRouteOptions> = async (
  app,
  { services },
) => {
  app.post(
    '/tenants/:id/clients',
    {
      schema: {
        operationId: 'adminCreateClient',
        tags: ['Clients'],
        summary: 'Create a client in a tenant',
        description: 'Emits `client.created`.',
        params: IdParams,
        body: CreateClientBody,
        response: { 201: DataOf(Type.Ref(Client)), ...adminProblems },
      },
    },
    async function createClient(request, reply) {
      const tenant = await services.tenants.get(request.params.id);
      return reply.code(201).send({ data: await services.clients.create(tenant.id, request.body) });
    },
  );

  for (const action of ['archive', 'unarchive'] as const) {
    app.post(
      `/clients/:id/${action}`,
      {
        schema: {
          operationId: `adminClient_${action}`,
          tags: ['Clients'],
          summary: `${action === 'archive' ? 'Archive' : 'Unarchive'} a client`,
          description: 'Archived clients stay readable; the `archived` filter selects them.',
          params: IdParams,
          response: { 200: DataOf(Type.Ref(Client)), ...adminProblems },
        },
      },
      async function setArchived(request) {
        const { id } = request.params;
        const tenantId = await services.clients.tenantOf(id);
        return { data: await services.clients.setArchived(tenantId, id, action === 'archive') };
      },
    );
  }
};
