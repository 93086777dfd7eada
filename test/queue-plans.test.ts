import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { CompiledQuery, sql } from 'kysely';
import { DELIVERY_STATUS } from '../src/domain/webhook-moves.ts';
import { BACKENDS, createTestContext, type TestContext } from './helpers/context.ts';
import {
  createClient,
  createSubscription,
  createTenant,
  type TenantFixture,
} from './helpers/fixtures.ts';

// The queue's statements reach the tables that keep every delivery, event and attempt by an
// index, never by walking them: a walk costs a claim the table's whole history. The planner
// weighs a walk against the index by the table's size, so the plans are read with a history
// large enough for a walk to look cheap, as it did for the claimed rows' read on PostgreSQL.

/** Tables that grow with history, and the queue, which grows with a backlog. */
const GROWING = new Set(['webhook_deliveries', 'events', 'webhook_attempts', 'webhook_queue']);
const HISTORY = 3_000;
/** Queued, due later. */
const BACKLOG = 3_000;
const DUE = 64;

/** The `i`-th copy of a row's id, as long as the id. */
const copyId = (id: string, i: number) => `${id.slice(0, -6)}z${String(i).padStart(5, '0')}`;

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  Plans?: PlanNode[];
}

/** The tables a PostgreSQL plan walks whole (Seq Scan nodes), by name. */
function walkedPostgres(node: PlanNode): string[] {
  const own =
    node['Node Type'] === 'Seq Scan' && node['Relation Name'] ? [node['Relation Name']] : [];
  return [...own, ...(node.Plans ?? []).flatMap(walkedPostgres)];
}

/**
 * The tables an SQLite plan walks whole: `SCAN <alias>` without an index, the alias resolved by
 * the statement's own FROM, JOIN and UPDATE clauses.
 */
function walkedSqlite(details: string[], text: string): string[] {
  const tables = new Map<string, string>();
  for (const m of text.matchAll(
    /\b(?:from|join|update)\s+"?(\w+)"?(?:\s+(?:as\s+)?"?(\w+)"?)?/gi,
  )) {
    tables.set(m[1], m[1]);
    if (m[2] !== undefined) tables.set(m[2], m[1]);
  }
  assert.ok(details.length > 0, `no plan for ${text}`);
  return details.flatMap((detail) => {
    const m = /^SCAN (\w+)$/.exec(detail);
    return m !== null && tables.has(m[1]) ? [tables.get(m[1]) as string] : [];
  });
}

/** The growing tables a statement's plan walks whole, on the context's backend. */
async function walkedBy(ctx: TestContext, statement: CompiledQuery): Promise<string[]> {
  const explain = (prefix: string) =>
    ctx.runtime.database.db.executeQuery<Record<string, unknown>>(
      CompiledQuery.raw(`${prefix} ${statement.sql}`, [...statement.parameters]),
    );
  const walked =
    ctx.backend === 'postgres'
      ? walkedPostgres(
          (
            (await explain('explain (format json)')).rows[0]['QUERY PLAN'] as { Plan: PlanNode }[]
          )[0].Plan,
        )
      : walkedSqlite(
          (await explain('explain query plan')).rows.map((row) => String(row.detail)),
          statement.sql,
        );
  return walked.filter((table) => GROWING.has(table));
}

