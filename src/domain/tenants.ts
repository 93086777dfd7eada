/** Tenant naming rules, shared by the admin API schema, the CLI and the tenants service. */
export const TENANT_SLUG_PATTERN = /^[a-z0-9][a-z0-9-]{0,99}$/;
export const TENANT_NAME_MAX_LENGTH = 200;

export const TENANT_SLUG_RULE =
  'lower-case letters, digits and hyphens, starting with a letter or digit, at most 100 characters';
