import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { EVENT_DATA_SCHEMAS } from './event-schemas.ts';
import { FilterTargets } from './filter-catalog.ts';
import { checkFilter } from './payload-filter.ts';
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
  const paths = new Map<string, string[]>();
  const visit = (node: Node, path: string) => {
    const types = node.anyOf
      ? node.anyOf.flatMap((branch) => [branch.type ?? []].flat())
      : [node.type ?? []].flat();
    if (path !== 'data') paths.set(path, types);
    for (const [name, child] of Object.entries(node.properties ?? {})) {
      visit(child, `${path}.${name}`);
    }
  };
  visit(EVENT_DATA_SCHEMAS[type] as unknown as Node, 'data');
  return paths;
}

const faultsOf = (filter: object, types: readonly string[]) =>
  checkFilter(filter, new FilterTargets(types));

describe('filters held against the event catalog', () => {
  it('takes every path of every type, and names the nearest for a misspelt one', () => {
    for (const type of SUBSCRIBABLE_EVENT_TYPES) {
      const paths = pathsOf(type);
      assert.ok(paths.has('data.object.id') || type.startsWith('webhook.'), type);
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
