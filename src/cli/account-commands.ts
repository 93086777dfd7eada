import { cliEnvPrefix } from '../config.ts';
import { isTier, TIER_NAMES } from '../domain/plans.ts';
import { UsageError } from './args.ts';
import { type Command, namingNotFound } from './command.ts';
import { checkSlug, checkTenantName, columns, parseExpiry, parseScopes } from './values.ts';

/** The account commands: tenants and their API tokens. */

export const tenantCreateCommand: Command = {
  name: 'tenant create',
  summary: 'create a tenant',
  description: [
    'JSON: the tenant {"id", "name", "slug", "tier", "active", "tripQuota", "webhookEndpointCap", ...}',
  ],
  examples: ['npx tourops tenant create --name "Acme Tours" --slug acme --tier pro'],
  positionals: [],
  options: {
    name: {
      type: 'string',
      value: '<name>',
      required: true,
      description: 'display name, 1-200 characters',
    },
    slug: {
      type: 'string',
      value: '<slug>',
      required: true,
      description: 'unique handle: lower-case letters, digits and hyphens',
    },
    tier: {
      type: 'string',
      value: `<${TIER_NAMES.join('|')}>`,
      required: true,
      description: 'plan tier (free has no API access)',
    },
  },
  json: true,
  async run(ctx, args) {
    const command = 'tenant create';
    // Every bad value at once, not the first of them.
    const problems: string[] = [];
    const checked = <T>(check: () => T): T | undefined => {
      try {
        return check();
      } catch (error) {
        if (!(error instanceof UsageError)) throw error;
        problems.push(error.message);
        return undefined;
      }
    };
    const name = checked(() => checkTenantName(args.required('name'), command));
    const slug = checked(() => checkSlug(args.required('slug'), command));
    const tier = args.required('tier');
    if (!isTier(tier))
      problems.push(`--tier must be one of ${TIER_NAMES.join(', ')} (got "${tier}")`);
    if (problems.length > 0 || name === undefined || slug === undefined || !isTier(tier)) {
      throw new UsageError(problems.join('; '), command);
    }
    const tenant = await ctx.withRuntime(
      (runtime) => runtime.services.tenants.create({ name, slug, tier }),
      { creates: true },
    );
    ctx.print(
      `Tenant "${tenant.slug}" created: ${tenant.id} (tier ${tenant.tier}).\n` +
        `Mint a token with: ${cliEnvPrefix(ctx.config())}npx tourops token create --tenant ${tenant.slug} --scopes all\n`,
      tenant,
    );
    return 'done';
  },
};

export const tenantOption = {
  tenant: {
    type: 'string' as const,
    value: '<id|slug>',
    required: true,
    description: 'tenant id (ten_…) or slug',
  },
};

export const tokenCreateCommand: Command = {
  name: 'token create',
  summary: 'mint an API token for a tenant and print its value once',
  description: [
    'Only the SHA-256 of the token is stored: its value is printed now and never again.',
    'JSON: the token object {"id", "name", "prefix", "scopes", "expiresAt", "createdAt", "revoked", ...} plus "token", the value.',
  ],
  examples: [
    'npx tourops token create --tenant acme --scopes trips:read,clients:write --name "booking sync"',
  ],
  positionals: [],
  options: {
    ...tenantOption,
    scopes: {
      type: 'string',
      value: '<list|all>',
      required: true,
      description:
        'comma-separated scopes, e.g. trips:read,clients:read, or * for all ten (all works too)',
    },
    expires: {
      type: 'string',
      value: '<date>',
      description:
        'expiry: an ISO date (2027-12-31, midnight UTC) or date-time with a time zone (2027-12-31T18:00:00Z); default never',
    },
    name: {
      type: 'string',
      value: '<name>',
      description: 'a label for the token, e.g. "booking sync"',
    },
  },
  json: true,
  async run(ctx, args) {
    const command = 'token create';
    const tenantRef = args.required('tenant');
    const scopes = parseScopes(args.required('scopes'), command);
    const expires = args.string('expires');
    const expiresAt = expires === undefined ? null : parseExpiry(expires, new Date(), command);
    const name = args.string('name') ?? null;
    const { tenant, minted } = await ctx.withRuntime(async (runtime) => {
      const tenant = await namingNotFound(
        runtime,
        runtime.services.tenants.resolve(tenantRef),
        `Tenant "${tenantRef}"`,
      );
      const minted = await runtime.services.tokens.mint(tenant.id, { scopes, name, expiresAt });
      return { tenant, minted };
    });
    const { token, value } = minted;
    ctx.print(
      `Token ${token.id} minted for tenant "${tenant.slug}" (${tenant.id}).\n` +
        `  scopes:  ${token.scopes.join(', ')}\n` +
        `  expires: ${token.expiresAt ?? 'never'}\n` +
        (token.name === null ? '' : `  name:    ${token.name}\n`) +
        `\nIts value, shown only now:\n\n  ${value}\n\n`,
      { ...token, token: value },
    );
    return 'done';
  },
};

export const tokenRevokeCommand: Command = {
  name: 'token revoke',
  summary: 'revoke an API token',
  description: [
    'Requests with the token get 401 from now on. Revoking a revoked token changes nothing.',
    'JSON: the token object, with "revoked": true.',
  ],
  positionals: [{ name: 'id', description: 'the token id (tok_…)' }],
  options: {},
  json: true,
  async run(ctx, args) {
    const [id] = args.positionals;
    const token = await ctx.withRuntime((runtime) =>
      namingNotFound(runtime, runtime.services.tokens.revoke(id), `Token "${id}"`),
    );
    ctx.print(`Token ${token.id} (${token.prefix}…) revoked.\n`, token);
    return 'done';
  },
};

export const tenantListCommand: Command = {
  name: 'tenant list',
  summary: 'list every tenant',
  description: ['JSON: an array of tenants, oldest first.'],
  positionals: [],
  options: {},
  json: true,
  async run(ctx) {
    const tenants = await ctx.withRuntime((runtime) => runtime.services.tenants.list());
    const rows = tenants.map((t) => [
      t.id,
      t.slug,
      t.active ? t.tier : `${t.tier} (inactive)`,
      t.name,
    ]);
    ctx.print(
      rows.length === 0 ? 'No tenants.\n' : columns(['ID', 'SLUG', 'TIER', 'NAME'], rows),
      tenants,
    );
    return 'done';
  },
};

export const tokenListCommand: Command = {
  name: 'token list',
  summary: "list a tenant's tokens (never their values)",
  description: ['JSON: an array of token objects, oldest first, revoked ones included.'],
  positionals: [],
  options: {
    ...tenantOption,
  },
  json: true,
  async run(ctx, args) {
    const tenantRef = args.required('tenant');
    const tokens = await ctx.withRuntime((runtime) =>
      namingNotFound(runtime, runtime.services.tokens.list(tenantRef), `Tenant "${tenantRef}"`),
    );
    const rows = tokens.map((t) => [
      t.id,
      `${t.prefix}…`,
      t.revoked ? 'revoked' : t.expiresAt ? `expires ${t.expiresAt}` : 'active',
      t.scopes.join(','),
      t.name === null ? '' : `"${t.name}"`,
    ]);
    ctx.print(
      rows.length === 0
        ? 'No tokens.\n'
        : columns(['ID', 'PREFIX', 'STATE', 'SCOPES', 'NAME'], rows),
      tokens,
    );
    return 'done';
  },
};
