import { createHash } from 'node:crypto';
import type { DeploymentEnv } from '../config.ts';
import { AUTH_CHANGES_CHANNEL, type Notifier } from '../db/notifier.ts';
import { isScope, SCOPES, type Scope } from '../domain/plans.ts';
import { type Clock, nowIso } from '../lib/clock.ts';
import { newId, randomCrockford } from '../lib/ids.ts';
import { parseStoredJson } from '../lib/json.ts';
import { fieldError, notFound, unauthorized } from '../lib/problems.ts';
import type { MembersRepository } from '../repositories/members-repository.ts';
import type { TenantsRepository } from '../repositories/tenants-repository.ts';
import type { TokenRow, TokensRepository } from '../repositories/tokens-repository.ts';
import type { AuthCache } from './auth-cache.ts';
import type { AuthContext } from './context.ts';

const TOKEN_PATTERN = /^tk_(live|test)_[0-9A-HJKMNP-TV-Z]{26}$/;
const PREFIX_LENGTH = 12;
/** lastUsedAt is advisory: writing it at most once a minute keeps reads free of writes. */
const LAST_USED_INTERVAL_MS = 60_000;

export function hashToken(value: string): string {
  return createHash('sha256').update(value).digest('hex');
}

/** The token object of /me and of the admin API; never the value or its hash. */
export interface PublicToken {
  id: string;
  name: string | null;
  prefix: string;
  scopes: Scope[];
  lastUsedAt: string | null;
  expiresAt: string | null;
  createdAt: string;
  revoked: boolean;
}

export function toPublicToken(row: TokenRow): PublicToken {
  return {
    id: row.id,
    name: row.name,
    prefix: row.prefix,
    scopes: parseStoredJson<Scope[]>(row.scopes),
    lastUsedAt: row.lastUsedAt,
    expiresAt: row.expiresAt,
    createdAt: row.createdAt,
    revoked: row.revokedAt !== null,
  };
}

export interface MintTokenInput {
  scopes: string[];
  name?: string | null;
  expiresAt?: string | null;
  createdBy?: string | null;
}

interface TokensServiceDeps {
  tokens: TokensRepository;
  tenants: TenantsRepository;
  members: MembersRepository;
  clock: Clock;
  env: DeploymentEnv;
  cache: AuthCache;
  notifier: Notifier;
  onBackgroundError: (error: unknown) => void;
}

export class TokensService {
  /** Per-process memory of the last lastUsedAt write, so most requests skip even the check. */
  private readonly lastTouched = new Map<string, number>();

  constructor(private readonly deps: TokensServiceDeps) {}

  /** Mints a token; the value is returned here once and only its SHA-256 is stored. */
  async mint(
    tenantIdOrSlug: string,
    input: MintTokenInput,
  ): Promise<{ token: PublicToken; value: string }> {
    const tenant = await this.deps.tenants.findByIdOrSlug(tenantIdOrSlug);
    if (!tenant) throw notFound('Tenant');
    const scopes = input.scopes.includes('*') ? [...SCOPES] : [...new Set(input.scopes)];
    const unknown = scopes.filter((scope) => !isScope(scope));
    if (unknown.length > 0) throw fieldError('scopes', `unknown scope: ${unknown.join(', ')}`);
    if (scopes.length === 0) throw fieldError('scopes', 'must name at least one scope');
    let expiresAt: string | null = null;
    if (input.expiresAt) {
      const date = new Date(input.expiresAt);
      if (Number.isNaN(date.getTime()))
        throw fieldError('expiresAt', 'must be an ISO 8601 date-time');
      // A token born expired could never authenticate: a mistake worth saying at once.
      if (date.getTime() <= this.deps.clock.now().getTime()) {
        throw fieldError('expiresAt', 'must be in the future');
      }
      expiresAt = date.toISOString();
    }
    if (input.createdBy && !(await this.deps.members.findById(tenant.id, input.createdBy))) {
      throw fieldError('createdBy', 'is not a member of this tenant');
    }
    const value = `tk_${this.deps.env}_${randomCrockford(26)}`;
    const row = await this.deps.tokens.insert({
      id: newId('tok'),
      tenantId: tenant.id,
      name: input.name ?? null,
      tokenHash: hashToken(value),
      prefix: value.slice(0, PREFIX_LENGTH),
      env: this.deps.env,
      scopes: JSON.stringify(scopes),
      createdBy: input.createdBy ?? null,
      expiresAt,
      revokedAt: null,
      lastUsedAt: null,
      createdAt: nowIso(this.deps.clock),
    });
    return { token: toPublicToken(row), value };
  }

  /** A tenant's tokens (id or slug), revoked ones included; never their values. */
  async list(tenantIdOrSlug: string): Promise<PublicToken[]> {
    const tenant = await this.deps.tenants.findByIdOrSlug(tenantIdOrSlug);
    if (!tenant) throw notFound('Tenant');
    return (await this.deps.tokens.listForTenant(tenant.id)).map(toPublicToken);
  }

  async revoke(id: string): Promise<PublicToken> {
    const row = await this.deps.tokens.revoke(id, nowIso(this.deps.clock));
    if (!row) throw notFound('Token');
    this.deps.cache.forgetToken(id);
    await this.deps.notifier.publish(AUTH_CHANGES_CHANNEL, JSON.stringify({ tokenId: id }));
    return toPublicToken(row);
  }

  /** Resolves an Authorization header to the caller, or throws 401 naming the case. */
  async authenticate(header: string | undefined): Promise<AuthContext> {
    if (header === undefined || header === '')
      throw unauthorized('The Authorization header is missing.');
    const match = /^Bearer +(\S+)$/i.exec(header);
    if (!match || !TOKEN_PATTERN.test(match[1])) {
      throw unauthorized(
        'The token is malformed; expected "Bearer tk_live_…" or "Bearer tk_test_…".',
      );
    }
    const now = this.deps.clock.now();
    const hash = hashToken(match[1]);
    let cached = this.deps.cache.get(hash, now.getTime());
    if (!cached) {
      const found = await this.deps.tokens.findByHash(hash);
      if (!found) throw unauthorized('The token is unknown.');
      const scopes = new Set(parseStoredJson<string[]>(found.token.scopes));
      cached = this.deps.cache.set(hash, found, scopes, now.getTime());
    }
    const { token, tenant } = cached.found;
    if (token.revokedAt !== null) throw unauthorized('The token has been revoked.');
    if (token.expiresAt !== null && token.expiresAt <= now.toISOString()) {
      throw unauthorized('The token has expired.');
    }
    if (!tenant.active) throw unauthorized('The tenant of this token is inactive.');
    this.touch(token, now.getTime());
    return { tenant, token, scopes: cached.scopes };
  }

  private touch(token: TokenRow, nowMs: number): void {
    const last =
      this.lastTouched.get(token.id) ?? (token.lastUsedAt ? Date.parse(token.lastUsedAt) : 0);
    if (nowMs - last < LAST_USED_INTERVAL_MS) return;
    this.lastTouched.set(token.id, nowMs);
    const at = new Date(nowMs).toISOString();
    // The row may be the auth cache's copy: let it (and so /me) know about this use.
    token.lastUsedAt = at;
    const notAfter = new Date(nowMs - LAST_USED_INTERVAL_MS).toISOString();
    // Off the request path: the answer does not wait for a bookkeeping write.
    this.deps.tokens.touchLastUsed(token.id, at, notAfter).catch(this.deps.onBackgroundError);
  }
}
