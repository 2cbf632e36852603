import pg from 'pg';

/**
 * Database errors are classified by SQLSTATE (and, for failures before the server answered, by the
 * error not being a server error at all), never by message text.
 */

export const SQLSTATE = {
  uniqueViolation: '23505',
  foreignKeyViolation: '23503',
  checkViolation: '23514',
  insufficientPrivilege: '42501',
  queryCanceled: '57014',
  serializationFailure: '40001',
  deadlockDetected: '40P01',
} as const;

const unavailableStates = new Set(['57P01', '57P02', '57P03', '53300', '53400']);

export function sqlState(error: unknown): string | undefined {
  return error instanceof pg.DatabaseError ? error.code : undefined;
}

const socketErrorCodes = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
]);

/**
 * True when Postgres could not be reached or dropped the connection: class 08, server shutdown, too many
 * connections, a socket error, or a failure the driver raises itself before any server answer (connect
 * timeout, connection terminated), which pg reports as a plain Error without a code.
 */
export function isDatabaseUnavailable(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const state = sqlState(error);
  if (state !== undefined) return state.startsWith('08') || unavailableStates.has(state);
  const code = (error as NodeJS.ErrnoException).code;
  if (code !== undefined) return socketErrorCodes.has(code);
  return error.constructor === Error;
}
