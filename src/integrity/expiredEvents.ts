import type { Queryable } from '../db/database.ts';

/**
 * What the expiry recorded of an event it removed (expired_events and its batch, migrations/020): read here,
 * below the lifecycle layer that writes it (src/lifecycle/expiryStore.ts), so that a proof request can say
 * "expired" rather than "unknown".
 */
/** Why an event is no longer served: the batch that expired it, or undefined when it never expired. */
export async function findExpiredEvent(
  db: Queryable,
  tenantId: string,
  eventId: string,
): Promise<{ expiredAt: Date; retain: string; source: string } | undefined> {
  const { rows } = await db.query<{ requested_at: Date; retain: string; source: string }>(
    `SELECT b.requested_at, b.retain, b.source FROM expired_events x JOIN expiry_batches b ON b.id = x.batch_id
      WHERE x.tenant_id = $1 AND x.event_id = $2::uuid`,
    [tenantId, eventId],
  );
  const row = rows[0];
  return row ? { expiredAt: row.requested_at, retain: row.retain, source: row.source } : undefined;
}

/** An expired event's leaf, as an export with proofs lists it (docs/integrity.md "Expired events"). */
export type ExpiredLeafRow = {
  readonly event_id: string;
  readonly timestamp: string;
  readonly leaf_index: number;
  readonly expired_at: string;
  readonly retain: string;
  readonly source: string;
};

const ISO = (column: string) => `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

/**
 * The leaves below `treeSize` whose events expired (recorded in expired_events and not stored again since),
 * with a timestamp in [sinceMs, untilMs), in leaf order, each with its first expiry. A tenant that never
 * expired anything costs one index probe: the leaf scan runs only when expired_events holds a row of it.
 */
export async function expiredLeaves(
  db: Queryable,
  tenantId: string,
  treeSize: number,
  window: { readonly sinceMs?: number; readonly untilMs?: number },
): Promise<ExpiredLeafRow[]> {
  const since = window.sinceMs === undefined ? null : new Date(window.sinceMs).toISOString();
  const until = window.untilMs === undefined ? null : new Date(window.untilMs).toISOString();
  const { rows } = await db.query<ExpiredLeafRow>(
    `SELECT DISTINCT ON (l.leaf_index) x.event_id::text, ${ISO('x.occurred_at')} AS timestamp, l.leaf_index::int AS leaf_index,
            ${ISO('b.requested_at')} AS expired_at, b.retain, b.source
       FROM (SELECT r.first_leaf + k.position - 1 AS leaf_index, k.event_occurred_at, k.event_id
               FROM merkle_leaf_ranges r
               CROSS JOIN LATERAL unnest(r.event_occurred_at, r.event_ids) WITH ORDINALITY AS k(event_occurred_at, event_id, position)
              WHERE r.tenant_id = $1 AND r.first_leaf < $2
                AND ($3::timestamptz IS NULL OR r.max_occurred_at >= $3) AND ($4::timestamptz IS NULL OR r.min_occurred_at < $4)
                AND EXISTS (SELECT 1 FROM expired_events WHERE tenant_id = $1)) l
       JOIN expired_events x ON x.tenant_id = $1 AND x.event_id = l.event_id AND x.occurred_at = l.event_occurred_at
       JOIN expiry_batches b ON b.id = x.batch_id
      WHERE l.leaf_index < $2
        AND ($3::timestamptz IS NULL OR x.occurred_at >= $3) AND ($4::timestamptz IS NULL OR x.occurred_at < $4)
        -- Stored again after it expired (a producer's retry): served, so not expired.
        AND NOT EXISTS (SELECT 1 FROM events e WHERE e.tenant_id = $1 AND e.occurred_at = x.occurred_at AND e.event_id = x.event_id)
      ORDER BY l.leaf_index, b.requested_at`,
    [tenantId, treeSize, since, until],
  );
  return rows;
}
