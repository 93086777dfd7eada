import type { Kysely } from 'kysely';

/**
 * Tracing: `events.trace_context`, the W3C `traceparent` of the span that created the event (null
 * when tracing is off), which each delivery attempt's span links to; and the subscription's
 * choice to receive the attempt's own `traceparent` (`propagate_trace_context`).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('events').addColumn('trace_context', 'varchar(512)').execute();
  await db.schema
    .alterTable('webhook_subscriptions')
    .addColumn('propagate_trace_context', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
}
