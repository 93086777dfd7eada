import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import fc from 'fast-check';
import { sampleEventData } from './event-samples.ts';
import { EVENT_DATA_SCHEMAS } from './event-schemas.ts';
import { FilterTargets } from './filter-catalog.ts';
import {
  checkFilter,
  compileFilter,
  FILTER_OPERATORS,
  type PayloadFilter,
} from './payload-filter.ts';
import { SUBSCRIBABLE_EVENT_TYPES } from './states.ts';

type Node = {
  type?: string | string[];
  const?: unknown;
  enum?: unknown[];
  anyOf?: Node[];
  properties?: Record<string, Node>;
};

/** Each path of a type's body below `data`, with the JSON types its schema names (read here). */
function pathsOf(type: (typeof SUBSCRIBABLE_EVENT_TYPES)[number]): Map<string, string[]> {
  return new Map([...membersOf(type)].map(([path, member]) => [path, member.types]));
}

const faultsOf = (filter: object, types: readonly string[]) =>
  checkFilter(filter, new FilterTargets(types));

describe('filters held against the event catalog', () => {
  it('takes every path of every type, and names the nearest for a misspelt one', () => {
    for (const type of SUBSCRIBABLE_EVENT_TYPES) {
      const paths = pathsOf(type);
      // Events about the platform, and an erasure's announcement, carry ids, no resource.
      const carriesIds = type.startsWith('webhook.') || type === 'personal_data.erased';
      assert.ok(paths.has('data.object.id') || carriesIds, type);
      for (const path of paths.keys()) {
        assert.deepEqual(faultsOf({ [path]: { $exists: true } }, [type]), {}, `${type} ${path}`);
        const misspelt = `${path.slice(0, -1)}`;
        if (paths.has(misspelt) || misspelt.endsWith('.')) continue;
        const fault = faultsOf({ [misspelt]: { $exists: true } }, [type])[`filter.${misspelt}`];
        assert.ok(fault, `${type}: ${misspelt} is refused`);
        const nearest = /the nearest is (\S+)$/.exec(fault[0])?.[1] as string;
        assert.ok(paths.has(nearest) || nearest === 'type', `${type}: ${nearest} exists`);
      }
    }
  });

  it("refuses an operand no value of the member's type can match, for every typed member", () => {
    const wrong: Record<string, unknown> = { string: 7, number: 'seven', boolean: 'yes' };
    for (const type of SUBSCRIBABLE_EVENT_TYPES) {
      for (const [path, types] of pathsOf(type)) {
        if (types.length === 0 || types.includes('object') || types.includes('array')) continue;
        const first = types[0] === 'integer' ? 'number' : types[0];
        const operand = wrong[first];
        if (operand === undefined || types.includes(typeof operand)) continue;
        const faults = faultsOf({ [path]: { $eq: operand } }, [type]);
        assert.ok(faults[`filter.${path}.$eq`], `${type} ${path} $eq ${JSON.stringify(operand)}`);
        if (!types.includes('number') && !types.includes('integer')) {
          const compared = faultsOf({ [path]: { $gt: 1 } }, [type]);
          assert.ok(compared[`filter.${path}.$gt`], `${type} ${path} $gt 1`);
        }
      }
    }
  });

  it('answers the cases integrators meet', () => {
    const booking = ['booking.confirmed', 'booking.cancelled'];
    assert.match(
      faultsOf({ 'data.totalRetailCent': { $gte: 1 } }, booking)['filter.data.totalRetailCent'][0],
      /the nearest is data\.totalRetailCents$/,
    );
    assert.deepEqual(faultsOf({ 'data.object.status': 'cancelled' }, booking), {});
    assert.deepEqual(faultsOf({ 'data.changes.status.before': 'confirmed' }, booking), {});
    assert.ok(faultsOf({ 'data.currency': { $gt: 5 } }, booking)['filter.data.currency.$gt']);
    assert.ok(
      faultsOf({ 'data.status': 'deposit_paid' }, ['booking.confirmed'])['filter.data.status'],
    );
    assert.deepEqual(faultsOf({ 'data.status': 'cancelled' }, booking), {});
    assert.ok(faultsOf({ type: 'booking.confirmd' }, booking)['filter.type']);
    assert.ok(faultsOf({ type: { $prefix: 'trip.' } }, booking)['filter.type.$prefix']);
    assert.deepEqual(faultsOf({ $or: [{ type: { $prefix: 'booking.' } }] }, booking), {});
    // Nested under $and/$or, keyed by where the path stands.
    const nested = faultsOf({ $and: [{ 'data.nope': 1 }] }, booking);
    assert.ok(nested['filter.$and.0.data.nope']);
    // A member only some of the types have is still a member.
    assert.deepEqual(
      faultsOf({ 'data.paymentId': { $exists: true } }, [...booking, 'payment.failed']),
      {},
    );
  });
});

