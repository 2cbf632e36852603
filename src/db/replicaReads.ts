import type pg from 'pg';
import { ServiceUnavailableError } from '../platform/errors.ts';
import type { Database, Queryable, Row } from './database.ts';
import { systemClock } from '../platform/clock.ts';

/**
 * Reads that can wait (list pages, exports without proofs, log streams' reads of the trail) on a streaming
 * replica (DATABASE_READ_URL), within a bound on its lag (READ_REPLICA_MAX_LAG): past the bound, or while the
 * replica does not answer, they go to the primary, and the observer counts why. Reads the API promises to
 * see every acknowledged write (a lookup or a proof right after the write, an export with proofs, which reads
 * the signed heads in its own snapshot) never come here.
 *
 * The lag is the replica's own measure, asked at most once a CHECK_INTERVAL_MS by whichever read comes: the
 * time since the last transaction it replayed while WAL it received is still unapplied (0 when it has
 * applied everything it received, however long ago the primary last wrote). A replica that stopped
 * receiving altogether shows no lag by this measure: docs/operations.md "Replicas" says what to alert on.
 */

export interface ReplicaObserver {
  /** The lag last measured, in seconds; undefined when the replica did not answer. */
  lag(seconds: number | undefined): void;
  /** A read went to the primary instead. */
  fellBack(reason: 'lag' | 'unavailable'): void;
}

export interface ReplicaReadsOptions {
  readonly primary: Database;
  readonly replica: Database;
  readonly maxLagMs: number;
  readonly observer?: ReplicaObserver;
  readonly now?: () => number;
}

const CHECK_INTERVAL_MS = 1_000;

const LAG_SQL = `
  SELECT CASE WHEN NOT pg_is_in_recovery() OR pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() THEN 0
              ELSE COALESCE(extract(epoch FROM clock_timestamp() - pg_last_xact_replay_timestamp()) * 1000, 0)
         END::float8 AS lag_ms`;

/** Where a read goes, by the last lag measured (undefined: the replica did not answer). */
export function readTarget(lagMs: number | undefined, maxLagMs: number): 'replica' | 'lag' | 'unavailable' {
  if (lagMs === undefined) return 'unavailable';
  return lagMs > maxLagMs ? 'lag' : 'replica';
}

export class ReplicaReads implements Queryable {
  private readonly options: ReplicaReadsOptions;
  private readonly now: () => number;
  private lagMs: number | undefined;
  private checkedAt = Number.NEGATIVE_INFINITY;
  private checking: Promise<void> | undefined;

  constructor(options: ReplicaReadsOptions) {
    this.options = options;
    this.now = options.now ?? (() => systemClock.now());
  }

  /** One statement, on the replica when it is fresh enough, else on the primary. */
  async query<R extends Row = Row>(text: string | pg.QueryConfig, values?: readonly unknown[]): Promise<pg.QueryResult<R>> {
    const source = await this.choose();
    if (source === this.options.primary) return source.query<R>(text, values);
    try {
      return await source.query<R>(text, values);
    } catch (error) {
      if (!(error instanceof ServiceUnavailableError)) throw error;
      this.replicaFailed();
      return this.options.primary.query<R>(text, values);
    }
  }

  /** A connection for a read of many statements (an export): all of them on the server chosen now. */
  async connect(): Promise<pg.PoolClient> {
    const source = await this.choose();
    if (source === this.options.primary) return source.connect();
    return source.connect().catch((error: unknown) => {
      if (!(error instanceof ServiceUnavailableError)) throw error;
      this.replicaFailed();
      return this.options.primary.connect();
    });
  }

  /**
   * The server for a read that must see one state throughout (a log stream's pass reads tree sizes, then
   * the leaves below them): chosen once, used for every statement of it.
   */
  async choose(): Promise<Database> {
    if (this.now() - this.checkedAt >= CHECK_INTERVAL_MS) {
      this.checking ??= this.check().finally(() => (this.checking = undefined));
      await this.checking;
    }
    const target = readTarget(this.lagMs, this.options.maxLagMs);
    if (target === 'replica') return this.options.replica;
    this.options.observer?.fellBack(target);
    return this.options.primary;
  }

  private async check(): Promise<void> {
    try {
      const { rows } = await this.options.replica.query<{ lag_ms: number }>(LAG_SQL);
      this.lagMs = rows[0]!.lag_ms;
    } catch {
      this.lagMs = undefined;
    }
    this.checkedAt = this.now();
    this.options.observer?.lag(this.lagMs === undefined ? undefined : this.lagMs / 1000);
  }

  private replicaFailed(): void {
    this.lagMs = undefined;
    this.checkedAt = this.now();
    this.options.observer?.fellBack('unavailable');
  }
}
