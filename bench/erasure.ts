/**
 * The erasure row of `npm run bench`: another tenant's authenticated single read while the worker
 * erases one client from a tenant's history of 100,000 client events, beside the same read
 * without an erasure.
 *
 * The windows are bench/beside-job.ts's ("during" opens with the erasure's request and closes
 * when its record says done: the worker's first look for it, on its timer, is inside), on a
 * database with two tenants: the reader's (1,000 trips) and the erased client's, whose events
 * are written by the database itself over the ten days before the run, a quarter of them about
 * that client, each of those delivered once with an attempt log that echoes the client's e-mail.
 */
import { type RawBuilder, sql } from 'kysely';
import pino from 'pino';
import { loadConfig } from '../src/config.ts';
import type { ErasureCounts } from '../src/domain/erasure.ts';
import { createRuntime } from '../src/runtime.ts';
import { idAt, iso, runSeed, series, text } from '../test/helpers/retention-seed.ts';
import { analyze, type BesideJobOptions, readsBesideJob, secondsSince } from './beside-job.ts';
import type { Measurement } from './measure.ts';
import { seedTenant } from './seed.ts';

export interface ErasureBenchResult {
  backend: string;
  events: number;
  /** From the erasure's request to its end, as its record says (the worker's first look included). */
  erasureMs: number;
  redacted: ErasureCounts;
  without: Measurement;
  during: Measurement;
}

export interface ErasureBenchOptions extends BesideJobOptions {
  /** Client events of the erased client's tenant (a multiple of 40). */
  events: number;
}

const DAY_MS = 86_400_000;
/** The history is written in this many statements, a day apart. */
const DAYS = 10;
/** The erasure window's bound: far past what 100k events take on either backend. */
const ERASURE_LIMIT_SEC = 300;
const ERASED = {
  kind: 'individual' as const,
  displayName: 'Ana Bench-Erased',
  legalName: 'Ana Maria Bench-Erased',
  email: 'ana.bench-erased@example.test',
  phone: '+351 912 000 111',
  notes: 'Prefers aisle seats',
};

export async function benchErasure(options: ErasureBenchOptions): Promise<ErasureBenchResult> {
  const { backend, log } = options;
  const reader = await seedTenant(options.dbEnv, 1_000);
  const owner = await seedTenant(options.dbEnv, 1, 'erasure');
  const seeding = performance.now();
  const runtime = await createRuntime(
    loadConfig({ ...options.dbEnv, LOG_LEVEL: 'silent', WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true' }),
    { logger: pino({ level: 'silent' }) },
  );
  let clientId: string;
  try {
    const client = await runtime.services.clients.create(owner.tenantId, ERASED);
    clientId = client.id;
    // Never called: every seeded delivery is settled, and no event is emitted to it.
    const { subscription } = await runtime.services.webhooks.create(owner.tenantId, {
      url: 'https://127.0.0.1:9/never',
      events: ['client.updated'],
    });
    await runSeed(
      runtime.database.db,
      history(owner.tenantId, client, subscription.id, options.events, Date.now()),
    );
    await analyze(runtime.database);
  } finally {
    await runtime.close();
  }
  log(`${backend}: erasure: seeded ${options.events} events in ${secondsSince(seeding)}`);

  const { job: erasure, ...windows } = await readsBesideJob(options, {
    row: 'erasure',
    what: 'an erasure',
    reader,
    limitSec: ERASURE_LIMIT_SEC,
    run: async (server, limitMs) => {
      const api = (path: string, init: RequestInit = {}) =>
        fetch(`${server.baseUrl}${path}`, {
          ...init,
          headers: { authorization: `Bearer ${owner.token}`, 'content-type': 'application/json' },
        }).then(async (response) => {
          if (!response.ok) throw new Error(`${path}: ${response.status} ${await response.text()}`);
          return ((await response.json()) as { data: ErasureRecord }).data;
        });
      const created = await api('/api/v1/erasures', {
        method: 'POST',
        body: JSON.stringify({ clientId }),
      });
      const record = () => api(`/api/v1/erasures/${created.id}`);
      const done = await poll(record, (erasure) => erasure.status === 'done', limitMs);
      // The seeded quarter, and the client's own creation.
      if (done.redacted.events !== options.events / 4 + 1) {
        throw new Error(`the erasure redacted ${done.redacted.events} events`);
      }
      return done;
    },
    describe: (done) => `${erasureMs(done)} ms`,
  });
  return {
    backend,
    events: options.events,
    erasureMs: erasureMs(erasure),
    redacted: erasure.redacted,
    ...windows,
  };
}

const erasureMs = (erasure: ErasureRecord) =>
  Date.parse(erasure.completedAt as string) - Date.parse(erasure.requestedAt);

interface ErasureRecord {
  id: string;
  status: string;
  requestedAt: string;
  completedAt: string | null;
  redacted: ErasureCounts;
}

/**
 * The erased client's tenant's history: `events` client events over the ten days before `now`,
 * every fourth about the erased client (its object, and an e-mail change), the others about
 * clients that are not; each of the erased client's delivered once, with an attempt log whose
 * answer echoes the e-mail.
 */
function history(
  tenantId: string,
  client: { id: string; email: string | null },
  subscriptionId: string,
  events: number,
  now: number,
): RawBuilder<unknown>[] {
  const about = (clientId: string, email: string) =>
    JSON.stringify({
      clientId,
      displayName: ERASED.displayName,
      object: { ...client, id: clientId, email },
      changes: { email: { before: 'ana.old@example.test', after: email } },
    });
  const mine = about(client.id, ERASED.email);
  // Another client's event, its id and e-mail made unique per row below.
  const other = about('cli_OTHER', 'someone-OTHER@example.test');
  const echo = JSON.stringify({ received: { email: ERASED.email } });
  const perDay = events / DAYS;
  const statements: RawBuilder<unknown>[] = [];
  for (let day = 0; day < DAYS; day++) {
    const ms = now - (DAYS - day) * DAY_MS;
    const from = day * perDay + 1;
    statements.push(
      sql`${series(perDay, from)}
        insert into events (id, tenant_id, type, data, is_test, created_at)
        select 'evt-era-' || cast(i as text), ${text(tenantId)}, 'client.updated',
          case when i % 4 = 0 then cast(${mine} as text)
            else replace(cast(${other} as text), 'OTHER', cast(i as text)) end,
          0, ${text(iso(ms))} from n`,
      sql`${series(perDay, from)}
        insert into webhook_deliveries (id, tenant_id, subscription_id, event_id, event_type, status, attempts, created_at)
        select ${idAt('dlv', ms, 7)}, ${text(tenantId)}, ${text(subscriptionId)},
          'evt-era-' || cast(i as text), 'client.updated', 'success', 1, ${text(iso(ms))}
        from n where i % 4 = 0`,
      sql`${series(perDay, from)}
        insert into webhook_attempts (id, tenant_id, delivery_id, attempt, started_at, duration_ms, status, response_body)
        select ${idAt('att', ms, 7)}, ${text(tenantId)}, ${idAt('dlv', ms, 7)}, 1,
          ${text(iso(ms))}, 12, 200, cast(${echo} as text)
        from n where i % 4 = 0`,
    );
  }
  return statements;
}

async function poll<T>(read: () => Promise<T>, done: (value: T) => boolean, limitMs: number) {
  const end = performance.now() + limitMs;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (performance.now() > end) throw new Error(`not settled in ${limitMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