/** The audit's cases (issue 65): filters that can match, and filters that never can. */
const CONFIRMED = ['booking.confirmed'];
const CAN_MATCH: Array<[object, string[]]> = [
  [{ type: { $in: ['booking.confirmed', 'booking.refunded'] } }, CONFIRMED],
  [{ 'data.status': { $in: ['confirmed', null] } }, CONFIRMED],
  [{ type: { $neq: 'booking.refunded' } }, CONFIRMED],
  [{ 'data.status': { $nin: ['deposit_paid'] } }, CONFIRMED],
  [{ 'data.status': { $neq: 'deposit_paid' } }, CONFIRMED],
  [{ $or: [{ type: 'booking.refunded' }, { type: 'booking.confirmed' }] }, CONFIRMED],
  [{ $or: [{ 'data.status': 'refunded' }, { 'data.totalRetailCents': { $gt: 100 } }] }, CONFIRMED],
  [{ 'data.nope': { $exists: false } }, CONFIRMED],
  [{ 'data.object.nope': { $exists: false } }, CONFIRMED],
  [{ 'data.object.confirmedAt': { $gte: '2026-01-01' } }, CONFIRMED],
  [{ 'data.object.confirmedAt': { $prefix: '2026-0' } }, CONFIRMED],
  [{ 'data.object.confirmedAt': null }, CONFIRMED],
  [{ 'data.changes.status.before': 'deposit_paid' }, CONFIRMED],
  [{ 'data.changes.status': { $exists: false } }, ['booking.created']],
  [{ 'data.object.tags': { $exists: true, $neq: 'x' } }, ['client.created']],
  [{ 'data.totalRetailCents': { $gt: 5, $lt: 7 } }, CONFIRMED],
  [{ 'data.paymentId': { $exists: true } }, [...CONFIRMED, 'payment.failed']],
  [{ 'data.constructor': { $exists: false } }, CONFIRMED],
];
const NEVER_MATCHES: Array<[object, string[], string]> = [
  [{ type: { $neq: 'booking.confirmed' } }, CONFIRMED, 'filter.type.$neq'],
  [{ type: { $nin: ['booking.confirmed'] } }, CONFIRMED, 'filter.type.$nin'],
  [{ 'data.bookingId': { $exists: false } }, CONFIRMED, 'filter.data.bookingId.$exists'],
  [{ 'data.currency': { $gt: '2026-01-01' } }, CONFIRMED, 'filter.data.currency.$gt'],
  [{ 'data.totalRetailCents': { $eq: 1.5 } }, CONFIRMED, 'filter.data.totalRetailCents.$eq'],
  [{ 'data.totalRetailCents': 1.5 }, CONFIRMED, 'filter.data.totalRetailCents'],
  [{ 'data.changes.status': { $exists: true } }, ['booking.created'], 'filter.data.changes.status'],
  [{ 'data.changes.status.before': 'x' }, ['trip.created'], 'filter.data.changes.status.before'],
  [
    { 'data.paymentId': { $exists: true }, 'data.tripId': { $exists: true } },
    [...CONFIRMED, 'payment.failed'],
    'filter.data.tripId.$exists',
  ],
  [{ 'data.totalRetailCents': { $gt: 5, $lt: 6 } }, CONFIRMED, 'filter.data.totalRetailCents.$lt'],
  [{ 'data.attempts': { $lt: 0 } }, ['webhook.delivery.dead_lettered'], 'filter.data.attempts.$lt'],
  [{ 'data.status': 'deposit_paid' }, CONFIRMED, 'filter.data.status'],
  [{ $or: [{ 'data.status': 'x' }, { type: 'trip.created' }] }, CONFIRMED, 'filter.$or.1.type'],
  // Two that never hold, together: no one of them alone is why, so the filter is named.
  [{ 'data.status': 'x', type: 'trip.created' }, CONFIRMED, 'filter'],
  [
    { 'data.object.confirmedAt': { $prefix: 'x' } },
    CONFIRMED,
    'filter.data.object.confirmedAt.$prefix',
  ],
  [{ 'data.object': { $eq: 1 } }, CONFIRMED, 'filter.data.object.$eq'],
  [{ 'data.totalRetailCent': { $gte: 1 } }, CONFIRMED, 'filter.data.totalRetailCent'],
  // A member name the schemas' objects inherit is no member.
  [{ 'data.toString': { $eq: '' } }, CONFIRMED, 'filter.data.toString'],
];

