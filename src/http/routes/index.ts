import type { FastifyPluginAsync } from 'fastify';
import type { RateLimits } from '../../rate-limit/rate-limits.ts';
import { authenticateHook, ipGuardHook, refuseHook } from '../pipeline/auth.ts';
import { registerIdempotency, Writes } from '../pipeline/idempotency.ts';
import { bookingRoutes } from './bookings-routes.ts';
import { clientRoutes } from './clients-routes.ts';
import { erasureRoutes } from './erasures-routes.ts';
import { eventTypeRoutes } from './event-types-routes.ts';
import { eventRoutes } from './events-routes.ts';
import { libraryRoutes } from './libraries-routes.ts';
import { meRoutes } from './me-routes.ts';
import type { RouteOptions } from './options.ts';
import { paymentRoutes } from './payments-routes.ts';
import { portalRoutes } from './portal-routes.ts';
import { tripRoutes } from './trips-routes.ts';
import { webhookDeliveryRoutes } from './webhook-deliveries-routes.ts';
import { webhookRoutes } from './webhooks-routes.ts';

export interface ApiOptions extends Omit<RouteOptions, 'writes'> {
  rateLimits: RateLimits;
}

/** Everything under /api/v1: authenticated, tenant-scoped. */
export const apiV1: FastifyPluginAsync<ApiOptions> = async (app, options) => {
  app.decorateRequest('auth', null);
  app.decorateRequest('refusal', null);
  app.addHook('onRequest', ipGuardHook(options.rateLimits));
  app.addHook('onRequest', authenticateHook(options.services.tokens, options.rateLimits));
  registerIdempotency(app, options.services.idempotency, options.config.errorsBaseUrl);
  app.addHook('preValidation', refuseHook);
  const writes = new Writes(options.services.idempotency, options.config.errorsBaseUrl);
  for (const routes of [
    meRoutes,
    tripRoutes,
    bookingRoutes,
    clientRoutes,
    erasureRoutes,
    paymentRoutes,
    libraryRoutes,
    webhookRoutes,
    webhookDeliveryRoutes,
    eventTypeRoutes,
    eventRoutes,
    portalRoutes,
  ]) {
    await app.register(routes, { config: options.config, services: options.services, writes });
  }
};
