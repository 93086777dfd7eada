import type { Kysely } from 'kysely';

/**
 * `webhook_pacing.margin_us`: how late past its slot a start of the capped subscription may be
 * beside other workers, and so how far apart its slots lie (`(1 s + margin) / maxPerSecond`). It
 * starts at 20 ms; a start later than that raises it (`raised_at_us`), so that workers whose event
 * loops lag keep sending instead of giving every slot back, and it halves again, with a gap that
 * keeps the bound, once no start has raised it for a minute.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('webhook_pacing')
    .addColumn('margin_us', 'bigint', (c) => c.notNull().defaultTo(20_000))
    .execute();
  await db.schema
    .alterTable('webhook_pacing')
    .addColumn('raised_at_us', 'bigint', (c) => c.notNull().defaultTo(0))
    .execute();
}
