import scalar from '@scalar/fastify-api-reference';
import type { FastifyInstance } from 'fastify';

/**
 * An API reference page (`/docs/`, `/admin/docs/`), rendered in the browser by Scalar from the
 * document the app serves (`document`, generated from the route schemas). Every asset comes from
 * this app (the renderer's bundle ships in the package), and the default web fonts are off: the
 * page works with no network.
 */
export async function registerReferencePage(
  app: FastifyInstance,
  options: { routePrefix: `/${string}`; title: string; document: () => object },
): Promise<void> {
  let document: object | undefined;
  await app.register(scalar, {
    routePrefix: options.routePrefix,
    configuration: {
      // Built once: routes are fixed once the app is ready.
      content: () => {
        document ??= options.document();
        return document as Record<string, unknown>;
      },
      pageTitle: options.title,
      withDefaultFonts: false,
      // Every operation is listed and rendered at once: readers search the page.
      defaultOpenAllTags: true,
      hideClientButton: false,
      // Scalar's own toolbar (generate SDKs, share, deploy) is for Scalar's hosted service; the
      // SDK of this API is described in the page itself.
      showDeveloperTools: 'never',
    },
  });
}
