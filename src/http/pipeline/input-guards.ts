import type {
  FastifyReply,
  FastifyRequest,
  FastifySchemaValidationError,
  HookHandlerDoneFunction,
} from 'fastify';
import { type FieldErrors, notFound, validationFailed } from '../../lib/problems.ts';
import { NUL_MESSAGE } from './json-body.ts';

function holdsNul(value: unknown): boolean {
  if (typeof value === 'string') return value.includes('\0');
  return Array.isArray(value) && value.some(holdsNul);
}

type QueryValidator = ((data: unknown) => boolean) & {
  errors?: FastifySchemaValidationError[] | null;
};

const DECIMAL = { integer: /^-?\d{1,15}$/, number: /^-?\d{1,15}(\.\d{1,15})?$/ };

/**
 * Ajv coerces query text with `Number()`, which also reads `0x5`, `1e1`, ` 5` and `` as numbers.
 * Numeric query parameters take plain decimals only; the others are reported together with Ajv's.
 */
export function decimalNumbersOnly(schema: unknown, validate: QueryValidator): QueryValidator {
  const properties = (schema as { properties?: Record<string, { type?: unknown }> }).properties;
  const numeric = Object.entries(properties ?? {}).flatMap(([name, property]) =>
    property.type === 'integer' || property.type === 'number'
      ? [[name, property.type] as const]
      : [],
  );
  if (numeric.length === 0) return validate;
  const checked: QueryValidator = (data) => {
    const query = data as Record<string, unknown>;
    const bad = numeric.filter(([name, type]) => {
      const value = query[name];
      return typeof value === 'string' && !DECIMAL[type].test(value);
    });
    const valid = validate(data);
    if (bad.length === 0) {
      checked.errors = validate.errors;
      return valid;
    }
    const own = bad.map(([name, type]) => ({
      keyword: 'type',
      instancePath: `/${name}`,
      schemaPath: `#/properties/${name}/type`,
      params: {},
      message: type === 'integer' ? 'must be a decimal integer' : 'must be a decimal number',
    }));
    // Ajv may also have coerced and accepted the value: only its other findings are kept.
    const others = (validate.errors ?? []).filter(
      (error) => !bad.some(([name]) => error.instancePath === `/${name}`),
    );
    checked.errors = [...own, ...others];
    return false;
  };
  return checked;
}

/**
 * A NUL character cannot be stored by PostgreSQL (and no id or filter holds one): in a path it
 * names no resource (404), in a query it is a bad value (422), the same on both backends. Bodies
 * are checked where they are parsed. A raw NUL cannot reach here, only `%00`. A preValidation
 * hook: after authentication, like every other 404 and 422.
 */
export function refuseNul(
  request: FastifyRequest,
  _reply: FastifyReply,
  done: HookHandlerDoneFunction,
): void {
  if (!request.url.includes('%00')) {
    done();
    return;
  }
  const params = request.params as Record<string, unknown> | undefined;
  if (params && Object.values(params).some(holdsNul)) {
    done(notFound('The resource'));
    return;
  }
  // A route without a query schema (outside the API documents, see API_ROUTE) ignores its query
  // string, NUL or not.
  if (!request.routeOptions.schema?.querystring) {
    done();
    return;
  }
  const errors: FieldErrors = Object.create(null);
  for (const [name, value] of Object.entries((request.query ?? {}) as object)) {
    if (holdsNul(name) || holdsNul(value)) errors[name.replace(/\0/g, '\\u0000')] = [NUL_MESSAGE];
  }
  done(Object.keys(errors).length > 0 ? validationFailed(errors) : undefined);
}
