import { type Kysely, sql } from 'kysely';
import type { Database, Dialect } from './database.ts';
import * as m0001 from './migrations/0001_init.ts';
import * as m0002 from './migrations/0002_rate_limits.ts';
import * as m0003 from './migrations/0003_idempotency.ts';
import * as m0004 from './migrations/0004_rate_limits_unlogged.ts';
import * as m0005 from './migrations/0005_webhooks.ts';
import * as m0006 from './migrations/0006_delivery_queue_index.ts';
import * as m0007 from './migrations/0007_drop_events_dispatched_at.ts';
import * as m0008 from './migrations/0008_events_is_test.ts';
import * as m0009 from './migrations/0009_webhook_attempts.ts';
import * as m0010 from './migrations/0010_retention_indexes.ts';
import * as m0011 from './migrations/0011_partial_queue_indexes.ts';
import * as m0012 from './migrations/0012_instance_settings.ts';
import * as m0013 from './migrations/0013_deliveries_is_test.ts';
import * as m0014 from './migrations/0014_subscription_sequences.ts';
import * as m0015 from './migrations/0015_subscription_hold.ts';
import * as m0016 from './migrations/0016_attempt_retry_after.ts';
import * as m0017 from './migrations/0017_flow_control.ts';
import * as m0018 from './migrations/0018_subscription_rate_cap.ts';
import * as m0019 from './migrations/0019_per_object_ordering.ts';
import * as m0020 from './migrations/0020_portal_sessions.ts';
import * as m0021 from './migrations/0021_trace_context.ts';
import * as m0022 from './migrations/0022_delivery_engine.ts';
import * as m0023 from './migrations/0023_endpoints_heal.ts';
import * as m0024 from './migrations/0024_broker_destinations.ts';
import * as m0025 from './migrations/0025_worker_losses.ts';
import * as m0026 from './migrations/0026_payload_filters.ts';
import * as m0027 from './migrations/0027_receiver_auth.ts';
import * as m0028 from './migrations/0028_pace_margin.ts';
import * as m0029 from './migrations/0029_thin_payloads.ts';
import * as m0030 from './migrations/0030_erasures.ts';
import * as m0031 from './migrations/0031_transformations.ts';
import * as m0032 from './migrations/0032_delivery_queue.ts';

interface Migration {
  id: string;
  up(db: Kysely<unknown>, dialect: Dialect): Promise<void>;
}

/** Numbered, append-only. Each runs once, in order, inside the migration transaction. */
export const migrations: Migration[] = [
  { id: '0001_init', up: m0001.up },
  { id: '0002_rate_limits', up: m0002.up },
  { id: '0003_idempotency', up: m0003.up },
  { id: '0004_rate_limits_unlogged', up: m0004.up },
  { id: '0005_webhooks', up: m0005.up },
  { id: '0006_delivery_queue_index', up: m0006.up },
  { id: '0007_drop_events_dispatched_at', up: m0007.up },
  { id: '0008_events_is_test', up: m0008.up },
  { id: '0009_webhook_attempts', up: m0009.up },
  { id: '0010_retention_indexes', up: m0010.up },
  { id: '0011_partial_queue_indexes', up: m0011.up },
  { id: '0012_instance_settings', up: m0012.up },
  { id: '0013_deliveries_is_test', up: m0013.up },
  { id: '0014_subscription_sequences', up: m0014.up },
  { id: '0015_subscription_hold', up: m0015.up },
  { id: '0016_attempt_retry_after', up: m0016.up },
  { id: '0017_flow_control', up: m0017.up },
  { id: '0018_subscription_rate_cap', up: m0018.up },
  { id: '0019_per_object_ordering', up: m0019.up },
  { id: '0020_portal_sessions', up: m0020.up },
  { id: '0021_trace_context', up: m0021.up },
  { id: '0022_delivery_engine', up: m0022.up },
  { id: '0023_endpoints_heal', up: m0023.up },
  { id: '0024_broker_destinations', up: m0024.up },
  { id: '0025_worker_losses', up: m0025.up },
  { id: '0026_payload_filters', up: m0026.up },
  { id: '0027_receiver_auth', up: m0027.up },
  { id: '0028_pace_margin', up: m0028.up },
  { id: '0029_thin_payloads', up: m0029.up },
  { id: '0030_erasures', up: m0030.up },
  { id: '0031_transformations', up: m0031.up },
  { id: '0032_delivery_queue', up: m0032.up },
];

/** Arbitrary constant naming our advisory lock on PostgreSQL. */
const MIGRATION_LOCK_KEY = 727_001;

/**
 * Applies pending migrations in one transaction. Concurrent starters serialize on a lock taken
 * before anything is read (pg advisory lock; SQLite's BEGIN IMMEDIATE write lock), so the second
 * process sees the first one's work and applies nothing. Returns the ids applied.
 */
export async function migrate(database: Database): Promise<string[]> {
  return database.withTransaction(async () => {
    const db = database.db;
    if (database.dialect === 'postgres') {
      await sql`select pg_advisory_xact_lock(${MIGRATION_LOCK_KEY})`.execute(db);
    }
    await db.schema
      .createTable('schema_migrations')
      .ifNotExists()
      .addColumn('id', 'varchar(100)', (c) => c.primaryKey())
      .addColumn('applied_at', 'varchar(30)', (c) => c.notNull())
      .execute();
    const applied = new Set(
      (await db.selectFrom('schemaMigrations').select('id').execute()).map((row) => row.id),
    );
    const done: string[] = [];
    for (const migration of migrations) {
      if (applied.has(migration.id)) continue;
      await migration.up(db as unknown as Kysely<unknown>, database.dialect);
      await db
        .insertInto('schemaMigrations')
        .values({ id: migration.id, appliedAt: new Date().toISOString() })
        .execute();
      done.push(migration.id);
    }
    return done;
  });
}
