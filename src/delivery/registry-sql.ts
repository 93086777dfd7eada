import { Repository } from '../repositories/repository.ts';

/**
 * The worker registry's statements (webhook_workers): who is alive, by heartbeat. The queue's
 * claims read it to tell an abandoned claim from a live one (see `abandoned` in claim-sql.ts).
 */
export class RegistryStatements extends Repository {
  /** How many workers other than `id` beat since `aliveSince`. */
  async otherLiveWorkers(id: string, aliveSince: string): Promise<number> {
    const row = await this.db
      .selectFrom('webhookWorkers')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('id', '<>', id)
      .where('heartbeatAt', '>=', aliveSince)
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }

  /** Registers a worker, beating now. */
  async joinWorker(id: string, now: string): Promise<void> {
    await this.db
      .insertInto('webhookWorkers')
      .values({ id, startedAt: now, heartbeatAt: now })
      .onConflict((conflict) => conflict.column('id').doUpdateSet({ heartbeatAt: now }))
      .execute();
  }

  /** A worker's heartbeat; false when its row is gone (taken for dead: it joins again). */
  async heartbeat(id: string, now: string): Promise<boolean> {
    const result = await this.db
      .updateTable('webhookWorkers')
      .set({ heartbeatAt: now })
      .where('id', '=', id)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }

  /** A worker that stopped, or workers silent since `before` (their claims were taken over). */
  async forgetWorkers(filter: { id: string } | { before: string }): Promise<void> {
    let query = this.db.deleteFrom('webhookWorkers');
    query =
      'id' in filter
        ? query.where('id', '=', filter.id)
        : query.where('heartbeatAt', '<', filter.before);
    await query.execute();
  }
}
