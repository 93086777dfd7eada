import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import { isTier, PLANS_WITH_API, TIERS } from '../../domain/plans.ts';
import { ApiProblem, rateLimited, scopeRequired } from '../../lib/problems.ts';
import type { RateLimits } from '../../rate-limit/rate-limits.ts';
import type { AuthContext } from '../../services/context.ts';
import type { TokensService } from '../../services/tokens-service.ts';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Scope the route requires; absent means any valid token (GET /me). */
    scope?: string;
  }
  interface FastifyRequest {
    auth: AuthContext | null;
    /**
     * The token's 403 (plan, then scope), found before the body is read and answered once it is
     * (see refuseHook), so that a keyed write can store it; it outranks the body's 422s.
     */
    refusal: ApiProblem | null;
  }
}

/**
 * The per-IP guard: counts every request before authentication, so bad-token floods stop here.
 * A callback hook, because the count is usually synchronous (see LeasedLimiter).
 */
export function ipGuardHook(limits: RateLimits) {
  const answer = (wait: number | null, done: HookHandlerDoneFunction) =>
    done(wait === null ? undefined : rateLimited(wait, 'ip'));
  return (request: FastifyRequest, _reply: FastifyReply, done: HookHandlerDoneFunction): void => {
    const wait = limits.checkIp(request.ip);
    if (wait instanceof Promise) wait.then((w) => answer(w, done), done);
    else answer(wait, done);
  };
}

/**
 * Runs at onRequest, before the body is read, so the documented order holds: 401, then the
 * token's rate limits (429; every later answer carries X-RateLimit-*), then 403 (plan, then
 * scope: kept in `refusal`, see refuseHook), and only then 422 for the body.
 */
export function authenticateHook(tokens: TokensService, limits: RateLimits) {
  return async (request: FastifyRequest, reply: FastifyReply): Promise<void> => {
    const auth = await tokens.authenticate(request.headers.authorization);
    const counted = limits.checkToken(auth.token.id);
    const verdict = counted instanceof Promise ? await counted : counted;
    reply.header('X-RateLimit-Limit', verdict.state.limit);
    reply.header('X-RateLimit-Remaining', verdict.state.remaining);
    reply.header('X-RateLimit-Reset', verdict.state.resetSeconds);
    if (!verdict.allowed) throw rateLimited(verdict.retryAfterSeconds, 'token');
    const tier = auth.tenant.tier;
    const scope = request.routeOptions.config.scope;
    if (!isTier(tier) || !TIERS[tier].api) {
      request.refusal = new ApiProblem(
        'plan-required',
        `The ${tier} plan does not include API access.`,
        { required_plans: PLANS_WITH_API, current_plan: tier },
      );
    } else if (scope !== undefined && !auth.scopes.has(scope)) {
      request.refusal = scopeRequired(scope);
    }
    request.auth = auth;
  };
}

/**
 * Answers the token's 403 once the body is read (preValidation). Registered after the
 * idempotency hook, which answers it itself for a keyed write, so that the 403 is stored. A
 * callback hook: it runs on every request, and needs no promise.
 */
export function refuseHook(
  request: FastifyRequest,
  _reply: FastifyReply,
  done: HookHandlerDoneFunction,
): void {
  done(request.refusal ?? undefined);
}

/** The caller of an authenticated route (set by the hook above). */
export function callerOf(request: FastifyRequest): AuthContext {
  if (!request.auth) throw new Error('route reached without authentication');
  return request.auth;
}