describe('filters refused exactly when no event of the types can match', () => {
  it("takes the audit's filters that can match, each with a body its schema allows", () => {
    for (const [filter, types] of CAN_MATCH) {
      assert.deepEqual(faultsOf(filter, types), {}, JSON.stringify(filter));
      assertWitness(filter, types);
    }
  });

  it("refuses the audit's filters that never can, naming the condition", () => {
    for (const [filter, types, key] of NEVER_MATCHES) {
      const faults = faultsOf(filter, types);
      assert.ok(faults[key], `${JSON.stringify(filter)}: ${JSON.stringify(faults)}`);
      assert.equal(new FilterTargets(types).witness(filter as PayloadFilter), null);
    }
  });

  it('agrees with an exhaustive search over bodies made from the schemas and the operands', () => {
    const seed = Number(process.env.FILTER_SEED ?? Date.now() % 1e9);
    const runs = fc.sample(filterCase(), { numRuns: RUNS, seed });
    let accepted = 0;
    for (const { filter, types } of runs) {
      const found = new FilterTargets(types).witness(filter);
      if (found !== null) {
        accepted += 1;
        assertWitness(filter, types);
      }
      const matching = types.some((type) => exhaustiveMatch(filter, type));
      // A body the search found that matches: the checker must take the filter.
      assert.ok(
        !matching || found !== null,
        `seed ${seed}: refused ${JSON.stringify({ filter, types })}`,
      );
      assert.equal(Object.keys(faultsOf(filter, types)).length === 0, found !== null);
    }
    // Both answers are drawn: the comparison tests each side.
    assert.ok(
      accepted > RUNS / 10 && accepted < RUNS * 0.9,
      `seed ${seed}: ${accepted} of ${RUNS} accepted`,
    );
  });
});

const ajv = addFormats.default(new Ajv2020.default({ strict: false }));
const dataValidators = new Map<string, ReturnType<typeof ajv.compile>>();
/** The catalog's own judgement of a body: its type's data schema, compiled apart from the checker. */
function valid(type: string, data: unknown): boolean {
  let validate = dataValidators.get(type);
  if (validate === undefined) {
    validate = ajv.compile(EVENT_DATA_SCHEMAS[type as keyof typeof EVENT_DATA_SCHEMAS]);
    dataValidators.set(type, validate);
  }
  return validate(data) === true;
}

