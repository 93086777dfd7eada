import { Repository } from './repository.ts';

/** Values about the installation itself, by name (not a tenant's: no tenant id). */
export class InstanceSettingsRepository extends Repository {
  async get(name: string): Promise<string | undefined> {
    const row = await this.db
      .selectFrom('instanceSettings')
      .select('value')
      .where('name', '=', name)
      .executeTakeFirst();
    return row?.value;
  }

  /** Writes the value unless one is there already (two processes starting at once). */
  async insertIfAbsent(name: string, value: string): Promise<void> {
    await this.db
      .insertInto('instanceSettings')
      .values({ name, value })
      .onConflict((oc) => oc.column('name').doNothing())
      .execute();
  }
}
