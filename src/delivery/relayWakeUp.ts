/**
 * How writers of the outbox wake the relays (deliveryRelay.ts LISTENs): one NOTIFY per statement that made
 * deliveries due, written here once for the statements that do.
 */

/** Relays LISTEN here, so a new delivery is published at once rather than at the next poll. */
export const DELIVERIES_PENDING_CHANNEL = 'audit_deliveries_pending';

/**
 * The payload of a notification for deliveries made due again with their old due times: released parked
 * ones, and ones a writer could not publish (returnToRelays). Those due times lie below the floor of a
 * relay's quick passes (takeDueDeliveries), so a relay that hears it makes its next pass a full one. The text
 * stays what relays of earlier versions listen for.
 */
export const OLD_DUE_TIMES_PAYLOAD = 'unparked';

/**
 * The payload of a notification for deliveries of ordered endpoints written to wait for their turn: a relay
 * that hears it starts the next delivery of every such endpoint with none under way (orderedDeliveries.ts).
 */
export const QUEUED_PAYLOAD = 'queued';

/**
 * The payload of a notification for a replay created: a relay that hears it looks for replays to run at
 * once, rather than at its next poll (delivery/replayRunner.ts).
 */
export const REPLAYS_PAYLOAD = 'replays';

/** The notification of a created replay, for the statement that creates it (in its transaction). */
export const NOTIFY_REPLAY_CREATED = `pg_notify('${DELIVERIES_PENDING_CHANNEL}', '${REPLAYS_PAYLOAD}')`;

/**
 * Why the relays are woken: new due times (new deliveries, scheduled retries), old ones made due again, or
 * deliveries queued behind others of their ordered endpoint.
 */
export type WakeReason = 'new due times' | 'old due times' | 'queued deliveries';

const PAYLOADS: Record<WakeReason, string> = {
  'new due times': '',
  'old due times': OLD_DUE_TIMES_PAYLOAD,
  'queued deliveries': QUEUED_PAYLOAD,
};

/**
 * A scalar subquery, for a statement's select list, that notifies the relays once if `rows` (a CTE of the
 * rows the statement made due, with a WHERE if only some count) has any: once per statement, not per row,
 * and in the statement's transaction, so the relays hear of it exactly when it commits.
 */
export function wakeRelaysIfAny(rows: string, reason: WakeReason = 'new due times'): string {
  const payload = PAYLOADS[reason];
  return `(SELECT CASE WHEN count(*) > 0 THEN pg_notify('${DELIVERIES_PENDING_CHANNEL}', '${payload}') END FROM ${rows})`;
}
