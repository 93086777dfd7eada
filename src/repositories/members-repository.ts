import type { Insertable, Selectable } from 'kysely';
import type { MembersTable } from '../db/schema.ts';
import { Repository } from './repository.ts';

export type MemberRow = Selectable<MembersTable>;

export class MembersRepository extends Repository {
  insert(row: Insertable<MembersTable>): Promise<MemberRow> {
    return this.db.insertInto('members').values(row).returningAll().executeTakeFirstOrThrow();
  }

  findById(tenantId: string, id: string) {
    return this.db
      .selectFrom('members')
      .selectAll()
      .where('tenantId', '=', tenantId)
      .where('id', '=', id)
      .executeTakeFirst();
  }

  /** Who is told when a webhook endpoint is paused. */
  ownersAndAdmins(tenantId: string) {
    return this.db
      .selectFrom('members')
      .select(['id', 'email'])
      .where('tenantId', '=', tenantId)
      .where('role', 'in', ['owner', 'admin'])
      .orderBy('id')
      .execute();
  }

  findByEmail(tenantId: string, email: string) {
    return this.db
      .selectFrom('members')
      .selectAll()
      .where('tenantId', '=', tenantId)
      .where('email', '=', email)
      .executeTakeFirst();
  }
}
