import { ConfigError } from './config.ts';

const CONNECTION_CODES = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'ETIMEDOUT',
  'EAI_AGAIN',
  'ECONNRESET',
]);

/**
 * One clear line for the failures an operator can fix (configuration, an unreachable or missing
 * database); null for anything else, which deserves its stack trace.
 */
export function describeStartupError(error: unknown): string | null {
  if (error instanceof ConfigError) return error.message;
  const code = (error as { code?: string } | null)?.code;
  const message = (error as Error | null)?.message ?? String(error);
  if (code && CONNECTION_CODES.has(code))
    return `DATABASE_URL: cannot reach the database (${message})`;
  if (code === '3D000' || code === '28P01' || code === '28000') return `DATABASE_URL: ${message}`;
  if (code === 'SQLITE_CANTOPEN') return `DATA_DIR: cannot open the database file (${message})`;
  return null;
}
