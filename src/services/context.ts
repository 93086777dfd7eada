import type { TenantRow } from '../repositories/tenants-repository.ts';
import type { TokenRow } from '../repositories/tokens-repository.ts';

/** Who is calling: the token's tenant, the token, and its scopes. Built by authentication. */
export interface AuthContext {
  tenant: TenantRow;
  token: TokenRow;
  scopes: ReadonlySet<string>;
}
