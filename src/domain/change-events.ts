import { SerializerSelector } from '@fastify/fast-json-stringify-compiler';
import { type Static, type TSchema, Type } from '@sinclair/typebox';
import { Booking, Client, Payment, Trip } from './resources.ts';

/**
 * What an event about a trip, booking, client or payment carries beside its own members: the
 * resource as its `GET` shows it after the change (`object`), and the public members the change
 * moved (`changes`), so that a receiver can keep a copy from its events alone.
 */

export const RESOURCE_SCHEMAS = { trip: Trip, booking: Booking, client: Client, payment: Payment };
export type ResourceKind = keyof typeof RESOURCE_SCHEMAS;
export type ResourceObject<K extends ResourceKind> = Static<(typeof RESOURCE_SCHEMAS)[K]>;

/** One member's move: `{before, after}`, each as the resource's `GET` shows it. */
export type Changes = Record<string, { before: unknown; after: unknown }>;

/** The JSON Schema of `changes`: members of `resource`, each a `{before, after}` pair. */
export function ChangesOf(resource: TSchema) {
  const properties = (resource as unknown as { properties: Record<string, TSchema> }).properties;
  return Type.Object(
    Object.fromEntries(
      Object.entries(properties).map(([name, schema]) => [
        name,
        Type.Optional(
          Type.Object({ before: schema, after: schema }, { additionalProperties: false }),
        ),
      ]),
    ),
    {
      additionalProperties: false,
      description:
        'The public members this change moved, each `{before, after}`; `{}` on creation.',
    },
  );
}

// The responses' own serializer (Fastify's, with its defaults): `object` is what a GET answers.
// Each compiled at its first event, as the routes' are at their first response: a process that
// emits none (the CLI, a worker) compiles none.
const compile = SerializerSelector()({}, {});
const serializers = new Map<ResourceKind, (row: unknown) => string>();

/**
 * A stored row as its resource's `GET` shows it: its public members only, in the response's
 * types, whatever else the row holds (internal columns, secrets).
 */
export function publicObject<K extends ResourceKind>(kind: K, row: object): ResourceObject<K> {
  let serialize = serializers.get(kind);
  if (serialize === undefined) {
    const route = { method: 'GET', url: `/${kind}`, httpStatus: '200' };
    serialize = compile({ schema: RESOURCE_SCHEMAS[kind], ...route });
    serializers.set(kind, serialize);
  }
  return JSON.parse(serialize(row)) as ResourceObject<K>;
}

/**
 * The members whose value differs between two `publicObject`s of one resource (`before` null:
 * a creation, no change). Values compare as JSON, so arrays and nested objects compare by content.
 */
export function changesBetween(before: object | null, after: object): Changes {
  const changes: Changes = {};
  if (before === null) return changes;
  const was = before as Record<string, unknown>;
  const is = after as Record<string, unknown>;
  for (const name of new Set([...Object.keys(was), ...Object.keys(is)])) {
    const from = was[name] ?? null;
    const to = is[name] ?? null;
    if (from === to) continue;
    if (typeof from === 'object' && JSON.stringify(from) === JSON.stringify(to)) continue;
    changes[name] = { before: from, after: to };
  }
  return changes;
}

/** The resource an event type is about (a dispute's is its booking), or null for none. */
export function resourceOfEvent(type: string): ResourceKind | null {
  const family = type.slice(0, type.indexOf('.'));
  if (family === 'dispute') return 'booking';
  return Object.hasOwn(RESOURCE_SCHEMAS, family) ? (family as ResourceKind) : null;
}
