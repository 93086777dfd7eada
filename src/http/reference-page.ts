import scalar from '@scalar/fastify-api-reference';
import type { FastifyInstance } from 'fastify';

/**
 * `/docs`: the API reference, rendered in the browser by Scalar from the document the app serves.
 * Every asset comes from this app (the renderer's bundle ships in the package), and the default
 * web fonts are off: the page works with no network. Must be registered where @fastify/swagger
 * is, so that the document is the one generated from the route schemas.
 */
export async function registerReferencePage(
  app: FastifyInstance,
  options: { routePrefix: `/${string}`; title: string },
): Promise<void> {
  let document: unknown;
  await app.register(scalar, {
    routePrefix: options.routePrefix,
    configuration: {
      // Built once: routes are fixed once the app is ready.
      content: () => {
        document ??= app.swagger();
        return document as Record<string, unknown>;
      },
      pageTitle: options.title,
      withDefaultFonts: false,
      // Every operation is listed and rendered at once: readers search the page.
      defaultOpenAllTags: true,
      hideClientButton: false,
    },
  });
}
