import { SerializerSelector } from '@fastify/fast-json-stringify-compiler';
import type { FastifyServerOptions } from 'fastify';

/** A compiled validator as Fastify calls it: `errors` is read after a `false`. */
interface Validator<E> {
  (data: unknown): boolean;
  errors?: E;
}

/**
 * Compiles a route's validator on the route's first request, not at start-up. Every route's
 * validators and serializers are most of what building the app costs, and a process rarely
 * serves every route soon after it starts (a restart under load, a test's few requests); a route
 * pays its own compile once, on its first request.
 */
export function lazyValidator<E>(compile: () => Validator<E>): Validator<E> {
  let validate: Validator<E> | undefined;
  const lazy: Validator<E> = (data) => {
    validate ??= compile();
    const valid = validate(data);
    lazy.errors = validate.errors;
    return valid;
  };
  return lazy;
}

/**
 * Fastify's own serializer (fast-json-stringify, the same options and shared schemas), each
 * route's compiled on its first response (see lazyValidator).
 */
export const lazySerializers: NonNullable<FastifyServerOptions['schemaController']> = {
  compilersFactory: {
    buildSerializer(externalSchemas, options) {
      const compile = SerializerSelector()(externalSchemas, options);
      return (route) => {
        let serialize: ((document: unknown) => string) | undefined;
        return (document: unknown) => {
          serialize ??= compile(route);
          return serialize(document);
        };
      };
    },
  },
};
