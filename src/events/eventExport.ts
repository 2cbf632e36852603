import type pg from 'pg';
import { translateUnavailable } from '../db/database.ts';
import type { EventFilters } from './eventFilters.ts';
import { documentOfParts, type DocumentParts } from './eventDocument.ts';
import { exportQuery, measureExportWindow } from './eventStore.ts';

export const EXPORT_ROW_CAP = 10_000;

/** One export in progress: known truncation, rows as JSON text, and one connection held until close(). */
export interface ExportSession {
  readonly truncated: boolean;
  /** The export's snapshot (pg_export_snapshot), when asked for: another connection can read in it. */
  readonly snapshotId: string | undefined;
  /**
   * The oldest millisecond the export covers: every matching event from it to `until` is in it. The filters'
   * `since` (undefined: none) when not truncated, else the last millisecond it returns.
   */
  readonly coveredSinceMs: number | undefined;
  /**
   * Ends the export at `sinceMs` (kept) instead, and marks it truncated: for a page that something else bounds
   * sooner (its records of expired leaves, src/integrity/exportProofs.ts). Before rows() only.
   */
  narrow(sinceMs: number): void;
  /**
   * The rows. `betweenFetches` is called after each round trip of rows, before the next is sent; what it
   * returns is awaited (a long read's duty cycle pauses there, with no FETCH under way).
   */
  rows(betweenFetches?: () => Promise<void> | undefined): AsyncIterable<string>;
  close(): Promise<void>;
}

/**
 * Synchronous bulk export (docs/api.md "POST /audit/export"). Both queries run in one REPEATABLE READ snapshot:
 * the first sizes the window (so X-Service-Truncated is known before the first byte), the second streams
 * rows with backpressure through a cursor (StreamingExport), so memory does not grow with the export.
 *
 * At the cap the export ends on a millisecond boundary: every event of the last returned millisecond is
 * included, and none of the next, so repeating with `until` = last timestamp visits every event once.
 * Should more than the cap share one millisecond, that whole millisecond is returned, beyond the cap:
 * otherwise the walk could never get past it.
 */
/** Where an export reads: the long-read pool, or a read replica in front of it (db/replicaReads.ts). */
export interface ExportSource {
  connect(): Promise<pg.PoolClient>;
}

export class EventExporter {
  private readonly db: ExportSource;
  private readonly cap: number;
  private readonly fetchRows: number;

  /** `fetchRows`: rows per FETCH (FETCH_ROWS unless given), what one round trip carries. */
  constructor(db: ExportSource, cap = EXPORT_ROW_CAP, fetchRows = FETCH_ROWS) {
    this.db = db;
    this.cap = cap;
    this.fetchRows = fetchRows;
  }

  async open(tenantId: string, filters: EventFilters, options: { shareSnapshot?: boolean } = {}): Promise<ExportSession> {
    const client = await this.db.connect();
    try {
      await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
      const snapshotId = options.shareSnapshot
        ? (await client.query<{ id: string }>('SELECT pg_export_snapshot() AS id')).rows[0]!.id
        : undefined;
      const window = await measureExportWindow(client, tenantId, filters, this.cap);
      const boundaryMs = window.boundaryMs;
      if (boundaryMs === undefined)
        return new StreamingExport(client, { tenantId, filters, bound: {} }, snapshotId, filters.sinceMs, this.fetchRows);
      const everyRowInBoundary = window.newestMs === boundaryMs;
      const bound = everyRowInBoundary ? { onlyMs: boundaryMs } : { newerThanMs: boundaryMs };
      const coveredSinceMs = everyRowInBoundary ? boundaryMs : boundaryMs + 1;
      return new StreamingExport(client, { tenantId, filters, bound }, snapshotId, coveredSinceMs, this.fetchRows);
    } catch (error) {
      client.release(error as Error);
      throw translateUnavailable(error);
    }
  }
}

