import fc from 'fast-check';
import {
  dateTimeMs,
  FILTER_OPERATORS,
  type FilterableEvent,
  type PayloadFilter,
} from '../../src/domain/payload-filter.ts';

/**
 * The language read straight off docs/payload-filters.md, interpreted from the JSON on every call:
 * the compiled matcher must agree with it on every filter and event.
 */
export function reference(filter: PayloadFilter, event: FilterableEvent): boolean {
  return Object.keys(filter).every((key) => {
    const value = filter[key];
    if (key === '$and') return (value as PayloadFilter[]).every((f) => reference(f, event));
    if (key === '$or') return (value as PayloadFilter[]).some((f) => reference(f, event));
    let found: { value: unknown } | null = { value: event };
    const members = key === 'type' ? ['type'] : ['data', ...key.split('.').slice(1)];
    for (const member of members) {
      const holder: unknown = found?.value;
      const plain = typeof holder === 'object' && holder !== null && !Array.isArray(holder);
      found =
        plain && Object.hasOwn(holder, member)
          ? { value: (holder as Record<string, unknown>)[member] }
          : null;
    }
    const operators =
      typeof value === 'object' && value !== null
        ? (value as Record<string, unknown>)
        : { $eq: value };
    return Object.keys(operators).every((operator) => test(operator, operators[operator], found));
  });
}

function test(operator: string, operand: unknown, found: { value: unknown } | null): boolean {
  const value = found?.value;
  const scalar =
    found !== null && (value === null || ['string', 'number', 'boolean'].includes(typeof value));
  switch (operator) {
    case '$eq':
      return found !== null && value === operand;
    case '$neq':
      return !(found !== null && value === operand);
    case '$in':
      return scalar && (operand as unknown[]).includes(value);
    case '$nin':
      return !(scalar && (operand as unknown[]).includes(value));
    case '$exists':
      return (found !== null) === operand;
    case '$prefix':
      return typeof value === 'string' && value.slice(0, (operand as string).length) === operand;
    default: {
      let a: number | null = null;
      let b: number | null = null;
      if (typeof operand === 'number') {
        if (typeof value === 'number') [a, b] = [value, operand];
      } else if (typeof value === 'string') {
        [a, b] = [dateTimeMs(value), dateTimeMs(operand as string)];
      }
      if (a === null || b === null) return false;
      if (operator === '$gt') return a > b;
      if (operator === '$gte') return a >= b;
      if (operator === '$lt') return a < b;
      return a <= b;
    }
  }
}

/** Small pools, so that random filters and events meet often. */
const MEMBERS = ['currency', 'amount', 'trip'];
const scalarArb = fc.oneof(
  fc.constantFrom('EUR', 'USD', 'trp_1', 'trp_12', ''),
  fc.constantFrom('2026-05-01', '2026-05-01T09:00:00Z', '2026-05-01T10:00:00+02:00'),
  fc.constantFrom(0, 10, 2.5),
  fc.boolean(),
  fc.constant(null),
);
const pathArb = fc.oneof(
  fc.constant('type'),
  fc.constantFrom(...MEMBERS).map((m) => `data.${m}`),
  fc.constantFrom(...MEMBERS).map((m) => `data.trip.${m}`),
);
const comparableArb = fc.oneof(
  fc.constantFrom(0, 10, -3.5),
  fc.constantFrom('2026-05-01', '2026-05-01T08:30:00Z', '2026-05-01T09:00:00.000Z'),
);
const operatorsArb = fc
  .uniqueArray(fc.constantFrom(...FILTER_OPERATORS), { minLength: 1, maxLength: 2 })
  .chain((operators) =>
    fc
      .tuple(
        ...operators.map((operator) => {
          switch (operator) {
            case '$in':
            case '$nin':
              return fc.array(scalarArb, { minLength: 1, maxLength: 4 });
            case '$exists':
              return fc.boolean();
            case '$prefix':
              return fc.constantFrom('E', 'EU', 'trp_1', '2026-', 'pay');
            case '$eq':
            case '$neq':
              return scalarArb;
            default:
              return comparableArb;
          }
        }),
      )
      .map((operands) => Object.fromEntries(operators.map((o, i) => [o, operands[i]]))),
  );
const conditionsArb = fc.dictionary(pathArb, fc.oneof(scalarArb, operatorsArb), {
  minKeys: 1,
  maxKeys: 2,
});
export const filterArb: fc.Arbitrary<PayloadFilter> = fc.letrec<{ filter: PayloadFilter }>(
  (tie) => ({
    filter: fc.oneof(
      { depthSize: 'small', withCrossShrink: true },
      { weight: 3, arbitrary: conditionsArb },
      {
        weight: 1,
        arbitrary: fc.record({ $and: fc.array(tie('filter'), { minLength: 1, maxLength: 2 }) }),
      },
      {
        weight: 2,
        arbitrary: fc.record({ $or: fc.array(tie('filter'), { minLength: 1, maxLength: 3 }) }),
      },
    ),
  }),
).filter;
const dataArb = fc.dictionary(
  fc.constantFrom(...MEMBERS),
  fc.oneof(
    { weight: 4, arbitrary: scalarArb },
    { weight: 2, arbitrary: fc.dictionary(fc.constantFrom(...MEMBERS), scalarArb, { minKeys: 2 }) },
    { weight: 1, arbitrary: fc.array(scalarArb) },
  ),
  { minKeys: 2 },
);
export const eventArb = fc.record({
  type: fc.constantFrom('payment.succeeded', 'EUR', '2026-05-01'),
  data: dataArb,
});
