import { createHash } from 'node:crypto';
import { sleep } from '../platform/sleep.ts';
import pg from 'pg';
import { backoffDelay, type BackoffPolicy } from '../platform/backoff.ts';
import { BoundedWarnings } from '../platform/boundedWarnings.ts';
import type { Logger } from '../platform/logger.ts';
import { ServiceUnavailableError, coerceError } from '../platform/errors.ts';
import type { ConnectionBudget } from './connectionBudget.ts';
import { type DatabasePooler, postgresConnection } from './postgresClient.ts';
import {
  SQLSTATE,
  isConnectionFailure,
  isDatabaseUnavailable,
  isTransactionConflict,
  isTransientServerCondition,
  sqlState,
} from './sqlstate.ts';

export type Row = Record<string, unknown>;

export interface Queryable {
  query<R extends Row = Row>(text: string | pg.QueryConfig, values?: readonly unknown[]): Promise<pg.QueryResult<R>>;
}

/**
 * Statement text → name, so a statement run per request or per batch is hashed once per process. Texts differ
 * by which filters a list has and by its page size (listEventDocuments says why the size is in the text), and
 * each connection keeps a plan for every name it ran: past `max` names a text gets none, and runs unnamed,
 * planned at each run as any ad-hoc statement, so callers cannot grow a backend's plan cache without bound.
 */
export class StatementNames {
  private readonly names = new Map<string, string>();
  private readonly max: number;

  constructor(max: number) {
    this.max = max;
  }

  nameOf(text: string): string | undefined {
    let name = this.names.get(text);
    if (name === undefined && this.names.size < this.max) {
      name = `q_${createHash('sha1').update(text).digest('hex').slice(0, 20)}`;
      this.names.set(text, name);
    }
    return name;
  }
}

const statementNames = new StatementNames(500);

/**
 * A named prepared statement for a hot read: each connection plans it once, and Postgres may then keep a
 * generic plan. With monthly partitions, planning a list query costs more than running it (BENCHMARKS.md,
 * "List (issue 2)", prepared statements).
 */
export function prepared(text: string, values: readonly unknown[]): pg.QueryConfig {
  const name = statementNames.nameOf(text);
  return name === undefined ? { text, values: values as unknown[] } : { name, text, values: values as unknown[] };
}

export interface DatabaseOptions {
  readonly url: string;
  readonly poolSize: number;
  readonly applicationName: string;
  readonly log: Logger;
  /** Upper bound for one statement, so a stuck query cannot hold a request or a connection forever. */
  readonly statementTimeoutMs?: number;
  /**
   * Upper bound for one wait on a lock (Postgres' lock_timeout; none by default). A statement that waits
   * longer fails with 55P03, which callers treat as a passing condition: a request answers 503 with
   * Retry-After at once, instead of holding its connection until the statement timeout while a migration or
   * a manual LOCK holds the table, and the requests queued behind it fail on the pool's connect timeout.
   */
  readonly lockTimeoutMs?: number;
  /** The process's share of the server's connections, which this pool keeps within (connectionBudget.ts). */
  readonly budget?: ConnectionBudget;
  /** 'transaction' behind PgBouncer in transaction mode (db/postgresClient.ts); 'none' by default. */
  readonly pooler?: DatabasePooler;
}

/**
 * A transaction that loses a race (serialization failure, deadlock) is run again whole, this many times in
 * all, after a pause drawn at random below a bound that doubles each time, so that the transactions that
 * collided do not collide again in step.
 */
const TRANSACTION_ATTEMPTS = 5;
/** Below 20 ms, 40 ms, 80 ms ... (full jitter). */
const CONFLICT_BACKOFF: BackoffPolicy = { initialMs: 20, maxMs: 1_000, spread: [0, 1] };

// timestamptz and timestamp arrive as Date by default; the store reads and writes them as text or Date
// explicitly, and int8 counts fit in a double for anything this service counts.
pg.types.setTypeParser(pg.types.builtins.INT8, (value) => Number(value));

/**
 * The pool plus the one place where "Postgres is unreachable" becomes a 503 for callers. Every query and
 * transaction of the store goes through it.
 */
export class Database implements Queryable {
  readonly pool: pg.Pool;
  private readonly log: Logger;

