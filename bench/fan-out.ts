/**
 * The fan-out row of `npm run bench -- --only deliveries`: what payload filters add to emitting.
 * One tenant with FAN_OUT subscriptions to `client.created`; events are emitted through the
 * events service in this process (no worker runs), one transaction each, as a write route does.
 * Two modes, interleaved round by round: no filters, and a filter on every subscription (each its
 * own text, so each compiles its own matcher) that takes every event, so both write the same
 * deliveries and the difference is the filters' own cost.
 */

import { backlogEvent, silentRuntime } from './deliveries.ts';
import { median } from './measure.ts';

const FAN_OUT = 100;

export interface FanOutOptions {
  backend: string;
  /** DATA_DIR, or DATABASE_URL + SECRET_KEY + DATA_DIR, of an empty database. */
  dbEnv: Record<string, string>;
  /** Events emitted per run and mode. */
  events: number;
  rounds: number;
  log(message: string): void;
}

interface FanOutMode {
  /** Median over the rounds: wall time, and this process's CPU time, per event emitted. */
  usPerEvent: number;
  cpuUsPerEvent: number;
  runs: number[];
}

export interface FanOutResult {
  backend: string;
  subscriptions: number;
  events: number;
  without: FanOutMode;
  withFilters: FanOutMode;
}

/** A filter of five conditions that takes every event the bench emits; `i` makes it unique. */
function takingFilter(i: number) {
  return {
    type: 'client.created',
    'data.kind': { $in: ['individual', 'company'] },
    'data.displayName': { $prefix: 'Fan-out client' },
    'data.clientId': { $exists: true },
    $or: [{ 'data.displayName': { $neq: `never ${i}` } }],
  };
}

export async function benchFanOut(options: FanOutOptions): Promise<FanOutResult> {
  const runtime = await silentRuntime(options.dbEnv);
  try {
    const { services, database, repositories } = runtime;
    const tenant = await services.tenants.create({
      name: 'Bench Fan-out',
      slug: 'bench-fan-out',
      tier: 'enterprise',
    });
    const ids: string[] = [];
    for (let i = 0; i < FAN_OUT; i++) {
      // Port 9: nothing listens, and no worker runs here to try.
      const { subscription } = await services.webhooks.create(tenant.id, {
        url: `https://127.0.0.1:9/fan-out/${i}`,
        events: ['client.created'],
      });
      ids.push(subscription.id);
    }
    const setFilters = async (on: boolean) => {
      for (const [i, id] of ids.entries()) {
        await repositories.webhooks.updateSubscription(tenant.id, id, {
          filter: on ? JSON.stringify(takingFilter(i)) : null,
        });
      }
    };
    let emitted = 0;
    const run = async (): Promise<{ us: number; cpuUs: number }> => {
      const cpu = process.cpuUsage();
      const started = performance.now();
      for (let i = 0; i < options.events; i++) {
        emitted += 1;
        await database.withTransaction(() =>
          services.events.emit(
            tenant.id,
            'client.created',
            backlogEvent(emitted, emitted % 2 === 0 ? 'company' : 'individual', 'Fan-out client'),
          ),
        );
      }
      const us = ((performance.now() - started) * 1000) / options.events;
      const used = process.cpuUsage(cpu);
      return { us, cpuUs: (used.user + used.system) / options.events };
    };
    // A warm-up of each mode: compiled matchers, prepared statements, the JIT.
    await setFilters(true);
    await run();
    await setFilters(false);
    await run();
    const without: Array<{ us: number; cpuUs: number }> = [];
    const withFilters: Array<{ us: number; cpuUs: number }> = [];
    for (let round = 0; round < options.rounds; round++) {
      // Alternate which goes first, so the growing tables weigh on both alike.
      for (const on of round % 2 === 0 ? [false, true] : [true, false]) {
        await setFilters(on);
        (on ? withFilters : without).push(await run());
      }
    }
    const mode = (runs: Array<{ us: number; cpuUs: number }>): FanOutMode => ({
      usPerEvent: median(runs.map((r) => r.us)),
      cpuUsPerEvent: median(runs.map((r) => r.cpuUs)),
      runs: runs.map((r) => r.us),
    });
    const result = {
      backend: options.backend,
      subscriptions: FAN_OUT,
      events: options.events,
      without: mode(without),
      withFilters: mode(withFilters),
    };
    options.log(
      `${options.backend}: fan-out to ${FAN_OUT}: ${result.without.usPerEvent.toFixed(0)} µs an event ` +
        `without filters, ${result.withFilters.usPerEvent.toFixed(0)} µs with`,
    );
    return result;
  } finally {
    await runtime.close();
  }
}
