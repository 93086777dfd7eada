import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '../config.ts';
import type { Clock } from '../lib/clock.ts';
import { notFound } from '../lib/problems.ts';

/** End of 2026-10-31 UTC. */
const LEGACY_SUNSET = new Date('2026-11-01T00:00:00.000Z');
const SUNSET_HEADER = 'Sat, 31 Oct 2026 23:59:59 GMT';

/** Legacy recipient-page prefixes and the `/dossier` path that replaces each. */
const LEGACY_PREFIXES: Array<[string, string]> = [
  ['/client/quotes', '/dossier'],
  ['/client/bookings', '/dossier/bookings'],
  ['/api/client/quotes', '/dossier'],
  ['/api/client/bookings', '/dossier/bookings'],
];

/**
 * Deprecated routes: a 308 to the successor until the sunset, 404 after it; both
 * carry Deprecation, Sunset and the successor Link. The clock is injected so tests see both sides.
 */
export const legacyRoutes: FastifyPluginAsync<{ config: Config; clock: Clock }> = async (
  app,
  { config, clock },
) => {
  for (const [prefix, successor] of LEGACY_PREFIXES) {
    const handler = async (request: FastifyRequest, reply: FastifyReply) => {
      const [path, query] = splitUrl(request.url);
      const rest = path.slice(prefix.length);
      const target = `${config.storefrontBaseUrl}${successor}${rest}${query}`;
      reply.header('Deprecation', 'true');
      reply.header('Sunset', SUNSET_HEADER);
      reply.header('Link', `<${target}>; rel="successor-version"`);
      if (clock.now() >= LEGACY_SUNSET) throw notFound('This deprecated route');
      return reply.redirect(target, 308);
    };
    // Answered at onRequest, before any body is read: whatever the method, Content-Type or body,
    // the answer is the redirect or the 404 with the deprecation headers, never a 422.
    const options = { schema: { hide: true }, onRequest: handler };
    const unreachable = async () => undefined;
    app.all(prefix, options, unreachable);
    app.all(`${prefix}/*`, options, unreachable);
  }
};

function splitUrl(url: string): [string, string] {
  const index = url.indexOf('?');
  return index < 0 ? [url, ''] : [url.slice(0, index), url.slice(index)];
}
