import type { FastifyPluginAsync } from 'fastify';
import type { Config } from '../../config.ts';
import type { Services } from '../../services/index.ts';
import { authenticateHook } from '../auth.ts';
import { bookingRoutes } from './bookings-routes.ts';
import { clientRoutes } from './clients-routes.ts';
import { libraryRoutes } from './libraries-routes.ts';
import { meRoutes } from './me-routes.ts';
import { paymentRoutes } from './payments-routes.ts';
import { tripRoutes } from './trips-routes.ts';

export interface RouteOptions {
  config: Config;
  services: Services;
}

/** Everything under /api/v1: authenticated, tenant-scoped. */
export const apiV1: FastifyPluginAsync<RouteOptions> = async (app, options) => {
  app.decorateRequest('auth', null);
  app.addHook('onRequest', authenticateHook(options.services.tokens));
  for (const routes of [
    meRoutes,
    tripRoutes,
    bookingRoutes,
    clientRoutes,
    paymentRoutes,
    libraryRoutes,
  ]) {
    await app.register(routes, { config: options.config, services: options.services });
  }
};
