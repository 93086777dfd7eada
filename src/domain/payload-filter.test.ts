import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { eventArb, filterArb, reference } from '../../test/helpers/filter-reference.ts';
import { checkFilter, compileFilter, FILTER_OPERATORS, FilterMatchers } from './payload-filter.ts';

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

/** Whether `name` is `typed` with one letter put back. */
function leftOut(typed: string, name: string): boolean {
  for (let at = 0; at < name.length; at++) {
    if (name.slice(0, at) + name.slice(at + 1) === typed) return true;
  }
  return false;
}

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

  it('suggests the operator meant: every operator with one letter dropped', () => {
    const operators: readonly string[] = FILTER_OPERATORS;
    let checked = 0;
    for (const operator of operators) {
      for (let at = 1; at < operator.length; at++) {
        const typed = operator.slice(0, at) + operator.slice(at + 1);
        // `$gte` less its `e` is `$gt`: no misspelling.
        if (operators.includes(typed)) continue;
        const message = checkFilter({ 'data.x': { [typed]: 1 } })[`filter.data.x.${typed}`][0];
        const hint = /\(did you mean (.+)\?\)$/.exec(message);
        assert.ok(hint, `${typed}: ${message}`);
        const named = hint[1].split(' or ');
        assert.ok(named.includes(operator), `${typed} should name ${operator}: ${message}`);
        // More than one only where each holds every typed letter in order (`$t`: `$gt`, `$lt`).
        for (const name of named) {
          assert.equal(leftOut(typed, name), true, `${typed} is ${name} less a letter: ${message}`);
        }
        checked += 1;
      }
    }
    assert.ok(checked > 25, `${checked} misspellings`);
    const nq = checkFilter({ 'data.currency': { $nq: 'EUR' } })['filter.data.currency.$nq'][0];
    assert.match(nq, /\(did you mean \$neq\?\)$/);
    const ne = checkFilter({ 'data.currency': { $ne: 'EUR' } })['filter.data.currency.$ne'][0];
    assert.match(ne, /\(did you mean \$neq\?\)$/);
    const combinator = checkFilter({ $an: [{ type: 'x' }] })['filter.$an'][0];
    assert.match(combinator, /\(did you mean \$and\?\)$/);
  });

  it('refuses numbers beyond the double range wherever a filter takes a number', () => {
    const cases: Array<[unknown, string]> = [
      [{ 'data.amountCents': { $lt: Infinity } }, 'filter.data.amountCents.$lt'],
      [{ 'data.amountCents': { $gte: -Infinity } }, 'filter.data.amountCents.$gte'],
      [{ 'data.amountCents': { $in: [1, Infinity] } }, 'filter.data.amountCents.$in'],
      [{ 'data.amountCents': { $nin: [Number.NaN] } }, 'filter.data.amountCents.$nin'],
      [{ 'data.amountCents': { $eq: Infinity } }, 'filter.data.amountCents.$eq'],
      [{ 'data.unpublishedAt': Infinity }, 'filter.data.unpublishedAt'],
      [{ $or: [{ 'data.a': -Infinity }] }, 'filter.$or.0.data.a'],
    ];
    for (const [filter, path] of cases) {
      const errors = checkFilter(filter);
      assert.deepEqual(Object.keys(errors), [path], JSON.stringify(errors));
      assert.match(errors[path][0], /beyond the range of a double/);
    }
    // The largest double is a number like any other.
    assert.deepEqual(
      checkFilter({ 'data.a': { $lt: Number.MAX_VALUE, $in: [-Number.MAX_VALUE] } }),
      {},
    );
  });
});
