import { type Static, type TSchema, type TUnsafe, Type } from '@sinclair/typebox';

/** The TypeBox building blocks every schema of the API is made of. */

/**
 * `type: [T, "null"]` rather than anyOf: OpenAPI 3.1 reads it the same, and fast-json-stringify
 * serializes it without trying alternatives at run time.
 */
export function Nullable<T extends TSchema>(schema: T): TUnsafe<Static<T> | null> {
  const { type, ...rest } = schema as unknown as { type: string; enum?: unknown[] };
  // An enum must list null too, or no null passes it.
  if (rest.enum) rest.enum = [...rest.enum, null];
  return Type.Unsafe<Static<T> | null>({ ...rest, type: [type, 'null'] });
}

/** A string enum as `{type: string, enum}` (TypeBox unions of literals become anyOf). */
export function StringEnum<const T extends readonly string[]>(values: T, options: object = {}) {
  return Type.Unsafe<T[number]>({ type: 'string', enum: [...values], ...options });
}

export const DateTime = Type.String({ format: 'date-time' });
export const NullableDateTime = Nullable(DateTime);
/** An instant: ISO 8601 in UTC with milliseconds, as every time this API returns. */
export const At = (description: string) =>
  Nullable(Type.String({ format: 'date-time', description: `${description} UTC.` }));
export const Text = (description: string) => Nullable(Type.String({ description }));
