import { createHash, randomBytes } from 'node:crypto';
import { type Clock, nowIso } from '../lib/clock.ts';
import { newId } from '../lib/ids.ts';
import { conflict, notFound } from '../lib/problems.ts';
import type { PortalSessionsRepository } from '../repositories/portal-sessions-repository.ts';
import type { TenantsRepository } from '../repositories/tenants-repository.ts';

/** How long a portal link can wait for its first use, and how long the session it opens lasts. */
const PORTAL_LINK_TTL_MS = 10 * 60_000;
export const PORTAL_SESSION_TTL_MS = 60 * 60_000;

/** Who a portal request is: the tenant, and whether the session may change anything. */
export interface PortalSession {
  id: string;
  tenantId: string;
  readOnly: boolean;
  /** The token that asked for the link (its rate limit counts the session's requests). */
  tokenId: string | null;
  expiresAt: string;
}

/** A link's one-time secret and a session's cookie: 256 random bits, base64url. */
const newSecret = () => randomBytes(32).toString('base64url');
const digest = (secret: string) => createHash('sha256').update(secret).digest('hex');
const SECRET_PATTERN = /^[A-Za-z0-9_-]{43}$/;

interface PortalServiceDeps {
  sessions: PortalSessionsRepository;
  tenants: TenantsRepository;
  clock: Clock;
  publicBaseUrl: string;
}

/**
 * Webhook portal sessions: a link valid for one use within PORTAL_LINK_TTL_MS, exchanged for a
 * browser session of PORTAL_SESSION_TTL_MS bound to the tenant. Only digests of either secret are
 * stored. A session stands while its tenant is active and the token that asked for it (if any)
 * is neither revoked nor expired; each request checks, so ending them needs no bookkeeping.
 */
export class PortalService {
  constructor(private readonly deps: PortalServiceDeps) {}

  /** A new link for the tenant; `tokenId` is the asking token (null: the operator). */
  async createLink(
    tenantId: string,
    options: { readOnly: boolean; tokenId: string | null },
  ): Promise<{ url: string; expiresAt: string }> {
    const tenant = await this.deps.tenants.findById(tenantId);
    if (!tenant) throw notFound('Tenant');
    if (!tenant.active) {
      throw conflict('The tenant is inactive: its portal cannot be opened.', 'tenant_inactive');
    }
    const now = this.deps.clock.now();
    const secret = newSecret();
    const expiresAt = new Date(now.getTime() + PORTAL_LINK_TTL_MS).toISOString();
    await this.deps.sessions.purgeExpired(now.toISOString());
    await this.deps.sessions.insert({
      id: newId('pts'),
      tenantId,
      tokenId: options.tokenId,
      readOnly: options.readOnly,
      linkHash: digest(secret),
      linkExpiresAt: expiresAt,
      sessionHash: null,
      expiresAt: null,
      createdAt: now.toISOString(),
    });
    return { url: `${this.deps.publicBaseUrl}/portal/session/${secret}`, expiresAt };
  }

  /**
   * Whether a link would sign a browser in, without using it: what a visit (GET or HEAD, a mail
   * scanner's or a link preview's included) is told. Only a deliberate POST uses it (exchange).
   */
  async linkUsable(linkSecret: string): Promise<boolean> {
    if (!SECRET_PATTERN.test(linkSecret)) return false;
    return this.deps.sessions.linkUsable(digest(linkSecret), nowIso(this.deps.clock));
  }

  /** Uses a link: its new session's cookie value, or null for a used, expired or unknown link. */
  async exchange(linkSecret: string): Promise<{ cookie: string; expiresAt: string } | null> {
    if (!SECRET_PATTERN.test(linkSecret)) return null;
    const cookie = newSecret();
    const now = this.deps.clock.now();
    const expiresAt = new Date(now.getTime() + PORTAL_SESSION_TTL_MS).toISOString();
    const used = await this.deps.sessions.exchange(digest(linkSecret), now.toISOString(), {
      sessionHash: digest(cookie),
      expiresAt,
    });
    return used === undefined ? null : { cookie, expiresAt };
  }

  /** The session a cookie names while it stands, else null. */
  async authenticate(cookie: string | undefined): Promise<PortalSession | null> {
    if (cookie === undefined || !SECRET_PATTERN.test(cookie)) return null;
    const now = nowIso(this.deps.clock);
    const row = await this.deps.sessions.findLive(digest(cookie), now);
    if (row === undefined || !row.tenantActive || row.tokenRevokedAt !== null) return null;
    if (row.tokenExpiresAt !== null && row.tokenExpiresAt <= now) return null;
    return {
      id: row.id,
      tenantId: row.tenantId,
      readOnly: row.readOnly,
      tokenId: row.tokenId,
      expiresAt: row.expiresAt,
    };
  }

  /** Signs out. */
  end(session: PortalSession): Promise<void> {
    return this.deps.sessions.remove(session.tenantId, session.id);
  }
}