/** The checker's witness is a body of one of the types that the filter really matches. */
function assertWitness(filter: object, types: string[]) {
  const found = new FilterTargets(types).witness(filter as PayloadFilter);
  assert.ok(found, JSON.stringify(filter));
  assert.ok(types.includes(found.type));
  assert.ok(valid(found.type, found.data), `${JSON.stringify(found)} is no valid ${found.type}`);
  assert.ok(
    compileFilter(filter as PayloadFilter)(found),
    `${JSON.stringify(found)} does not match`,
  );
}

/** Every path below `data` with its JSON types and listed values (read here, from the schema). */
function membersOf(type: string): Map<string, { types: string[]; values: unknown[] }> {
  const found = new Map<string, { types: string[]; values: unknown[] }>();
  const visit = (node: Node & { enum?: unknown[]; const?: unknown }, path: string) => {
    const branches = node.anyOf ?? [node];
    const entry = found.get(path) ?? { types: [], values: [] };
    for (const branch of branches as Array<Node & { const?: unknown }>) {
      entry.types.push(...[branch.type ?? []].flat());
      if (branch.const !== undefined) entry.values.push(branch.const);
      entry.values.push(...(branch.enum ?? []));
      for (const [name, child] of Object.entries(branch.properties ?? {})) {
        visit(child, `${path}.${name}`);
      }
    }
    found.set(path, entry);
  };
  visit(EVENT_DATA_SCHEMAS[type as keyof typeof EVENT_DATA_SCHEMAS] as unknown as Node, 'data');
  found.delete('data');
  return found;
}

/** Random filters compared; FILTER_SEED replays a run. */
const RUNS = 300;
const SCALARS = [
  null,
  true,
  false,
  0,
  1,
  -1,
  1.5,
  100,
  9007199254740992,
  '',
  'x',
  'EUR',
  'confirmed',
];
const DATES = ['2026-01-01T00:00:00.000Z', '2026-05-01', '2030-12-31T23:59:59Z'];

/** A random filter over the paths, operators and values of one or two subscribed types. */
function filterCase() {
  return fc
    .subarray([...SUBSCRIBABLE_EVENT_TYPES], { minLength: 1, maxLength: 2 })
    .chain((types) => {
      const members = new Map<string, unknown[]>([['type', [...types, 'trip.created']]]);
      for (const type of types) {
        for (const [path, member] of membersOf(type)) {
          members.set(path, [...(members.get(path) ?? []), ...member.values]);
        }
      }
      members.set('data.nope', []);
      const paths = [...members.keys()];
      const operand = (path: string) =>
        fc.constantFrom(...(members.get(path) ?? []), ...SCALARS, ...DATES);
      const condition = fc.constantFrom(...paths).chain((path) =>
        fc.constantFrom(...FILTER_OPERATORS).chain((operator) => {
          const value =
            operator === '$in' || operator === '$nin'
              ? fc.array(operand(path), { minLength: 1, maxLength: 3 })
              : operator === '$exists'
                ? fc.boolean()
                : operator === '$prefix'
                  ? fc.constantFrom(
                      'b',
                      'booking.',
                      '2026-',
                      'E',
                      'zz',
                      ...types.map((t) => t.slice(0, 5)),
                    )
                  : operator.startsWith('$g') || operator.startsWith('$l')
                    ? fc.constantFrom(0, 1, 5.5, -3, 100_000, ...DATES)
                    : operand(path).filter((v) => v !== undefined);
          return value.map((v) => ({ [path]: { [operator]: v } }));
        }),
      );
      const level = fc
        .array(condition, { minLength: 1, maxLength: 3 })
        .map((items) => Object.assign({}, ...items));
      const filter = fc.oneof(
        level,
        fc.array(level, { minLength: 1, maxLength: 2 }).map((items) => ({ $or: items })),
        fc
          .tuple(level, fc.array(level, { minLength: 1, maxLength: 2 }))
          .map(([first, or]) => ({ ...first, $or: or })),
      );
      // At most three paths: the exhaustive search below tries every combination of theirs.
      return filter
        .filter((f) => pathsIn(f as PayloadFilter).size <= 3)
        .map((f) => ({ filter: f as PayloadFilter, types }));
    });
}