/** What an export returns: the filters, and the cap's boundary (exportQuery) when truncated by it. */
interface ExportSelection {
  readonly tenantId: string;
  readonly filters: EventFilters;
  readonly bound: { readonly newerThanMs?: number; readonly onlyMs?: number };
}

/** Rows per FETCH by default: what one round trip carries, and the most an export holds in memory at a time. */
const FETCH_ROWS = 500;

/**
 * The rows come through a cursor declared in the export's transaction and read with one FETCH per batch.
 * Each FETCH is a statement of its own, so the statement timeout bounds the work of fetching a batch, not
 * the whole export: a protocol-level cursor (pg-query-stream) is one statement from its first row to its
 * last, and its timeout ran on while a slow client read, cutting big exports off. Between FETCHes the
 * connection waits idle in the transaction, as long as the client takes to read what it was sent.
 */
class StreamingExport implements ExportSession {
  readonly snapshotId: string | undefined;
  private readonly client: pg.PoolClient;
  private selection: ExportSelection;
  private narrowedSinceMs: number | undefined;
  private readonly capSinceMs: number | undefined;
  private started = false;
  private connectionLost: Error | undefined;
  private closed = false;

  private readonly fetchRows: number;

  constructor(
    client: pg.PoolClient,
    selection: ExportSelection,
    snapshotId: string | undefined,
    coveredSinceMs: number | undefined,
    fetchRows: number,
  ) {
    this.client = client;
    this.fetchRows = fetchRows;
    this.selection = selection;
    this.snapshotId = snapshotId;
    this.capSinceMs = coveredSinceMs;
  }

  get truncated(): boolean {
    return (
      this.selection.bound.newerThanMs !== undefined || this.selection.bound.onlyMs !== undefined || this.narrowedSinceMs !== undefined
    );
  }

  get coveredSinceMs(): number | undefined {
    return this.narrowedSinceMs ?? this.capSinceMs;
  }

  narrow(sinceMs: number): void {
    if (this.started) throw new Error('an export is narrowed before its rows are read');
    if (this.coveredSinceMs !== undefined && sinceMs <= this.coveredSinceMs) return;
    this.narrowedSinceMs = sinceMs;
    this.selection = { ...this.selection, filters: { ...this.selection.filters, sinceMs } };
  }

  async *rows(betweenFetches?: () => Promise<void> | undefined): AsyncIterable<string> {
    this.started = true;
    const query = exportQuery(this.selection.tenantId, this.selection.filters, this.selection.bound);
    // A pending query is not always answered when its connection dies (pg-cursor left reads hanging), so
    // the connection's own error or end is raced against every round trip.
    let onLost!: (error?: Error) => void;
    const lost = new Promise<never>((_, reject) => {
      onLost = (error?: Error) => {
        this.connectionLost = error ?? new Error('Postgres connection ended during the export');
        reject(this.connectionLost);
      };
    });
    lost.catch(() => undefined);
    this.client.once('error', onLost);
    this.client.once('end', onLost);
    try {
      await Promise.race([this.client.query(`DECLARE export_rows NO SCROLL CURSOR FOR ${query.text}`, query.values), lost]);
      for (;;) {
        const { rows } = await Promise.race([
          this.client.query<DocumentParts>({ text: `FETCH FORWARD ${this.fetchRows} FROM export_rows`, rowMode: 'array' }),
          lost,
        ]);
        for (const row of rows) yield documentOfParts(row);
        if (rows.length < this.fetchRows) return;
        const pause = betweenFetches?.();
        if (pause !== undefined) await pause;
      }
    } catch (error) {
      throw translateUnavailable(error);
    } finally {
      this.client.off('error', onLost);
      this.client.off('end', onLost);
    }
  }

  /**
   * Returns the connection to the pool at once, also when the client went away mid-stream: ending the
   * read-only transaction closes the cursor. A connection that died is discarded instead.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.connectionLost) {
      this.client.release(this.connectionLost);
      return;
    }
    try {
      await this.client.query('ROLLBACK');
      this.client.release();
    } catch (error) {
      this.client.release(error as Error);
    }
  }
}
