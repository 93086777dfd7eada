/**
 * Whether a database error means the database cannot be reached or did not answer in time (as
 * opposed to a constraint violation or a bug): connection refused, reset or terminated, a connect
 * or statement time-out, the server shutting down or refusing connections, SQLite's lock not
 * granted within its busy time-out. Such a request is answered 503 with Retry-After, not 500.
 */
export function isDatabaseUnavailable(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string') {
    if (NODE_CODES.has(code) || SQLITE_CODES.has(code)) return true;
    // SQLSTATE classes 08 (connection exception) and 57 (operator intervention: admin shutdown,
    // cannot connect now, statement timeout 57014), and 53300 (too many connections).
    if (/^(08|57)[0-9A-Z]{3}$/.test(code) || code === '53300') return true;
  }
  if (MESSAGES.some((message) => error.message.includes(message))) return true;
  return error.cause !== undefined && error.cause !== error && isDatabaseUnavailable(error.cause);
}

const NODE_CODES = new Set([
  // DatabaseOutage: the breaker knows the server does not answer.
  'EDBOUTAGE',
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
]);

const SQLITE_CODES = new Set(['SQLITE_BUSY', 'SQLITE_BUSY_SNAPSHOT', 'SQLITE_BUSY_TIMEOUT']);

// What pg and pg-pool say without a code.
const MESSAGES = [
  'Connection terminated',
  'Query read timeout',
  'timeout exceeded when trying to connect',
  'Client has encountered a connection error and is not queryable',
  'Connection closed',
];
