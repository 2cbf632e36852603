import pg from 'pg';
import { NoWritablePostgresError } from './postgresClient.ts';

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
  lockNotAvailable: '55P03',
  undefinedTable: '42P01',
  readOnlyTransaction: '25006',
} as const;

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
 * True for an error the driver raised because Postgres could not be reached or dropped the connection: a
 * socket error, or a failure the driver raises itself before any server answer (connect timeout,
 * connection terminated), which pg reports as a plain Error without a code. Only for errors known to come
 * from the driver: a plain Error thrown by our own code looks the same (Database.transaction tells the two
 * apart by whether the connection still answers).
 */
export function isConnectionFailure(error: unknown): boolean {
  if (error instanceof NoWritablePostgresError) return true;
  if (!(error instanceof Error) || error instanceof pg.DatabaseError) return false;
  const code = (error as NodeJS.ErrnoException).code;
  if (code !== undefined) return socketErrorCodes.has(code);
  return error.constructor === Error;
}

/** 40001 and 40P01: the transaction lost a race and succeeds when run again. */
export function isTransactionConflict(error: unknown): boolean {
  const state = sqlState(error);
  return state === SQLSTATE.serializationFailure || state === SQLSTATE.deadlockDetected;
}

/**
 * A server condition that passes without anything changing on our side, so the caller should retry later
 * (HTTP 503 with Retry-After, a JetStream message redelivered): connection exceptions (08), operator
 * intervention (57: shutdown, statement timeout, cancellation), insufficient resources (53), a lock not
 * available (55P03), transaction conflicts (40001, 40P01) that outlived their retries, and a write refused
 * because the server became a standby (25006: a failover; its connection is dropped and the next finds the
 * primary).
 */
export function isTransientServerCondition(error: unknown): boolean {
  const state = sqlState(error);
  if (state === undefined) return false;
  return (
    state.startsWith('08') ||
    state.startsWith('57') ||
    state.startsWith('53') ||
    state === SQLSTATE.lockNotAvailable ||
    state === SQLSTATE.readOnlyTransaction ||
    isTransactionConflict(error)
  );
}

/** Postgres unreachable or in a passing condition: anything a retry later can cure. */
export function isDatabaseUnavailable(error: unknown): boolean {
  return isConnectionFailure(error) || isTransientServerCondition(error);
}

/**
 * The data itself is refused: data exceptions (22: invalid text, value out of range) and integrity
 * violations (23), and program limits (54: a value nested too deep). Writing the same rows again fails
 * again, so a writer must find and set aside the rows at fault rather than retry them.
 */
export function isRefusedData(error: unknown): boolean {
  const state = sqlState(error);
  return state !== undefined && (state.startsWith('22') || state.startsWith('23') || state.startsWith('54'));
}
