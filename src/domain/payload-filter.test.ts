import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import {
  checkFilter,
  compileFilter,
  dateTimeMs,
  FILTER_OPERATORS,
  type FilterableEvent,
  FilterMatchers,
  type PayloadFilter,
} from './payload-filter.ts';

/**
 * The language read straight off docs/payload-filters.md, interpreted from the JSON on every call:
 * the compiled matcher must agree with it on every filter and event.
 */
function reference(filter: PayloadFilter, event: FilterableEvent): boolean {
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
const filterArb: fc.Arbitrary<PayloadFilter> = fc.letrec<{ filter: PayloadFilter }>((tie) => ({
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
})).filter;
const dataArb = fc.dictionary(
  fc.constantFrom(...MEMBERS),
  fc.oneof(
    { weight: 4, arbitrary: scalarArb },
    { weight: 2, arbitrary: fc.dictionary(fc.constantFrom(...MEMBERS), scalarArb, { minKeys: 2 }) },
    { weight: 1, arbitrary: fc.array(scalarArb) },
  ),
  { minKeys: 2 },
);
const eventArb = fc.record({
  type: fc.constantFrom('payment.succeeded', 'EUR', '2026-05-01'),
  data: dataArb,
});

describe('payload filters: the compiled matcher', () => {
  it('agrees with the reference interpreter on thousands of random filters and events', () => {
    let matched = 0;
    let runs = 0;
    fc.assert(
      fc.property(filterArb, fc.array(eventArb, { minLength: 1, maxLength: 5 }), (f, events) => {
        // Only filters the API would store are compiled.
        fc.pre(Object.keys(checkFilter(f)).length === 0);
        const matcher = compileFilter(f);
        for (const event of events) {
          const expected = reference(f, event);
          runs += 1;
          if (expected) matched += 1;
          assert.equal(matcher(event), expected, JSON.stringify({ f, event }));
        }
      }),
      { numRuns: 4000 },
    );
    // Both answers come in the hundreds, so agreeing is no accident of one.
    assert.ok(matched > runs / 25 && matched < runs * 0.9, `${matched} of ${runs}`);
  });

  it('reads only own members: a path never reaches the prototype', () => {
    const matcher = compileFilter({ 'data.constructor': { $exists: true } });
    assert.equal(matcher({ type: 't', data: {} }), false);
    assert.equal(
      compileFilter({ 'data.toString': { $exists: false } })({ type: 't', data: {} }),
      true,
    );
  });

  it('shares one compiled matcher per stored text', () => {
    const matchers = new FilterMatchers(2);
    const stored = JSON.stringify({ 'data.currency': 'EUR' });
    assert.equal(matchers.matches(stored, { type: 't', data: { currency: 'EUR' } }), true);
    assert.equal(matchers.matches(stored, { type: 't', data: { currency: 'USD' } }), false);
    assert.equal(matchers.matches(null, { type: 't', data: {} }), true);
  });
});

describe('payload filters: checkFilter names each fault by its path', () => {
  const cases: Array<[string, unknown, string]> = [
    ['not an object', ['x'], 'filter'],
    ['empty', {}, 'filter'],
    ['unknown path', { currency: 'EUR' }, 'filter.currency'],
    ['bare data', { data: 1 }, 'filter.data'],
    ['empty member', { 'data..x': 1 }, 'filter.data..x'],
    ['unknown combinator', { $nor: [{ type: 'x' }] }, 'filter.$nor'],
    ['array value', { 'data.currency': ['EUR'] }, 'filter.data.currency'],
    ['unknown operator', { 'data.amount': { $ne: 1 } }, 'filter.data.amount.$ne'],
    ['nested member', { 'data.trip': { id: 1 } }, 'filter.data.trip.id'],
    ['no operator', { 'data.amount': {} }, 'filter.data.amount'],
    ['object to $eq', { 'data.amount': { $eq: { a: 1 } } }, 'filter.data.amount.$eq'],
    ['empty $in', { 'data.currency': { $in: [] } }, 'filter.data.currency.$in'],
    ['object in $nin', { 'data.currency': { $nin: ['EUR', {}] } }, 'filter.data.currency.$nin'],
    ['text to $gt', { 'data.amount': { $gt: 'ten' } }, 'filter.data.amount.$gt'],
    ['31 February', { 'data.at': { $lt: '2026-02-31' } }, 'filter.data.at.$lt'],
    ['boolean to $lte', { 'data.amount': { $lte: true } }, 'filter.data.amount.$lte'],
    ['text to $exists', { 'data.x': { $exists: 'yes' } }, 'filter.data.x.$exists'],
    ['empty $prefix', { type: { $prefix: '' } }, 'filter.type.$prefix'],
    ['$or not an array', { $or: { type: 'x' } }, 'filter.$or'],
    ['$and empty', { $and: [] }, 'filter.$and'],
    ['$or item not an object', { $or: [{ type: 'x' }, 3] }, 'filter.$or.1'],
    ['empty item', { $and: [{}] }, 'filter.$and.0'],
    [
      'inner fault',
      { $or: [{ type: 'x' }, { 'data.a': { $gt: null } }] },
      'filter.$or.1.data.a.$gt',
    ],
    [
      'too deep',
      { $and: [{ $or: [{ $and: [{ $or: [{ type: 'x' }] }] }] }] },
      'filter.$and.0.$or.0.$and.0.$or',
    ],
    [
      'too many conditions',
      Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`data.m${i}`, i])),
      'filter',
    ],
    ['too large', { 'data.note': { $prefix: 'x'.repeat(4100) } }, 'filter'],
  ];
  for (const [name, filter, path] of cases) {
    it(`${name}: ${path}`, () => {
      const errors = checkFilter(filter);
      assert.deepEqual(Object.keys(errors), [path], JSON.stringify(errors));
    });
  }

  it('takes every operator at the limits: 20 conditions, 4 levels, null', () => {
    assert.deepEqual(checkFilter(null), {});
    const twenty = Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`data.m${i}`, i]));
    assert.deepEqual(checkFilter(twenty), {});
    assert.deepEqual(checkFilter({ $and: [{ $or: [{ $and: [{ type: 'x' }] }] }] }), {});
    const all = {
      type: {
        $in: ['payment.succeeded'],
        $nin: ['x'],
        $prefix: 'pay',
        $neq: 'y',
        $eq: 'payment.succeeded',
      },
      'data.amountCents': { $gt: 0, $gte: 1, $lt: 10, $lte: 9, $exists: true },
    };
    assert.deepEqual(checkFilter(all), {});
  });

  it('suggests the operator meant', () => {
    const errors = checkFilter({ 'data.currency': { $nq: 'EUR' } });
    assert.match(errors['filter.data.currency.$nq'][0], /did you mean \$eq\?|did you mean \$neq\?/);
  });
});
