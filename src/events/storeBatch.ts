import { prepared, type Queryable } from '../db/database.ts';
import { INSERT_EVENTS, eventColumnArrays, type NewEvent, type StoredEventKey } from '../events/eventStore.ts';
import { DELIVERIES_PENDING_CHANNEL, fanOutClauses, fanOutNotification, type FanOutPublisher } from './deliveryOutbox.ts';

const STORED_KEYS = `tenant_id, event_id, (extract(epoch FROM occurred_at) * 1000)::int8 AS occurred_at_ms`;

/**
 * A batch's whole write as one statement: the events, their webhook deliveries (from the rows the insert
 * actually stored, so a producer's retry fans out nothing) and the relays' notification. One statement is
 * atomic without BEGIN and COMMIT, so a batch is one round trip instead of four, and the batch's rows
 * reach Postgres once.
 */
const STORE_BATCH = `WITH stored AS (${INSERT_EVENTS}), ${fanOutClauses('stored', '$1::text[]')}
  SELECT ${STORED_KEYS}, ${fanOutNotification('$18')} AS notified
  FROM stored`;

/**
 * The same for a writer that publishes the deliveries itself: they are written marked published, nobody is
 * woken, and their ids come back on the first row (an uncorrelated subquery runs once).
 */
const STORE_BATCH_FOR_PUBLISHING = `WITH stored AS (${INSERT_EVENTS}), ${fanOutClauses('stored', '$1::text[]', 'writer')}
  SELECT ${STORED_KEYS},
         CASE WHEN row_number() OVER () = 1 THEN (SELECT array_agg(id::text) FROM fan_out_created) END AS delivery_ids
  FROM stored`;

export interface StoredBatch {
  /** The keys of the rows stored (not those of repeats). */
  readonly stored: StoredEventKey[];
  /** With the writer as publisher, the deliveries recorded, marked published; otherwise none. */
  readonly deliveryIds: string[];
}

/** Stores the events not stored before and records their deliveries, for `publisher` to publish. */
export async function storeBatch(
  db: Queryable,
  events: readonly NewEvent[],
  timestamps: readonly string[],
  publisher: FanOutPublisher = 'relay',
): Promise<StoredBatch> {
  if (events.length === 0) return { stored: [], deliveryIds: [] };
  const columns = eventColumnArrays(events, timestamps);
  const { rows } = await db.query<{ tenant_id: string; event_id: string; occurred_at_ms: number; delivery_ids?: string[] | null }>(
    publisher === 'writer'
      ? prepared(STORE_BATCH_FOR_PUBLISHING, columns)
      : prepared(STORE_BATCH, [...columns, DELIVERIES_PENDING_CHANNEL]),
  );
  return {
    stored: rows.map((row) => ({ tenantId: row.tenant_id, eventId: row.event_id, occurredAtMs: row.occurred_at_ms })),
    deliveryIds: rows[0]?.delivery_ids ?? [],
  };
}