for (const backend of BACKENDS) {
  describe(`the queue's statements read history by index (${backend})`, () => {
    let ctx: TestContext;
    let tenant: TenantFixture;

    before(async () => {
      ctx = await createTestContext(backend, { env: { WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true' } });
      tenant = await createTenant(ctx, { tier: 'pro' });
      // No worker runs in this suite.
      await createSubscription(ctx, tenant, 'https://127.0.0.1:9/plans');
      // One delivery made as the product makes it, then copies of it and its event: HISTORY
      // delivered, BACKLOG due tomorrow, DUE pending.
      await createClient(ctx, tenant, { displayName: 'Plan' });
      const db = ctx.runtime.database.db;
      const { seq: _seq, ...event } = await db
        .selectFrom('events')
        .selectAll()
        .executeTakeFirstOrThrow();
      const delivery = await db
        .selectFrom('webhookDeliveries')
        .selectAll()
        .executeTakeFirstOrThrow();
      const now = new Date().toISOString();
      const tomorrow = new Date(Date.now() + 86_400_000).toISOString();
      const all = HISTORY + BACKLOG + DUE;
      for (let from = 0; from < all; from += 500) {
        const batch = Array.from({ length: Math.min(500, all - from) }, (_, k) => from + k);
        await db
          .insertInto('events')
          .values(batch.map((i) => ({ ...event, id: copyId(event.id, i) })))
          .execute();
        await db
          .insertInto('webhookDeliveries')
          .values(
            batch.map((i) => ({
              ...delivery,
              id: copyId(delivery.id, i),
              eventId: copyId(event.id, i),
              sequence: (delivery.sequence ?? 0) + 1 + i,
              ...(i < HISTORY
                ? { status: DELIVERY_STATUS.success, deliveredAt: now, nextAttemptAt: null }
                : i < HISTORY + BACKLOG
                  ? { nextAttemptAt: tomorrow }
                  : {}),
            })),
          )
          .execute();
      }
      await sql`analyze`.execute(db);
    });
    after(() => ctx.close());

    it('claims, reads what it claimed, records and locks without walking a history table', async () => {
      const { database, queue } = ctx.runtime;
      const db = database.db;
      const statements: CompiledQuery[] = [];
      const execute = db.executeQuery.bind(db);
      db.executeQuery = (async (query: CompiledQuery) => {
        statements.push(query);
        return execute(query);
      }) as typeof db.executeQuery;
      try {
        const now = new Date();
        const claimed = await queue.claim(now, DUE, {
          workerId: 'wkr_plans',
          aliveSince: new Date(now.getTime() - 60_000).toISOString(),
          staleBefore: new Date(now.getTime() - 600_000).toISOString(),
          rowsPerSubscription: DUE,
          paceHorizonUs: 500_000,
        });
        assert.ok(claimed.length > 0, 'the due rows were claimed');
        const at = new Date().toISOString();
        // One claim given back, the others settled.
        const [back, ...settled] = claimed;
        await database.withTransaction(() =>
          queue.record({
            givenBack: [{ id: back.id, claimedAt: back.claimedAt, nextAttemptAt: at }],
            outcomes: settled.map((d) => ({
              id: d.id,
              claimedAt: d.claimedAt,
              status: DELIVERY_STATUS.success,
              attempts: d.attempts,
              lastResponseStatus: 200,
              lastError: null,
              nextAttemptAt: null,
              deliveredAt: at,
            })),
            attempts: settled.map((d) => ({
              id: `att_plan${d.id}`,
              tenantId: d.tenantId,
              deliveryId: d.id,
              attempt: d.attempts,
              startedAt: at,
              durationMs: 1,
              status: 200,
              errorClass: null,
              responseBody: '',
              retryAfter: null,
              concurrencyLimit: DUE,
              cancelled: false,
            })),
            subscriptionIds: [...new Set(settled.map((d) => d.subscriptionId))],
          }),
        );
      } finally {
        db.executeQuery = execute;
      }

      const read = statements.filter((s) => /^\s*(with|select|update|insert)\b/i.test(s.sql));
      // The claim, the claimed rows' read, the give-back, the outcomes, the attempts and the
      // subscriptions' lock: the statements the queue compiles once (see prepare), which it runs
      // through executeQuery.
      // PostgreSQL claims and reads in one statement; SQLite claims, then reads.
      const claimAndRead = ctx.backend === 'postgres' ? 1 : 2;
      assert.equal(read.length, claimAndRead + 4, read.map((s) => s.sql).join('\n'));
      for (const statement of read) {
        assert.deepEqual(await walkedBy(ctx, statement), [], statement.sql);
      }
    });
  });
}
