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
