import type { FastifyInstance } from 'fastify';

/**
 * The methods each route path answers, learnt from the routes as they are added, so that a 404
 * for a path that exists under other methods can say which (the API answers no 405, the
 * status stays 404). Matching happens only on that 404, never on a routed request.
 */
export class RouteMethods {
  readonly #routes: Array<{ pattern: RegExp; template: string; methods: Set<string> }> = [];

  /** Must be called before the routes are registered. */
  constructor(app: FastifyInstance) {
    app.addHook('onRoute', (route) => {
      const methods = (Array.isArray(route.method) ? route.method : [route.method]).filter(
        (method) => method !== 'HEAD',
      );
      let entry = this.#routes.find((known) => known.template === route.url);
      if (!entry) {
        entry = { pattern: patternOf(route.url), template: route.url, methods: new Set() };
        this.#routes.push(entry);
      }
      for (const method of methods) entry.methods.add(method);
    });
  }

  /** The methods the path answers (its query left out), or none. */
  allowed(url: string): string[] {
    const path = url.split('?', 1)[0];
    const found = this.#routes.find((route) => route.pattern.test(path));
    return found ? [...found.methods].sort() : [];
  }
}

/** `/api/v1/trips/:id` → /^\/api\/v1\/trips\/[^/]+$/ (find-my-way's parameters are whole segments). */
function patternOf(template: string): RegExp {
  const escaped = template
    .split('/')
    .map((segment) =>
      segment.startsWith(':')
        ? '[^/]+'
        : segment === '*'
          ? '.*'
          : segment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'),
    )
    .join('/');
  return new RegExp(`^${escaped}$`);
}