/** Every path a filter names, `$and` and `$or` walked. */
function pathsIn(filter: PayloadFilter): Map<string, unknown[]> {
  const found = new Map<string, unknown[]>();
  const walk = (f: PayloadFilter) => {
    for (const [key, value] of Object.entries(f)) {
      if (key === '$and' || key === '$or') (value as PayloadFilter[]).forEach(walk);
      else {
        const operands = Object.values(value as object).flatMap((v) =>
          Array.isArray(v) ? v : [v],
        );
        found.set(key, [...(found.get(key) ?? []), ...operands]);
      }
    }
  };
  walk(filter);
  return found;
}

/**
 * Whether a body of `type` that its schema allows matches: every combination, over the filter's
 * paths, of the type's example's value, each listed value, null, absent, an object, each operand
 * and its neighbours, and each prefix completed; each body judged by the schema's validator.
 */
function exhaustiveMatch(filter: PayloadFilter, type: string): boolean {
  const example = sampleEventData(type as (typeof SUBSCRIBABLE_EVENT_TYPES)[number]);
  const members = membersOf(type);
  const paths = [...pathsIn(filter)].filter(([path]) => path !== 'type');
  const candidates = paths.map(([path, operands]) => {
    const values: unknown[] = [ABSENT, null, {}, ...(members.get(path)?.values ?? [])];
    const current = valueAt(example, path);
    if (current !== ABSENT) values.push(current);
    for (const operand of operands) {
      values.push(operand);
      if (typeof operand === 'number')
        values.push(operand - 1, operand + 1, operand - 0.5, operand + 0.5, Math.round(operand));
      if (typeof operand === 'string') {
        values.push(`${operand}x`);
        if (typeof current === 'string') values.push(operand + current.slice(operand.length));
        const ms = Date.parse(operand);
        if (!Number.isNaN(ms))
          for (const at of [ms - 1, ms, ms + 1]) values.push(new Date(at).toISOString());
      }
    }
    // One of each value (as JSON: ABSENT, a symbol, is kept apart).
    const unique = new Map(values.map((v) => [v === ABSENT ? 'absent' : JSON.stringify(v), v]));
    return [...unique.values()];
  });
  const matcher = compileFilter(filter);
  const choose = (index: number, data: unknown): boolean => {
    if (index === paths.length) return valid(type, data) && matcher({ type, data });
    for (const value of candidates[index]) {
      if (choose(index + 1, withValue(data, paths[index][0], value))) return true;
    }
    return false;
  };
  return choose(0, example);
}

const ABSENT = Symbol('absent');
function valueAt(data: unknown, path: string): unknown {
  let value: unknown = { data };
  for (const name of path.split('.')) {
    if (typeof value !== 'object' || value === null || !Object.hasOwn(value, name)) return ABSENT;
    value = (value as Record<string, unknown>)[name];
  }
  return value;
}
/** A copy of `data` with `path` (below `data`) set, objects made on the way; ABSENT removes it. */
function withValue(data: unknown, path: string, value: unknown): unknown {
  const names = path.split('.').slice(1);
  const root = structuredClone({ data }) as { data: Record<string, unknown> };
  let at: Record<string, unknown> = root.data;
  for (const name of names.slice(0, -1)) {
    const next = at[name];
    if (typeof next !== 'object' || next === null || Array.isArray(next)) at[name] = {};
    at = at[name] as Record<string, unknown>;
  }
  const last = names.at(-1) as string;
  if (value === ABSENT) delete at[last];
  else at[last] = value;
  return root.data;
}
