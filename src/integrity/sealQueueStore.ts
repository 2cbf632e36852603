import type pg from 'pg';
import { prepared, type Queryable } from '../db/database.ts';
import { EVENT_DOCUMENT } from '../events/eventStore.ts';
import { HASH_BYTES } from './tiles.ts';

/**
 * SQL of the seal queue: what the write path queued for sealing (a row per statement and tenant), taken by the
 * sealer in order, and how long the oldest has waited. The tree it is appended to is sealStore.ts.
 */

/** A queue row: one statement's events of one tenant, in leaf order. */
export interface QueueRow {
  readonly queueId: number;
  readonly eventCount: number;
  /**
   * The events' leaf hashes as their writer computed them, 32 bytes each in the row's order; undefined
   * when the row has none (queued before migration 012, or by a writer that gives none).
   */
  readonly leafHashes: Buffer | undefined;
}

/**
 * The oldest queue rows of a tenant, as many as start below `maxEvents` events (a row holds at most 5,000),
 * in queue order. Only the queue is read: the events themselves are read only for rows without hashes
 * (queuedDocuments).
 */
export async function takeQueueRows(client: pg.PoolClient, tenantId: string, maxEvents: number): Promise<QueueRow[]> {
  const query: pg.QueryArrayConfig = {
    ...prepared(
      `SELECT id, event_count, leaf_hashes
         FROM (SELECT id, event_count, leaf_hashes, sum(event_count) OVER (ORDER BY id) - event_count AS before
                 FROM seal_queue WHERE tenant_id = $1) counted
        WHERE before < $2
        ORDER BY id`,
      [tenantId, maxEvents],
    ),
    rowMode: 'array',
  };
  type Row = [queueId: number, eventCount: number, leafHashes: Buffer | null];
  const rows = (await client.query(query)).rows as unknown as Row[];
  return rows.map(([queueId, eventCount, leafHashes]) => ({
    queueId,
    eventCount,
    // The table's CHECK guarantees the length; checked again here because a wrong one would shift leaves.
    leafHashes: leafHashes !== null && leafHashes.length === eventCount * HASH_BYTES ? leafHashes : undefined,
  }));
}

export interface QueuedEvent {
  readonly queueId: number;
  /** The event as the API serves it; undefined if the row is gone. */
  readonly document: string | undefined;
  /** Postgres' text forms of the event's key, given only when the row is gone (to report it). */
  readonly missingKey: { readonly occurredAt: string; readonly eventId: string } | undefined;
}

/**
 * The events of these queue rows, in queue order, with the documents the API serves for them: a leaf is
 * the hash of exactly what a reader gets (eventStore.EVENT_DOCUMENT). For rows whose writer gave no leaf
 * hashes.
 */
export async function queuedDocuments(client: pg.PoolClient, tenantId: string, queueIds: readonly number[]): Promise<QueuedEvent[]> {
  const query: pg.QueryArrayConfig = {
    ...prepared(
      `SELECT q.id, k.position, ${EVENT_DOCUMENT},
              CASE WHEN e.event_id IS NULL THEN k.occurred_at::text END, CASE WHEN e.event_id IS NULL THEN k.event_id::text END
         FROM seal_queue q
         CROSS JOIN LATERAL unnest(q.event_occurred_at, q.event_ids) WITH ORDINALITY AS k(occurred_at, event_id, position)
         LEFT JOIN events e ON e.tenant_id = $1 AND e.occurred_at = k.occurred_at AND e.event_id = k.event_id
        WHERE q.tenant_id = $1 AND q.id = ANY($2::bigint[])`,
      [tenantId, queueIds],
    ),
    rowMode: 'array',
  };
  type Row = [queueId: number, position: number, document: string | null, occurredAt: string | null, eventId: string | null];
  const rows = (await client.query(query)).rows as unknown as Row[];
  // Ordered here rather than by Postgres, which would sort the documents along (spilling to disk): the
  // rows arrive nearly in order already, which is cheap to sort.
  rows.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  return rows.map(([queueId, , document, occurredAt, eventId]) => ({
    queueId,
    document: document ?? undefined,
    missingKey: document === null ? { occurredAt: occurredAt!, eventId: eventId! } : undefined,
  }));
}

/** Queue rows whose events were all gone when their turn came (only a tampered store has such rows). */
export async function dropQueueRows(client: pg.PoolClient, tenantId: string, queueIds: readonly number[]): Promise<void> {
  await client.query('DELETE FROM seal_queue WHERE tenant_id = $1 AND id = ANY($2::bigint[])', [tenantId, queueIds]);
}

/** Seconds since the oldest queued event was committed; 0 when nothing waits. */
export async function oldestUnsealedAgeSeconds(db: Queryable): Promise<number> {
  const { rows } = await db.query<{ age: number | null }>(
    'SELECT extract(epoch FROM clock_timestamp() - min(enqueued_at))::float8 AS age FROM seal_queue',
  );
  return Math.max(0, rows[0]?.age ?? 0);
}
