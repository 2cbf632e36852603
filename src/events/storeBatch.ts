import { prepared, type Queryable } from '../db/database.ts';
import { INSERT_EVENTS, eventColumnArrays, type NewEvent, type StoredEventKey } from '../events/eventStore.ts';
import { DELIVERIES_PENDING_CHANNEL, fanOutClauses, fanOutNotification } from './deliveryOutbox.ts';

/**
 * A batch's whole write as one statement: the events, their webhook deliveries (from the rows the insert
 * actually stored, so a producer's retry fans out nothing) and the relays' notification. One statement is
 * atomic without BEGIN and COMMIT, so a batch is one round trip instead of four, and the batch's rows
 * reach Postgres once.
 */
const STORE_BATCH = `WITH stored AS (${INSERT_EVENTS}), ${fanOutClauses('stored', '$1::text[]')}
  SELECT tenant_id, event_id, (extract(epoch FROM occurred_at) * 1000)::int8 AS occurred_at_ms,
         ${fanOutNotification('$18')} AS notified
  FROM stored`;

/** Stores the events not stored before and records their deliveries; returns the keys of the rows stored. */
export async function storeBatch(db: Queryable, events: readonly NewEvent[], timestamps: readonly string[]): Promise<StoredEventKey[]> {
  if (events.length === 0) return [];
  const { rows } = await db.query<{ tenant_id: string; event_id: string; occurred_at_ms: number }>(
    prepared(STORE_BATCH, [...eventColumnArrays(events, timestamps), DELIVERIES_PENDING_CHANNEL]),
  );
  return rows.map((row) => ({ tenantId: row.tenant_id, eventId: row.event_id, occurredAtMs: row.occurred_at_ms }));
}
