import type { FastifyRequest } from 'fastify';
import { isTier, PLANS_WITH_API, TIERS } from '../domain/plans.ts';
import { ApiProblem, scopeRequired } from '../lib/problems.ts';
import type { AuthContext } from '../services/context.ts';
import type { TokensService } from '../services/tokens-service.ts';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Scope the route requires; absent means any valid token (GET /me). */
    scope?: string;
  }
  interface FastifyRequest {
    auth: AuthContext | null;
  }
}

/**
 * Runs at onRequest, before the body is read, so the documented order holds: 401, then 403
 * (plan, then scope), and only then 422 for the body.
 */
export function authenticateHook(tokens: TokensService) {
  return async (request: FastifyRequest): Promise<void> => {
    const auth = await tokens.authenticate(request.headers.authorization);
    const tier = auth.tenant.tier;
    if (!isTier(tier) || !TIERS[tier].api) {
      throw new ApiProblem('plan-required', `The ${tier} plan does not include API access.`, {
        required_plans: PLANS_WITH_API,
        current_plan: tier,
      });
    }
    const scope = request.routeOptions.config.scope;
    if (scope !== undefined && !auth.scopes.has(scope)) throw scopeRequired(scope);
    request.auth = auth;
  };
}

/** The caller of an authenticated route (set by the hook above). */
export function callerOf(request: FastifyRequest): AuthContext {
  if (!request.auth) throw new Error('route reached without authentication');
  return request.auth;
}
