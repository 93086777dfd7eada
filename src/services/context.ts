import type { TenantRow, TokenRow } from '../repositories/tenants-repository.ts';

/** Who is calling: the token's tenant, the token, and its scopes. Built by authentication. */
export interface AuthContext {
  tenant: TenantRow;
  token: TokenRow;
  scopes: ReadonlySet<string>;
}
