import { createHash } from 'node:crypto';
import pg from 'pg';
import type { Logger } from '../platform/logger.ts';
import { ServiceUnavailableError, coerceError } from '../platform/errors.ts';
import { isDatabaseUnavailable } from './sqlstate.ts';

export type Row = Record<string, unknown>;

export interface Queryable {
  query<R extends Row = Row>(text: string | pg.QueryConfig, values?: readonly unknown[]): Promise<pg.QueryResult<R>>;
}

// Statement text → name, so a statement run per request or per batch is hashed once per process. Bounded:
// texts differ only by which filters a list or export has, never by values (those are parameters).
const statementNames = new Map<string, string>();

/**
 * A named prepared statement for a hot read: each connection plans it once, and Postgres may then keep a
 * generic plan. With monthly partitions, planning a list query costs more than running it (≈ 2.4 ms
 * against ≈ 1 ms measured on the list benchmark's dataset).
 */
export function prepared(text: string, values: readonly unknown[]): pg.QueryConfig {
  let name = statementNames.get(text);
  if (name === undefined) {
    name = `q_${createHash('sha1').update(text).digest('hex').slice(0, 20)}`;
    statementNames.set(text, name);
  }
  return { name, text, values: values as unknown[] };
}

export interface DatabaseOptions {
  readonly url: string;
  readonly poolSize: number;
  readonly applicationName: string;
  readonly log: Logger;
  /** Upper bound for one statement, so a stuck query cannot hold a request or a connection forever. */
  readonly statementTimeoutMs?: number;
}

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
    this.pool = new pg.Pool({
      connectionString: options.url,
      max: options.poolSize,
      application_name: options.applicationName,
      // Fail fast while Postgres is down instead of queueing requests behind a dead connection.
      connectionTimeoutMillis: 3_000,
      idleTimeoutMillis: 30_000,
      statement_timeout: options.statementTimeoutMs ?? 30_000,
      keepAlive: true,
    });
    // An idle client losing its server (restart, failover) emits here; without a listener it would crash
    // the process. The pool discards the client and the next checkout reconnects.
    this.pool.on('error', (error) => this.log.warn({ err: error }, 'idle Postgres connection lost'));
    // A checked-out connection that dies can emit 'error' on its client as well as failing the query; with
    // no listener that event would crash the process.
    this.pool.on('connect', (client) => {
      client.on('error', (error) => this.log.warn({ err: error }, 'Postgres connection lost'));
    });
  }

  async query<R extends Row = Row>(text: string | pg.QueryConfig, values?: readonly unknown[]): Promise<pg.QueryResult<R>> {
    try {
      return await this.pool.query<R>(text as string, values as unknown[]);
    } catch (thrown) {
      throw translateUnavailable(thrown);
    }
  }

  /** Runs fn inside BEGIN/COMMIT on one connection; rolls back on any error. */
  async transaction<T>(fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    const client = await this.connect();
    let broken: Error | undefined;
    try {
      await client.query('BEGIN');
      const result = await fn(client);
      await client.query('COMMIT');
      return result;
    } catch (thrown) {
      const error = coerceError(thrown);
      if (isDatabaseUnavailable(error)) broken = error;
      else await client.query('ROLLBACK').catch((rollbackError: Error) => (broken = rollbackError));
      throw translateUnavailable(error);
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

export function translateUnavailable(thrown: unknown): Error {
  const error = coerceError(thrown);
  if (error instanceof ServiceUnavailableError) return error;
  if (isDatabaseUnavailable(error)) {
    return new ServiceUnavailableError('The event store is temporarily unavailable; retry shortly.', { cause: error });
  }
  return error;
}
