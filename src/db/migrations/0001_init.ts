import { type Kysely, sql } from 'kysely';
import type { Dialect } from '../database.ts';

/**
 * The service core's tables. Timestamps are ISO text in both backends (see schema.ts); every
 * tenant-owned table leads its indexes with tenant_id so keyset pages stay index-only walks.
 */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  const ts = 'varchar(30)';

  await db.schema
    .createTable('tenants')
    .addColumn('id', 'varchar(40)', (c) => c.primaryKey())
    .addColumn('name', 'varchar(200)', (c) => c.notNull())
    .addColumn('slug', 'varchar(100)', (c) => c.notNull().unique())
    .addColumn('tier', 'varchar(20)', (c) => c.notNull())
    .addColumn('active', 'integer', (c) => c.notNull().defaultTo(1))
    .addColumn('trip_quota', 'integer')
    .addColumn('webhook_endpoint_cap', 'integer')
    .addColumn('created_at', ts, (c) => c.notNull())
    .addColumn('updated_at', ts, (c) => c.notNull())
    .execute();

  await db.schema
    .createTable('members')
    .addColumn('id', 'varchar(40)', (c) => c.primaryKey())
    .addColumn('tenant_id', 'varchar(40)', (c) => c.notNull().references('tenants.id'))
    .addColumn('email', 'varchar(320)', (c) => c.notNull())
    .addColumn('role', 'varchar(20)', (c) => c.notNull())
    .addColumn('created_at', ts, (c) => c.notNull())
    .addUniqueConstraint('members_tenant_email_unique', ['tenant_id', 'email'])
    .execute();

  await db.schema
    .createTable('api_tokens')
    .addColumn('id', 'varchar(40)', (c) => c.primaryKey())
    .addColumn('tenant_id', 'varchar(40)', (c) => c.notNull().references('tenants.id'))
    .addColumn('name', 'varchar(200)')
    .addColumn('token_hash', 'varchar(64)', (c) => c.notNull().unique())
    .addColumn('prefix', 'varchar(20)', (c) => c.notNull())
    .addColumn('env', 'varchar(10)', (c) => c.notNull())
    .addColumn('scopes', 'text', (c) => c.notNull())
    .addColumn('created_by', 'varchar(40)')
    .addColumn('expires_at', ts)
    .addColumn('revoked_at', ts)
    .addColumn('last_used_at', ts)
    .addColumn('created_at', ts, (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('api_tokens_tenant_idx')
    .on('api_tokens')
    .columns(['tenant_id', 'id'])
    .execute();

  const library = (name: string) =>
    db.schema
      .createTable(name)
      .addColumn('id', 'varchar(40)', (c) => c.primaryKey())
      .addColumn('tenant_id', 'varchar(40)', (c) => c.notNull().references('tenants.id'))
      .addColumn('name', 'varchar(200)', (c) => c.notNull());
  await library('cities')
    .addColumn('country_iso', 'varchar(2)')
    .addColumn('created_at', ts, (c) => c.notNull())
    .addColumn('updated_at', ts, (c) => c.notNull())
    .execute();
  await library('hotels')
    .addColumn('city_id', 'varchar(40)')
    .addColumn('stars', 'integer')
    .addColumn('address', 'varchar(500)')
    .addColumn('created_at', ts, (c) => c.notNull())
    .addColumn('updated_at', ts, (c) => c.notNull())
    .execute();
  await library('activities')
    .addColumn('city_id', 'varchar(40)')
    .addColumn('duration_minutes', 'integer')
    .addColumn('description', 'text')
    .addColumn('created_at', ts, (c) => c.notNull())
    .addColumn('updated_at', ts, (c) => c.notNull())
    .execute();
  await library('vehicles')
    .addColumn('kind', 'varchar(40)')
    .addColumn('seats', 'integer')
    .addColumn('created_at', ts, (c) => c.notNull())
    .addColumn('updated_at', ts, (c) => c.notNull())
    .execute();
  await library('guides')
    .addColumn('languages', 'text', (c) => c.notNull())
    .addColumn('email', 'varchar(320)')
    .addColumn('phone', 'varchar(40)')
    .addColumn('created_at', ts, (c) => c.notNull())
    .addColumn('updated_at', ts, (c) => c.notNull())
    .execute();
  for (const table of ['cities', 'hotels', 'activities', 'vehicles', 'guides']) {
    await db.schema
      .createIndex(`${table}_tenant_idx`)
      .on(table)
      .columns(['tenant_id', 'id'])
      .execute();
  }
  for (const table of ['hotels', 'activities']) {
    await db.schema
      .createIndex(`${table}_tenant_city_idx`)
      .on(table)
      .columns(['tenant_id', 'city_id', 'id'])
      .execute();
  }

  await db.schema
    .createTable('clients')
    .addColumn('id', 'varchar(40)', (c) => c.primaryKey())
    .addColumn('tenant_id', 'varchar(40)', (c) => c.notNull().references('tenants.id'))
    .addColumn('kind', 'varchar(20)', (c) => c.notNull())
    .addColumn('display_name', 'varchar(200)', (c) => c.notNull())
    .addColumn('legal_name', 'varchar(200)')
    .addColumn('email', 'varchar(320)')
    .addColumn('phone', 'varchar(40)')
    .addColumn('country_iso', 'varchar(2)')
    .addColumn('language', 'varchar(20)')
    .addColumn('currency', 'varchar(3)')
    .addColumn('vat_id', 'varchar(40)')
    .addColumn('tags', 'text', (c) => c.notNull())
    .addColumn('notes', 'text')
    .addColumn('archived_at', ts)
    .addColumn('created_at', ts, (c) => c.notNull())
    .addColumn('updated_at', ts, (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('clients_tenant_idx')
    .on('clients')
    .columns(['tenant_id', 'id'])
    .execute();
  await db.schema
    .createIndex('clients_tenant_kind_idx')
    .on('clients')
    .columns(['tenant_id', 'kind', 'id'])
    .execute();

  await db.schema
    .createTable('trips')
    .addColumn('id', 'varchar(40)', (c) => c.primaryKey())
    .addColumn('tenant_id', 'varchar(40)', (c) => c.notNull().references('tenants.id'))
    .addColumn('trip_number', 'varchar(20)', (c) => c.notNull())
    .addColumn('title', 'varchar(200)', (c) => c.notNull())
    .addColumn('status', 'varchar(20)', (c) => c.notNull())
    .addColumn('trip_mode', 'varchar(20)', (c) => c.notNull())
    .addColumn('date_mode', 'varchar(20)', (c) => c.notNull())
    .addColumn('public_slug', 'varchar(240)')
    .addColumn('published_at', ts)
    .addColumn('unpublished_at', ts)
    .addColumn('start_date', ts)
    .addColumn('end_date', ts)
    .addColumn('days_count', 'integer', (c) => c.notNull())
    .addColumn('start_city_id', 'varchar(40)')
    .addColumn('end_city_id', 'varchar(40)')
    .addColumn('transport_mode', 'varchar(20)', (c) => c.notNull())
    .addColumn('pricing_display_mode', 'varchar(20)', (c) => c.notNull())
    .addColumn('short_description', 'varchar(500)')
    .addColumn('long_description', 'text')
    .addColumn('client_id', 'varchar(40)')
    .addColumn('notes', 'text')
    .addColumn('version', 'integer', (c) => c.notNull())
    .addColumn('created_by', 'varchar(40)')
    .addColumn('created_at', ts, (c) => c.notNull())
    .addColumn('updated_at', ts, (c) => c.notNull())
    .addUniqueConstraint('trips_tenant_number_unique', ['tenant_id', 'trip_number'])
    .execute();
  await db.schema
    .createIndex('trips_tenant_idx')
    .on('trips')
    .columns(['tenant_id', 'id'])
    .execute();
  await db.schema
    .createIndex('trips_tenant_status_idx')
    .on('trips')
    .columns(['tenant_id', 'status', 'id'])
    .execute();
  await db.schema
    .createIndex('trips_tenant_published_idx')
    .on('trips')
    .columns(['tenant_id', 'published_at'])
    .execute();
  await db.schema.createIndex('trips_public_slug_idx').on('trips').column('public_slug').execute();

  await db.schema
    .createTable('bookings')
    .addColumn('id', 'varchar(40)', (c) => c.primaryKey())
    .addColumn('tenant_id', 'varchar(40)', (c) => c.notNull().references('tenants.id'))
    .addColumn('booking_number', 'varchar(20)', (c) => c.notNull())
    .addColumn('trip_id', 'varchar(40)', (c) => c.notNull().references('trips.id'))
    .addColumn('trip_version', 'integer', (c) => c.notNull())
    .addColumn('trip_snapshot', 'text', (c) => c.notNull())
    .addColumn('status', 'varchar(20)', (c) => c.notNull())
    .addColumn('total_retail_cents', 'integer', (c) => c.notNull())
    .addColumn('application_fee_cents', 'integer', (c) => c.notNull())
    .addColumn('currency', 'varchar(3)', (c) => c.notNull())
    .addColumn('traveler_name', 'varchar(200)')
    .addColumn('traveler_email', 'varchar(320)')
    .addColumn('confirmed_at', ts)
    .addColumn('cancelled_at', ts)
    .addColumn('departure_id', 'varchar(100)')
    .addColumn('departure_start_date', ts)
    .addColumn('departure_end_date', ts)
    .addColumn('created_at', ts, (c) => c.notNull())
    .addColumn('updated_at', ts, (c) => c.notNull())
    .addUniqueConstraint('bookings_tenant_number_unique', ['tenant_id', 'booking_number'])
    .execute();
  await db.schema
    .createIndex('bookings_tenant_idx')
    .on('bookings')
    .columns(['tenant_id', 'id'])
    .execute();
  await db.schema
    .createIndex('bookings_tenant_status_idx')
    .on('bookings')
    .columns(['tenant_id', 'status', 'id'])
    .execute();
  await db.schema
    .createIndex('bookings_tenant_trip_idx')
    .on('bookings')
    .columns(['tenant_id', 'trip_id', 'id'])
    .execute();

  await db.schema
    .createTable('payments')
    .addColumn('id', 'varchar(40)', (c) => c.primaryKey())
    .addColumn('tenant_id', 'varchar(40)', (c) => c.notNull().references('tenants.id'))
    .addColumn('booking_id', 'varchar(40)', (c) => c.notNull().references('bookings.id'))
    .addColumn('mode', 'varchar(20)', (c) => c.notNull())
    .addColumn('status', 'varchar(20)', (c) => c.notNull())
    .addColumn('label', 'varchar(200)', (c) => c.notNull())
    .addColumn('amount_cents', 'integer', (c) => c.notNull())
    .addColumn('currency', 'varchar(3)', (c) => c.notNull())
    .addColumn('scheduled_for', ts)
    .addColumn('charged_at', ts)
    .addColumn('is_deposit', 'integer', (c) => c.notNull())
    .addColumn('payment_rail', 'varchar(40)')
    .addColumn('kind', 'varchar(40)', (c) => c.notNull())
    .addColumn('created_at', ts, (c) => c.notNull())
    .addColumn('updated_at', ts, (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('payments_tenant_idx')
    .on('payments')
    .columns(['tenant_id', 'id'])
    .execute();
  await db.schema
    .createIndex('payments_tenant_booking_idx')
    .on('payments')
    .columns(['tenant_id', 'booking_id', 'id'])
    .execute();
  await db.schema
    .createIndex('payments_tenant_status_idx')
    .on('payments')
    .columns(['tenant_id', 'status', 'id'])
    .execute();

  await db.schema
    .createTable('events')
    .addColumn('seq', dialect === 'postgres' ? sql`bigserial` : 'integer', (c) =>
      dialect === 'postgres' ? c.primaryKey() : c.primaryKey().autoIncrement(),
    )
    .addColumn('id', 'varchar(36)', (c) => c.notNull().unique())
    .addColumn('tenant_id', 'varchar(40)', (c) => c.notNull().references('tenants.id'))
    .addColumn('type', 'varchar(40)', (c) => c.notNull())
    .addColumn('data', 'text', (c) => c.notNull())
    .addColumn('created_at', ts, (c) => c.notNull())
    .addColumn('dispatched_at', ts)
    .execute();
  await db.schema
    .createIndex('events_tenant_idx')
    .on('events')
    .columns(['tenant_id', 'seq'])
    .execute();

  await db.schema
    .createTable('notifications')
    .addColumn('id', 'varchar(40)', (c) => c.primaryKey())
    .addColumn('tenant_id', 'varchar(40)', (c) => c.notNull().references('tenants.id'))
    .addColumn('member_id', 'varchar(40)')
    .addColumn('recipient', 'varchar(320)', (c) => c.notNull())
    .addColumn('kind', 'varchar(40)', (c) => c.notNull())
    .addColumn('subscription_id', 'varchar(40)')
    .addColumn('created_at', ts, (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('notifications_tenant_idx')
    .on('notifications')
    .columns(['tenant_id', 'id'])
    .execute();
}
