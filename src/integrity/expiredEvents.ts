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

export interface ExpiredLeavesWindow {
  readonly sinceMs?: number;
  readonly untilMs?: number;
}

/**
 * Each leaf below $2 whose event expired (recorded in expired_events and not stored again since) with a
 * timestamp in [$3, $4), once per expiry of it (l.leaf_index, x the expired_events row, b its batch). A tenant
 * that never expired anything costs one index probe: the leaf scan runs only when expired_events holds a row of it.
 */
const EXPIRED_LEAVES = `
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
        AND NOT EXISTS (SELECT 1 FROM events e WHERE e.tenant_id = $1 AND e.occurred_at = x.occurred_at AND e.event_id = x.event_id)`;

function windowValues(tenantId: string, treeSize: number, window: ExpiredLeavesWindow): unknown[] {
  const since = window.sinceMs === undefined ? null : new Date(window.sinceMs).toISOString();
  const until = window.untilMs === undefined ? null : new Date(window.untilMs).toISOString();
  return [tenantId, treeSize, since, until];
}

/**
 * Where an export's list of expired leaves must stop to hold at most `cap` of them (as measureExportWindow
 * does for its events): undefined when the window holds no more than `cap`; else the first millisecond to
 * keep, so that the kept leaves are the newest and end on a millisecond boundary. Should more than `cap` share
 * the newest millisecond, that whole millisecond is kept, beyond the cap: a walk could not get past it otherwise.
 */
export async function expiredLeavesCut(
  db: Queryable,
  tenantId: string,
  treeSize: number,
  window: ExpiredLeavesWindow,
  cap: number,
): Promise<number | undefined> {
  const values = [...windowValues(tenantId, treeSize, window), cap + 1];
  const { rows } = await db.query<{ leaves: number; newest_ms: string | null; oldest_ms: string | null }>(
    `SELECT count(*)::int AS leaves, max(ms)::text AS newest_ms, min(ms)::text AS oldest_ms
       FROM (SELECT DISTINCT l.leaf_index, (extract(epoch FROM x.occurred_at) * 1000)::bigint AS ms ${EXPIRED_LEAVES}
              ORDER BY ms DESC, l.leaf_index DESC
              LIMIT $5) newest`,
    values,
  );
  const row = rows[0]!;
  if (row.leaves <= cap) return undefined;
  const newest = Number(row.newest_ms);
  const oldest = Number(row.oldest_ms);
  return newest === oldest ? oldest : oldest + 1;
}

/**
 * The leaves below `treeSize` whose events expired with a timestamp in [sinceMs, untilMs), newest first (the
 * export's order), each with its first expiry. Callers bound the window first (expiredLeavesCut): this holds
 * every row of it in memory.
 */
export async function expiredLeaves(
  db: Queryable,
  tenantId: string,
  treeSize: number,
  window: ExpiredLeavesWindow,
): Promise<ExpiredLeafRow[]> {
  const { rows } = await db.query<ExpiredLeafRow>(
    `SELECT event_id, timestamp, leaf_index, expired_at, retain, source
       FROM (SELECT DISTINCT ON (l.leaf_index) x.event_id::text, ${ISO('x.occurred_at')} AS timestamp, l.leaf_index::int AS leaf_index,
                    ${ISO('b.requested_at')} AS expired_at, b.retain, b.source, x.occurred_at ${EXPIRED_LEAVES}
              ORDER BY l.leaf_index, b.requested_at) leaves
      ORDER BY occurred_at DESC, leaf_index DESC`,
    windowValues(tenantId, treeSize, window),
  );
  return rows;
}
