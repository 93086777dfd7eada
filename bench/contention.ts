/**
 * The contention rows of `npm run bench`: many clients of one tenant writing at once, and one
 * tenant's reads beside two tenants' writes and the delivery worker, on one API process (what
 * `npm start` runs, worker included).
 *
 * - Keyed creates: `POST /api/v1/trips` at 32 connections, one tenant, each request with a fresh
 *   Idempotency-Key, against the same creates without keys, windows interleaved. Every answer
 *   must be a 201: a deadlock, a 503 or a lock convoy shows up as errors or as the ratio.
 * - Mixed: tenant A's single-trip reads at a fixed rate, while tenants A and B each create clients
 *   with fresh keys at a fixed rate of their own (every create an event the worker delivers to a
 *   receiver on 127.0.0.1); open loop all three, latency from the scheduled time, so the row is
 *   what the writes and the worker do to the reads, not a saturated machine. Its figure is the
 *   reads' p99.
 */
import { randomUUID } from 'node:crypto';
import pino from 'pino';
import { loadConfig } from '../src/config.ts';
import { createRuntime } from '../src/runtime.ts';
import { testCa } from '../test/helpers/https-receiver.ts';
import { Receiver, webhookServerEnv } from './deliveries.ts';
import { combine, type Measurement, runOpenLoopWindow, runWindow, type Window } from './measure.ts';
import {
  checkProbe,
  createClientProbe,
  expectJson,
  type Probe,
  singleTripProbe,
  UNLIMITED_RATES,
} from './probes.ts';
import { type ServerProcess, startServer } from './processes.ts';
import { type SeededTenant, seedTenant } from './seed.ts';

/** Clients of one tenant writing at once (issue 23). */
export const CONTENTION_CONNECTIONS = 32;
/** The mixed row's reads, and each tenant's keyed creates, a second. */
export const MIXED_READ_RATE = 250;
export const MIXED_WRITE_RATE = 50;

export interface ContentionOptions {
  backend: string;
  dbEnv: Record<string, string>;
  logLevel: string;
  rounds: number;
  warmupSec: number;
  durationSec: number;
  dbProcessName?: string;
  log: (message: string) => void;
  track: (server: ServerProcess, live: boolean) => void;
}

export interface ContentionResult {
  backend: string;
  plain: Measurement;
  keyed: Measurement;
  reads: Measurement;
  /** Tenant A's and tenant B's keyed creates during the mixed window. */
  writers: Measurement[];
  /** Deliveries the receiver got during the mixed window. */
  delivered: number;
}

function createTripProbe(tenant: SeededTenant, keyed: boolean): Probe {
  const [start, end] = tenant.cityIds;
  return {
    label: `POST /api/v1/trips, ${CONTENTION_CONNECTIONS} connections, one tenant, ${keyed ? 'unique Idempotency-Key' : 'no Idempotency-Key'}`,
    method: 'POST',
    path: '/api/v1/trips',
    headers: { authorization: `Bearer ${tenant.token}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      title: 'Contention',
      startDate: '2027-04-01',
      daysCount: 3,
      startCityId: start,
      endCityId: end,
    }),
    perRequestHeaders: keyed ? () => ({ 'idempotency-key': randomUUID() }) : undefined,
    check: expectJson((json) => ((json.data as { id?: string })?.id ? null : 'no trip'), 201),
  };
}

export async function benchContention(options: ContentionOptions): Promise<ContentionResult> {
  const { backend, log } = options;
  const ca = await testCa();
  const receiver = await Receiver.start(ca.key, ca.cert);
  const serverEnv = {
    ...webhookServerEnv(options.dbEnv, options.logLevel, ca.caFile),
    ...UNLIMITED_RATES,
  };
  let server: ServerProcess | null = null;
  try {
    const a = await seedTenant(options.dbEnv, 1_000, 'bench-a');
    const b = await seedTenant(options.dbEnv, 10, 'bench-b');
    // Every client either tenant creates is an event for the worker to deliver.
    const config = loadConfig({ ...serverEnv, LOG_LEVEL: 'silent' });
    const runtime = await createRuntime(config, { logger: pino({ level: 'silent' }) });
    try {
      for (const tenant of [a, b]) {
        await runtime.services.webhooks.create(tenant.tenantId, {
          url: receiver.url(`/${tenant.tenantId}`),
          events: ['client.created'],
        });
      }
    } finally {
      await runtime.close();
    }
    server = await startServer({
      name: `api-${backend}-contention`,
      entry: 'src/main.ts',
      env: serverEnv,
    });
    options.track(server, true);
    const api = server;

    // Keyed creates against unkeyed ones, interleaved window by window.
    const probes = [createTripProbe(a, false), createTripProbe(a, true)];
    for (const probe of probes) await checkProbe(api.baseUrl, probe);
    const windows: Window[][] = [[], []];
    for (let round = 0; round < options.rounds; round++) {
      for (const [i, probe] of probes.entries()) {
        const window = await runWindow(
          api,
          {
            url: `${api.baseUrl}${probe.path}`,
            method: probe.method,
            headers: probe.headers,
            body: probe.body,
            perRequestHeaders: probe.perRequestHeaders,
            connections: CONTENTION_CONNECTIONS,
            warmupSec: round === 0 ? options.warmupSec : Math.min(2, options.warmupSec),
            durationSec: options.durationSec / options.rounds,
          },
          { dbProcessName: options.dbProcessName },
        );
        log(`  ${probe.label}: ${Math.round(window.requests / window.wallSec)} req/s`);
        windows[i].push(window);
      }
    }
    const [plain, keyed] = probes.map((probe, i) =>
      combine(probe.label, backend, `${api.baseUrl}${probe.path}`, windows[i]),
    );

    // The mixed window: reads at a fixed rate beside two tenants' keyed writes and the worker.
    const read = singleTripProbe(a);
    const writes = [a, b].map((tenant) => createClientProbe(tenant, true));
    for (const probe of [read, ...writes]) await checkProbe(api.baseUrl, probe);
    receiver.reset();
    log(`  mixed: reads at ${MIXED_READ_RATE}/s beside two tenants' keyed writes and the worker`);
    const openLoop = (probe: Probe, rate: number) =>
      runOpenLoopWindow(
        api,
        {
          url: `${api.baseUrl}${probe.path}`,
          method: probe.method,
          headers: probe.headers,
          body: probe.body,
          idempotencyKeys: probe.perRequestHeaders !== undefined,
          connections: CONTENTION_CONNECTIONS,
          rate,
          warmupSec: options.warmupSec,
          durationSec: options.durationSec,
        },
        { dbProcessName: options.dbProcessName },
      );
    const [readWindow, ...writeWindows] = await Promise.all([
      openLoop(read, MIXED_READ_RATE),
      ...writes.map((probe) => openLoop(probe, MIXED_WRITE_RATE)),
    ]);
    const reads = combine(
      `${read.label}, open loop at ${MIXED_READ_RATE} req/s, beside keyed writes of two tenants and the worker`,
      backend,
      `${api.baseUrl}${read.path}`,
      [readWindow],
    );
    const writers = writeWindows.map((window, i) =>
      combine(
        `${writes[i].label}, tenant ${i === 0 ? 'A' : 'B'}, open loop at ${MIXED_WRITE_RATE} req/s, beside the reads`,
        backend,
        `${api.baseUrl}${writes[i].path}`,
        [window],
      ),
    );
    return { backend, plain, keyed, reads, writers, delivered: receiver.arrivals.length };
  } finally {
    if (server) {
      options.track(server, false);
      await server.stop();
    }
    await receiver.close();
  }
}
