import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { LIFECYCLES, type Lifecycle } from '../src/domain/states.ts';
import { stateMachinesMarkdown } from '../src/http/reference/state-machines.ts';
import { BACKENDS, createTestContext, type TestContext } from './helpers/context.ts';
import { createBooking, createTenant, createTrip, type TenantFixture } from './helpers/fixtures.ts';

/** The shortest moves from the first state to each state of a lifecycle. */
function pathsFromStart(transitions: Lifecycle['transitions']): Map<string, string[]> {
  const start = Object.keys(transitions)[0];
  const paths = new Map<string, string[]>([[start, []]]);
  const queue = [start];
  for (let state = queue.shift(); state !== undefined; state = queue.shift()) {
    for (const next of transitions[state]) {
      if (paths.has(next)) continue;
      paths.set(next, [...(paths.get(state) ?? []), next]);
      queue.push(next);
    }
  }
  return paths;
}

describe('state machines as documented', () => {
  it('docs/api-behaviour.md carries the tables the services enforce', () => {
    const doc = readFileSync(new URL('../docs/api-behaviour.md', import.meta.url), 'utf8');
    assert.ok(
      doc.includes(stateMachinesMarkdown({ operations: true })),
      'docs/api-behaviour.md: paste stateMachinesMarkdown({ operations: true }) (src/http/reference/state-machines.ts)',
    );
  });

  it('every state of every lifecycle is reachable from its first', () => {
    for (const lifecycle of LIFECYCLES) {
      const paths = pathsFromStart(lifecycle.transitions);
      assert.deepEqual(
        [...paths.keys()].sort(),
        Object.keys(lifecycle.transitions).sort(),
        lifecycle.name,
      );
    }
  });
});

for (const backend of BACKENDS) {
  describe(`every move of every lifecycle (${backend})`, () => {
    let ctx: TestContext;
    let tenant: TenantFixture;
    let publishedTripId: string;
    let bookingId: string;

    before(async () => {
      ctx = await createTestContext(backend);
      tenant = await createTenant(ctx, { tier: 'enterprise' });
      const fixture = await createBooking(ctx, tenant);
      publishedTripId = fixture.trip.id;
      bookingId = fixture.booking.id;
    });
    after(() => ctx.close());

    /** A fresh resource of the lifecycle and the way to ask it to move. */
    const subjects: Record<string, () => Promise<(to: string) => Promise<Response>>> = {
      'Trip status': async () => {
        const trip = await createTrip(ctx, tenant);
        return (to) => move(`/admin/v1/trips/${trip.id}/status`, { status: to });
      },
      'Booking status': async () => {
        const booking = await ctx.admin<{ data: { id: string } }>('POST', '/admin/v1/bookings', {
          tripId: publishedTripId,
          totalRetailCents: 90_000,
          currency: 'EUR',
          travelerName: 'Grace Hopper',
          travelerEmail: 'grace@example.com',
        });
        return (to) => move(`/admin/v1/bookings/${booking.data.id}/transition`, { to });
      },
      'Payment status': async () => {
        const payment = await ctx.admin<{ data: { id: string } }>(
          'POST',
          `/admin/v1/bookings/${bookingId}/payments`,
          { mode: 'full', label: 'Balance', amountCents: 10_000, currency: 'EUR', kind: 'card' },
        );
        return (to) => move(`/admin/v1/payments/${payment.data.id}/transition`, { to });
      },
    };
    type Response = { statusCode: number; body: Record<string, unknown> };
    const move = async (path: string, body: object): Promise<Response> => {
      const response = await ctx.adminRequest('POST', path, body);
      return { statusCode: response.statusCode, body: response.json() };
    };

    for (const lifecycle of LIFECYCLES) {
      it(`${lifecycle.name}: each listed move is taken, every other is 409 with from and allowed`, async () => {
        const subject = subjects[lifecycle.name];
        assert.ok(subject, `no subject for ${lifecycle.name}`);
        const states = Object.keys(lifecycle.transitions);
        for (const [state, path] of pathsFromStart(lifecycle.transitions)) {
          const allowed = lifecycle.transitions[state];
          for (const to of states) {
            const moveTo = await subject();
            for (const step of path) assert.equal((await moveTo(step)).statusCode, 200, step);
            const answer = await moveTo(to);
            if (allowed.includes(to)) {
              assert.equal(answer.statusCode, 200, `${state} → ${to}: ${JSON.stringify(answer)}`);
              continue;
            }
            assert.equal(answer.statusCode, 409, `${state} → ${to}`);
            assert.equal(answer.body.code, 'invalid_transition');
            assert.equal(answer.body.from, state);
            assert.deepEqual(answer.body.allowed, allowed);
            assert.match(String(answer.body.detail), new RegExp(`from ${state} to ${to}`));
          }
        }
      });
    }
  });
}