  constructor(options: DatabaseOptions) {
    this.log = options.log;
    const { Client, connectionString } = postgresConnection(options.url, options.pooler);
    this.pool = new pg.Pool({
      Client,
      connectionString,
      max: options.poolSize,
      application_name: options.applicationName,
      // Fail fast while Postgres is down instead of queueing requests behind a dead connection.
      connectionTimeoutMillis: 3_000,
      idleTimeoutMillis: 30_000,
      statement_timeout: options.statementTimeoutMs ?? 30_000,
      ...(options.lockTimeoutMs === undefined ? {} : { lock_timeout: options.lockTimeoutMs }),
      keepAlive: true,
      // pg-pool awaits the hook (its types say void): a rejection closes the connection and fails the checkout.
      ...(options.budget ? { onConnect: (client: pg.ClientBase) => options.budget!.admit(client) } : {}),
    });
    options.budget?.register(this.pool, options.poolSize);
    // An idle client losing its server (restart, failover) emits here; without a listener it would crash
    // the process. The pool discards the client and the next checkout reconnects. A failover drops every
    // connection of the pool at once: one line per kind and 10 s says so, with how many it left out.
    const lost = new BoundedWarnings();
    this.pool.on('error', (error) => lost.warn(this.log, `idle ${errorCode(error)}`, { err: error }, 'idle Postgres connection lost'));
    // A checked-out connection that dies can emit 'error' on its client as well as failing the query; with
    // no listener that event would crash the process.
    this.pool.on('connect', (client) => {
      client.on('error', (error) => lost.warn(this.log, `busy ${errorCode(error)}`, { err: error }, 'Postgres connection lost'));
    });
  }

  async query<R extends Row = Row>(text: string | pg.QueryConfig, values?: readonly unknown[]): Promise<pg.QueryResult<R>> {
    try {
      return await this.pool.query<R>(text as string, values as unknown[]);
    } catch (thrown) {
      throw translateUnavailable(thrown);
    }
  }

  /**
   * Runs fn inside BEGIN/COMMIT on one connection; rolls back on any error. A transaction that fails with
   * a serialization failure or a deadlock is run again (fn must be safe to run more than once: it is, as
   * long as it only talks to this database), at most TRANSACTION_ATTEMPTS times; past that the conflict is
   * a 503 for callers, like any passing condition of the database.
   */
  async transaction<T>(fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt += 1) {
      try {
        return await this.transactionOnce(fn);
      } catch (error) {
        if (!isTransactionConflict(error) || attempt >= TRANSACTION_ATTEMPTS) throw translateServerCondition(error);
        this.log.debug({ sqlstate: (error as pg.DatabaseError).code, attempt }, 'transaction conflict; running it again');
        await sleep(backoffDelay(CONFLICT_BACKOFF, attempt));
      }
    }
  }

  private async transactionOnce<T>(fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    const client = await this.connect();
    let broken: Error | undefined;
    try {
      await client.query('BEGIN');
      const result = await fn(client);
      await client.query('COMMIT');
      return result;
    } catch (thrown) {
      const error = coerceError(thrown);
      // fn's own code may throw a plain Error that looks like one of the driver's connection failures; the
      // connection answering ROLLBACK is what says the database is fine and the error is ours.
      try {
        await client.query('ROLLBACK');
      } catch (rollbackError) {
        broken = coerceError(rollbackError);
        if (isConnectionFailure(broken)) {
          throw new ServiceUnavailableError('The event store is temporarily unavailable; retry shortly.', { cause: error });
        }
      }
      // A server that became a standby under us (a failover) keeps refusing writes: the connection goes, and
      // the next one finds the new primary.
      if (sqlState(error) === SQLSTATE.readOnlyTransaction) broken ??= error;
      throw error;
    } finally {
      // A connection that failed mid-transaction is destroyed rather than returned in an unknown state.
      client.release(broken);
    }
  }

  async connect(): Promise<pg.PoolClient> {
    try {
      return await this.pool.connect();
    } catch (thrown) {
      throw translateUnavailable(thrown);
    }
  }

  /** Readiness: a round trip within the connect timeout. */
  async ping(): Promise<void> {
    await this.query('SELECT 1');
  }

  async close(): Promise<void> {
    await this.pool.end();
  }
}

/** Only the server's own conditions: fn's errors are not the driver's, whatever they look like. */
function translateServerCondition(error: unknown): unknown {
  if (!isTransientServerCondition(error)) return error;
  return new ServiceUnavailableError('The event store is temporarily unavailable; retry shortly.', { cause: error });
}

/**
 * For errors raised by the driver (a query, a checkout): Postgres unreachable or in a passing condition
 * becomes the 503 ServiceUnavailableError; anything else is returned as it is.
 */
export function translateUnavailable(thrown: unknown): Error {
  const error = coerceError(thrown);
  if (error instanceof ServiceUnavailableError) return error;
  if (isDatabaseUnavailable(error)) {
    return new ServiceUnavailableError('The event store is temporarily unavailable; retry shortly.', { cause: error });
  }
  return error;
}

/** What kind of loss an error is (ECONNRESET, 57P01 admin_shutdown, …), for telling repeats apart. */
function errorCode(error: Error): string {
  const { code } = error as Error & { code?: unknown };
  return typeof code === 'string' ? code : error.name;
}
