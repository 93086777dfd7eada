import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { changesBetween, publicObject } from './change-events.ts';
import { sampleEventData } from './event-samples.ts';

describe('publicObject: a row as its GET shows it', () => {
  it('keeps the public members only, in their response types', () => {
    const { object } = sampleEventData('payment.created');
    const row = {
      ...object,
      tenantId: 'ten_secret',
      createdAt: '2027-01-01T00:00:00.000Z',
      updatedAt: '2027-01-01T00:00:00.000Z',
      // SQLite's boolean.
      isDeposit: 1,
    };
    const shown = publicObject('payment', row);
    assert.deepEqual(shown, { ...object, isDeposit: true });
    assert.equal('tenantId' in shown, false, 'nothing internal');
  });

  it('leaves out what a trip row holds beyond its GET (snapshot, version, creator)', () => {
    const { object } = sampleEventData('trip.created');
    const shown = publicObject('trip', {
      ...object,
      version: 3,
      createdBy: 'mem_1',
      tenantId: 't',
    });
    assert.deepEqual(Object.keys(shown).sort(), Object.keys(object).sort());
  });
});

describe('changesBetween: the members a change moved', () => {
  it('is empty on creation, and names only what differs, arrays by content', () => {
    const { object } = sampleEventData('client.created');
    assert.deepEqual(changesBetween(null, object), {});
    assert.deepEqual(changesBetween(object, { ...object, tags: [...object.tags] }), {});
    assert.deepEqual(changesBetween(object, { ...object, tags: ['a'], archivedAt: null }), {
      tags: { before: object.tags, after: ['a'] },
    });
  });

  it('takes any object to any other of its members: before with the changes applied is after', () => {
    const value = fc.oneof(
      fc.constant(null),
      fc.string(),
      fc.integer(),
      fc.boolean(),
      fc.array(fc.string(), { maxLength: 3 }),
    );
    const members = ['a', 'b', 'c', 'd', 'e'];
    const object = fc.record(Object.fromEntries(members.map((m) => [m, value])));
    fc.assert(
      fc.property(object, object, (before, after) => {
        const changes = changesBetween(before, after);
        const applied: Record<string, unknown> = { ...before };
        for (const [name, { before: was, after: is }] of Object.entries(changes)) {
          assert.deepEqual(was, before[name]);
          applied[name] = is;
        }
        assert.deepEqual(applied, { ...after });
        for (const name of members) {
          const moved = JSON.stringify(before[name]) !== JSON.stringify(after[name]);
          assert.equal(name in changes, moved, name);
        }
      }),
    );
  });
});
