import { createHash, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import cookie from '@fastify/cookie';
import csrf from '@fastify/csrf-protection';
import formbody from '@fastify/formbody';
import helmet from '@fastify/helmet';
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { isDatabaseUnavailable } from '../../db/unavailable.ts';
import { ApiProblem, rateLimited, validationFailed } from '../../lib/problems.ts';
import type { RateLimits } from '../../rate-limit/rate-limits.ts';
import { IdempotencyService } from '../../services/idempotency-service.ts';
import type { Services } from '../../services/index.ts';
import { PORTAL_SESSION_TTL_MS, type PortalSession } from '../../services/portal-service.ts';
import { ipGuardHook } from '../pipeline/auth.ts';
import { unkeptValues } from '../pipeline/json-body.ts';
import { type Frame, sendPage } from './layout.ts';
import { messagePage, signInPage, type View } from './pages.ts';
import { portalPages } from './routes.ts';

declare module 'fastify' {
  interface FastifyRequest {
    /** The portal session of the request (set by the session hook of the signed-in pages). */
    portal: PortalSession | null;
  }
}

const SESSION_COOKIE = 'tourops_portal';
const CSRF_COOKIE = 'tourops_portal_csrf';
/** POSTs that change nothing (a transformation's dry run): read-only sessions may send them. */
const DRY_RUNS = /^\/portal\/endpoints\/[^/?]+\/transformation-test(\?|$)/;
const FORM_BODY_LIMIT = 64 * 1024;

/** The portal's own files, read once: no CDN, no third-party request. */
const asset = (name: string) => readFileSync(new URL(`./assets/${name}`, import.meta.url), 'utf8');

/**
 * A page's CSP: everything from this origin, nothing inline (no `unsafe-inline` for scripts or
 * styles), forms post only here.
 */
const CSP = {
  useDefaults: false,
  directives: {
    defaultSrc: ["'none'"],
    scriptSrc: ["'self'"],
    styleSrc: ["'self'"],
    imgSrc: ["'self'"],
    connectSrc: ["'self'"],
    formAction: ["'self'"],
    frameAncestors: ["'self'"],
    baseUri: ["'none'"],
  },
};

export interface PortalOptions {
  services: Services;
  rateLimits: RateLimits;
}

/**
 * The webhook portal (pages under /portal/): a tenant's endpoints, deliveries, attempts and
 * event catalog in a browser, signed in by a one-time link (PortalService). Every change goes
 * through the services the API uses, with the token's rate limit and Idempotency-Key semantics
 * (each rendered form carries its own key, so a double submit acts once), behind a CSRF token;
 * a read-only session is refused by the server.
 */
export const portal: FastifyPluginAsync<PortalOptions> = async (app, { services, rateLimits }) => {
  await app.register(cookie);
  await app.register(formbody, { bodyLimit: FORM_BODY_LIMIT });
  await app.register(helmet, {
    contentSecurityPolicy: CSP,
    // TLS is the terminating proxy's to announce.
    strictTransportSecurity: false,
    frameguard: { action: 'sameorigin' },
    referrerPolicy: { policy: 'no-referrer' },
  });
  await app.register(csrf, {
    sessionPlugin: '@fastify/cookie',
    cookieKey: CSRF_COOKIE,
    cookieOpts: { path: '/portal', sameSite: 'strict', httpOnly: true, secure: 'auto' },
  });
  app.decorateRequest('portal', null);
  app.addHook('onRequest', ipGuardHook(rateLimits));
  app.addHook('onSend', async (_request, reply) => {
    reply.header('Cache-Control', 'no-store');
  });

  app.setErrorHandler((error, request, reply) => errorPage(error as Error, request, reply));
  app.setNotFoundHandler((_request, reply) => sendPortalNotFound(reply));

  const css = asset('portal.css');
  const js = asset('portal.js');
  app.get('/assets/portal.css', (_request, reply) =>
    reply.type('text/css; charset=utf-8').send(css),
  );
  app.get('/assets/portal.js', (_request, reply) =>
    reply.type('text/javascript; charset=utf-8').send(js),
  );

  // The link: a visit only shows a button (mail scanners and link previews send GET and HEAD);
  // the button's POST uses it once for a session cookie, and the secret leaves the address bar.
  const linkGone = (reply: FastifyReply) =>
    sendPage(
      reply,
      messagePage(
        'This link no longer works',
        'A portal link works once, within 10 minutes of being made. It was used already or has expired: ask for a new one (POST /api/v1/portal/sessions).',
        null,
        null,
      ),
      410,
    );
  app.get<{ Params: { secret: string } }>('/session/:secret', async (request, reply) => {
    if (!(await services.portal.linkUsable(request.params.secret))) return linkGone(reply);
    return sendPage(reply, signInPage(request.params.secret, reply.generateCsrf()));
  });
  app.post<{ Params: { secret: string } }>(
    '/session/:secret',
    // The CSRF token of the page above: another site cannot sign a browser into its own tenant.
    { preHandler: app.csrfProtection },
    async (request, reply) => {
      const session = await services.portal.exchange(request.params.secret);
      if (session === null) return linkGone(reply);
      reply.setCookie(SESSION_COOKIE, session.cookie, {
        path: '/portal',
        httpOnly: true,
        sameSite: 'strict',
        secure: 'auto',
        maxAge: PORTAL_SESSION_TTL_MS / 1000,
      });
      return reply.redirect('/portal/', 303);
    },
  );

  await app.register(async (signedIn) => {
    signedIn.addHook('onRequest', async (request) => {
      const session = await services.portal.authenticate(request.cookies[SESSION_COOKIE]);
      if (session === null) throw new SignedOut();
      request.portal = session;
      const counted = rateLimits.checkToken(session.tokenId ?? session.id);
      const verdict = counted instanceof Promise ? await counted : counted;
      if (!verdict.allowed) throw rateLimited(verdict.retryAfterSeconds, 'token');
    });
    // Every change: a CSRF token first, then the session must be allowed to change things.
    signedIn.addHook('preHandler', (request, reply, done) => {
      if (request.method !== 'POST') {
        done();
        return;
      }
      // A form field is held to what an API body is (no NUL, which PostgreSQL cannot store).
      const unkept = unkeptValues(request.body ?? {});
      if (Object.keys(unkept).length > 0) {
        done(validationFailed(unkept));
        return;
      }
      signedIn.csrfProtection(request, reply, (error?: Error) => {
        if (error) done(error);
        else if (
          request.portal?.readOnly &&
          request.url !== '/portal/sign-out' &&
          !DRY_RUNS.test(request.url)
        ) {
          done(new ReadOnly());
        } else done();
      });
    });
    signedIn.post('/sign-out', async (request, reply) => {
      await services.portal.end(sessionOf(request));
      reply.clearCookie(SESSION_COOKIE, { path: '/portal' });
      return sendPage(
        reply,
        messagePage('Signed out', 'Your portal session has ended.', null, null),
      );
    });
    await signedIn.register(portalPages, {
      services,
      view: (request, reply) => viewOf(request, reply),
      once: (request, work) => once(services, request, work),
    });
  });
};

/** The portal's page for a path it has not (also for a path the router cannot read). */
export function sendPortalNotFound(reply: FastifyReply) {
  return sendPage(
    reply,
    messagePage(
      'Not found',
      'There is no such page in the portal.',
      { href: '/portal/', label: 'Back to your endpoints' },
      null,
    ),
    404,
  );
}

/** The session of a signed-in page (set by its onRequest hook). */
function sessionOf(request: FastifyRequest): PortalSession {
  if (request.portal === null) throw new SignedOut();
  return request.portal;
}

function viewOf(request: FastifyRequest, reply: FastifyReply): View {
  return {
    csrf: reply.generateCsrf(),
    readOnly: sessionOf(request).readOnly,
    key: () => randomUUID(),
  };
}

/**
 * Runs a change once per rendered form: the form's `idempotencyKey` goes through the same
 * IdempotencyService as the API's Idempotency-Key (claimed in the change's transaction, its
 * result stored sealed), so a double submit or a reload of the POST replays the first result.
 * `work` must do no I/O but the database's.
 */
async function once<T>(
  services: Services,
  request: FastifyRequest,
  work: () => Promise<T>,
): Promise<T> {
  const body = (request.body ?? {}) as Record<string, unknown>;
  const key = body.idempotencyKey;
  if (key === undefined || key === '') return work();
  // The API's rule for its Idempotency-Key header, named by the form's field.
  services.idempotency.assertValidKey(key, 'idempotencyKey');
  const { _csrf: _token, ...fields } = body;
  const { answer } = await services.idempotency.run(
    {
      tenantId: sessionOf(request).tenantId,
      // Apart from the API's keys, and of a length any valid key fits in.
      key: `portal:${createHash('sha256').update(String(key)).digest('hex')}`,
      fingerprint: IdempotencyService.fingerprint('POST', request.url, JSON.stringify(fields)),
    },
    async () => ({
      status: 200,
      type: 'application/json',
      body: JSON.stringify((await work()) ?? null),
    }),
  );
  return JSON.parse(answer.body) as T;
}

class SignedOut extends Error {}
class ReadOnly extends Error {}

const FORM_EXPIRED = new Set(['FST_CSRF_INVALID_TOKEN', 'FST_CSRF_MISSING_SECRET']);

/** Every failure as a page: what happened and what to do, never a stack trace. */
function errorPage(error: Error, request: FastifyRequest, reply: FastifyReply) {
  const frame: Frame | null =
    request.portal === null
      ? null
      : { csrf: reply.generateCsrf(), readOnly: request.portal.readOnly };
  const send = (
    status: number,
    title: string,
    message: string,
    details?: Record<string, string[]>,
  ) =>
    sendPage(
      reply,
      messagePage(
        title,
        message,
        frame === null ? null : { href: '/portal/', label: 'Back to your endpoints' },
        frame,
        details,
      ),
      status,
    );
  if (error instanceof SignedOut) {
    return send(
      401,
      'Not signed in',
      'Your portal session has ended or was never opened here (sessions last 1 hour, and end when the token that opened them is revoked). Ask for a new link.',
    );
  }
  if (error instanceof ReadOnly) {
    return send(403, 'Read-only session', 'This session can look but not change anything.');
  }
  const code = (error as { code?: string }).code;
  if (code !== undefined && FORM_EXPIRED.has(code)) {
    return send(403, 'The form has expired', 'Reload the page and try again.');
  }
  if (error instanceof ApiProblem) {
    for (const [name, value] of Object.entries(error.headers)) {
      if (name.toLowerCase() !== 'www-authenticate') reply.header(name, value);
    }
    const errors = (error.extra.errors ?? {}) as Record<string, string[]>;
    return send(error.status, titleOf(error.status), error.detail, errors);
  }
  if (isDatabaseUnavailable(error)) {
    reply.header('Retry-After', '2');
    return send(503, 'Unavailable', 'The database is unavailable. Try again in a few seconds.');
  }
  const status = (error as { statusCode?: number }).statusCode;
  if (status !== undefined && status >= 400 && status < 500) {
    return send(status, titleOf(status), 'The request could not be read.');
  }
  request.log.error({ err: error }, 'unhandled error in the portal');
  return send(500, 'Something went wrong', `Our side failed. Request id: ${request.id}.`);
}

function titleOf(status: number): string {
  if (status === 404) return 'Not found';
  if (status === 403) return 'Not allowed';
  if (status === 409) return 'Not now';
  if (status === 422) return 'Please check the form';
  if (status === 429) return 'Too many requests';
  return 'That did not work';
}
