import { once } from 'node:events';
import type pg from 'pg';
import QueryStream from 'pg-query-stream';
import type { Database } from '../db/database.ts';
import { translateUnavailable } from '../db/database.ts';
import type { EventFilters } from './eventFilters.ts';
import { exportQuery, measureExportWindow } from './eventStore.ts';

export const EXPORT_ROW_CAP = 10_000;

/** One export in progress: known truncation, rows as JSON text, and one connection held until close(). */
export interface ExportSession {
  readonly truncated: boolean;
  /** The export's snapshot (pg_export_snapshot), when asked for: another connection can read in it. */
  readonly snapshotId: string | undefined;
  rows(): AsyncIterable<string>;
  close(): Promise<void>;
}

/**
 * Synchronous bulk export (docs/api.md "POST /audit/export"). Both queries run in one REPEATABLE READ snapshot:
 * the first sizes the window (so X-Service-Truncated is known before the first byte), the second streams
 * rows with backpressure through a server-side cursor, so memory does not grow with the export.
 *
 * At the cap the export ends on a millisecond boundary: every event of the last returned millisecond is
 * included, and none of the next, so repeating with `until` = last timestamp visits every event once.
 * Should more than the cap share one millisecond, that whole millisecond is returned, beyond the cap:
 * otherwise the walk could never get past it.
 */
export class EventExporter {
  private readonly db: Database;
  private readonly cap: number;

  constructor(db: Database, cap = EXPORT_ROW_CAP) {
    this.db = db;
    this.cap = cap;
  }

  async open(tenantId: string, filters: EventFilters, options: { shareSnapshot?: boolean } = {}): Promise<ExportSession> {
    const client = await this.db.connect();
    try {
      await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
      const snapshotId = options.shareSnapshot ? (await client.query<{ id: string }>('SELECT pg_export_snapshot() AS id')).rows[0]!.id : undefined;
      const window = await measureExportWindow(client, tenantId, filters, this.cap);
      const truncated = window.boundaryMs !== undefined;
      const everyRowInBoundary = truncated && window.newestMs === window.boundaryMs;
      const query = exportQuery(
        tenantId,
        filters,
        !truncated ? {} : everyRowInBoundary ? { onlyMs: window.boundaryMs } : { newerThanMs: window.boundaryMs },
      );
      return new StreamingExport(client, truncated, query, snapshotId);
    } catch (error) {
      client.release(error as Error);
      throw translateUnavailable(error);
    }
  }
}

class StreamingExport implements ExportSession {
  readonly truncated: boolean;
  readonly snapshotId: string | undefined;
  private readonly client: pg.PoolClient;
  private readonly query: { text: string; values: unknown[] };
  private stream: QueryStream | undefined;
  private connectionLost: Error | undefined;
  private closed = false;

  constructor(client: pg.PoolClient, truncated: boolean, query: { text: string; values: unknown[] }, snapshotId: string | undefined) {
    this.client = client;
    this.truncated = truncated;
    this.snapshotId = snapshotId;
    this.query = query;
  }

  async *rows(): AsyncIterable<string> {
    const stream = this.client.query(new QueryStream(this.query.text, this.query.values, { batchSize: 500 }));
    this.stream = stream;
    // pg-cursor leaves a pending read unanswered when its connection dies between fetches (and its close
    // then never completes), so the connection's own error or end is raced against every read.
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
    const iterator = (stream as AsyncIterable<{ json: string }>)[Symbol.asyncIterator]();
    try {
      for (;;) {
        const next = await Promise.race([iterator.next(), lost]);
        if (next.done) return;
        yield next.value.json;
      }
    } catch (error) {
      throw translateUnavailable(error);
    } finally {
      this.client.off('error', onLost);
      this.client.off('end', onLost);
    }
  }

  /**
   * Returns the connection to the pool at once, also when the client went away mid-stream: the cursor is
   * closed and the read-only transaction ended. A connection that died, or does not close its cursor in
   * time, is discarded instead.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.connectionLost) {
      this.client.release(this.connectionLost);
      return;
    }
    try {
      const stream = this.stream;
      if (stream && !stream.destroyed) {
        // Rejects (and the connection is discarded) when the cursor does not close in time.
        const closed = once(stream, 'close', { signal: AbortSignal.timeout(CURSOR_CLOSE_TIMEOUT_MS) });
        stream.destroy();
        await closed;
      }
      await this.client.query('ROLLBACK');
      this.client.release();
    } catch (error) {
      this.client.release(error as Error);
    }
  }
}

const CURSOR_CLOSE_TIMEOUT_MS = 2_000;
