import { prepared, type Queryable } from '../db/database.ts';

/**
 * SQL of the delivery log (docs/webhooks.md "Delivery log"): an endpoint's deliveries newest first and one
 * delivery's attempts. Reads only; the outbox (deliveryOutbox.ts) owns the writes of the delivery path.
 */

/** The states a delivery row can be in (migrations/003, 009, 029). */
export type DeliveryState = 'pending' | 'parked' | 'queued' | 'succeeded' | 'failed' | 'cancelled';
export const DELIVERY_STATES: readonly DeliveryState[] = ['pending', 'parked', 'queued', 'succeeded', 'failed', 'cancelled'];

/** Where the next page starts: the last delivery returned, in log order (created_at DESC, id DESC). */
export interface DeliveryLogPosition {
  /** created_at in epoch microseconds: the column's own precision, so no two rows compare equal by mistake. */
  readonly createdAtUs: string;
  readonly id: string;
}

export interface DeliveryLogQuery {
  readonly endpointId: string;
  readonly states: readonly DeliveryState[];
  readonly sinceMs?: number;
  readonly untilMs?: number;
  readonly after?: DeliveryLogPosition;
  readonly limit: number;
}

export interface DeliveryLogEntry {
  readonly id: string;
  readonly eventId: string;
  /** undefined when the event's partition has been dropped by retention. */
  readonly action: string | undefined;
  readonly state: DeliveryState;
  readonly attempts: number;
  readonly createdAt: Date;
  readonly dueAt: Date;
  readonly lastAttemptAt: Date | null;
  readonly lastStatusCode: number | null;
  readonly lastError: string | null;
  readonly failureCounted: boolean;
  readonly position: DeliveryLogPosition;
}

interface EntryRow {
  id: string;
  event_id: string;
  action: string | null;
  state: DeliveryState;
  attempts: number;
  created_at: Date;
  created_us: string;
  due_at: Date;
  failure_counted: boolean;
  last_attempt_at: Date | null;
  last_status_code: number | null;
  last_error: string | null;
  [column: string]: unknown;
}

const US_TO_TIMESTAMP = (param: string) => `(timestamptz 'epoch' + ${param}::int8 * interval '1 microsecond')`;

/**
 * The delivery's event's action (an operational notice's type, for an operational endpoint's) and its latest
 * attempt, for rows of `page` (columns of deliveries).
 */
const ENTRY_COLUMNS = `d.id::text AS id, d.event_id::text AS event_id, COALESCE(e.action, o.type) AS action, d.state, d.attempts, d.created_at,
       (extract(epoch FROM d.created_at) * 1000000)::int8::text AS created_us, d.due_at, d.failure_counted,
       a.attempted_at AS last_attempt_at, a.status_code AS last_status_code, a.error AS last_error`;
const ENTRY_JOINS = `LEFT JOIN events e ON e.tenant_id = d.tenant_id AND e.occurred_at = d.event_occurred_at AND e.event_id = d.event_id
  LEFT JOIN webhook_operational_events o ON e.event_id IS NULL AND o.id = d.event_id AND o.tenant_id = d.tenant_id
  LEFT JOIN delivery_attempts a ON a.delivery_id = d.id AND a.attempt = d.attempts`;

/**
 * One page of an endpoint's log, up to `limit` rows. Each state asked for is one backward range of the
 * deliveries_log index (endpoint, state, created_at, id) read for at most `limit` rows, and the ranges are
 * merged: a page costs the same on an endpoint with millions of deliveries as on a new one, whatever the
 * status filter.
 */
export async function listEndpointDeliveries(db: Queryable, query: DeliveryLogQuery): Promise<DeliveryLogEntry[]> {
  const values: unknown[] = [query.endpointId, query.limit];
  const conditions: string[] = [];
  if (query.sinceMs !== undefined) {
    values.push(new Date(query.sinceMs).toISOString());
    conditions.push(`d.created_at >= $${values.length}::timestamptz`);
  }
  if (query.untilMs !== undefined) {
    values.push(new Date(query.untilMs).toISOString());
    conditions.push(`d.created_at < $${values.length}::timestamptz`);
  }
  if (query.after) {
    values.push(query.after.createdAtUs, query.after.id);
    conditions.push(`(d.created_at, d.id) < (${US_TO_TIMESTAMP(`$${values.length - 1}`)}, $${values.length}::int8)`);
  }
  const ranges = query.states.map((state) => {
    values.push(state);
    const where = ['d.endpoint_id = $1', `d.state = $${values.length}`, ...conditions].join(' AND ');
    return `(SELECT d.id, d.created_at FROM deliveries d WHERE ${where} ORDER BY d.created_at DESC, d.id DESC LIMIT $2)`;
  });
  const { rows } = await db.query<EntryRow>(
    prepared(
      `WITH page AS (SELECT id, created_at FROM (${ranges.join(' UNION ALL ')}) merged ORDER BY created_at DESC, id DESC LIMIT $2)
       SELECT ${ENTRY_COLUMNS}
       FROM page JOIN deliveries d ON d.id = page.id
       ${ENTRY_JOINS}
       ORDER BY page.created_at DESC, page.id DESC`,
      values,
    ),
  );
  return rows.map(toEntry);
}

/** One delivery of the endpoint, or undefined (unknown, or another endpoint's). */
export async function findEndpointDelivery(db: Queryable, endpointId: string, deliveryId: string): Promise<DeliveryLogEntry | undefined> {
  const { rows } = await db.query<EntryRow>(
    prepared(`SELECT ${ENTRY_COLUMNS} FROM deliveries d ${ENTRY_JOINS} WHERE d.id = $1::int8 AND d.endpoint_id = $2`, [
      deliveryId,
      endpointId,
    ]),
  );
  return rows[0] ? toEntry(rows[0]) : undefined;
}

export interface AttemptEntry {
  readonly attempt: number;
  readonly startedAt: Date;
  readonly durationMs: number;
  readonly statusCode: number | null;
  readonly error: string | null;
  readonly responseExcerpt: string;
}

/** A delivery's attempt records, first first. */
export async function listDeliveryAttempts(db: Queryable, deliveryId: string): Promise<AttemptEntry[]> {
  const { rows } = await db.query<{
    attempt: number;
    attempted_at: Date;
    duration_ms: number;
    status_code: number | null;
    error: string | null;
    response_excerpt: string;
  }>(
    prepared(
      `SELECT attempt, attempted_at, duration_ms, status_code, error, response_excerpt
       FROM delivery_attempts WHERE delivery_id = $1::int8 ORDER BY attempt`,
      [deliveryId],
    ),
  );
  return rows.map((row) => ({
    attempt: row.attempt,
    startedAt: row.attempted_at,
    durationMs: row.duration_ms,
    statusCode: row.status_code,
    error: row.error,
    responseExcerpt: row.response_excerpt,
  }));
}

function toEntry(row: EntryRow): DeliveryLogEntry {
  return {
    id: row.id,
    eventId: row.event_id,
    action: row.action ?? undefined,
    state: row.state,
    attempts: row.attempts,
    createdAt: row.created_at,
    dueAt: row.due_at,
    lastAttemptAt: row.last_attempt_at,
    lastStatusCode: row.last_status_code,
    lastError: row.last_error,
    failureCounted: row.failure_counted,
    position: { createdAtUs: row.created_us, id: row.id },
  };
}
