import { prepared, type Queryable } from '../db/database.ts';

/*
 * SQL on webhook_endpoints for the delivery slice: the conditions fan-out and replays select deliveries with,
 * and the failure counts the outcome recorder reads and writes under the endpoints' locks. webhookStore.ts
 * holds the registry's.
 */

/**
 * SQL for fan-out (delivery/fanOut.ts): the active endpoints of the tenants in the text[] expression
 * `tenants`, with their filters. KEY SHARE, as a foreign key would take for every row: an endpoint being
 * deleted is waited for and then skipped, and one fanned out to is not deleted before the statement's
 * transaction commits (its deletion then removes what it wrote).
 */
export function activeEndpointsOf(tenants: string): string {
  return `SELECT id, tenant_id, event_filter, payload_filter_path, ordered FROM webhook_endpoints
          WHERE tenant_id = ANY(${tenants}) AND active AND kind = 'events' FOR KEY SHARE`;
}

/**
 * The payload filter rule (docs/webhooks.md "Payload filters") as an SQL condition: whether the endpoint's
 * compiled filter `path` (a jsonpath, NULL without a filter) holds for the delivery body members `payload`
 * (migration 029's audit_webhook_payload). Silent: a filter that cannot be evaluated on a body (never
 * expected: filters are predicates over scalars) filters the event out rather than failing the write.
 */
export function payloadFilterMatches(path: string, payload: string): string {
  return `(${path} IS NULL OR jsonb_path_match(${payload}, ${path}, '{}', true) IS TRUE)`;
}

/**
 * The webhook filter rule (docs/webhooks.md) as an SQL condition: whether the action `action` matches the
 * text[] filter `filter`. An entry ending in a dot is a prefix (`phi.` matches every `phi.*` action), any
 * other entry matches that action and the actions below it (`phi.read` matches `phi.read.x`, never
 * `phi.reader`); `[]` matches all. Live fan-out and replays both match with it, so a replayed range selects
 * exactly the events live fan-out would have.
 */
export function eventFilterMatches(filter: string, action: string): string {
  return `(cardinality(${filter}) = 0
          OR EXISTS (SELECT 1 FROM unnest(${filter}) AS entry
                     WHERE ${action} = entry
                        OR starts_with(${action}, CASE WHEN right(entry, 1) = '.' THEN entry ELSE entry || '.' END)))`;
}

/** What a replay's chunk needs of its endpoint to select events as fan-out would. */
export interface FanOutTarget {
  readonly eventFilter: string[];
  readonly payloadFilterPath: string | null;
  readonly ordered: boolean;
  readonly active: boolean;
}

/**
 * The endpoint's filters and whether it is active, KEY SHARE-locked as activeEndpointsOf locks (for a
 * replay's chunk: a deletion waits for it, and a disable is seen by the next one); undefined once deleted.
 */
export async function shareEndpointForFanOut(db: Queryable, id: string): Promise<FanOutTarget | undefined> {
  const { rows } = await db.query<{ event_filter: string[]; payload_filter_path: string | null; ordered: boolean; active: boolean }>(
    'SELECT event_filter, payload_filter_path::text, ordered, active FROM webhook_endpoints WHERE id = $1 FOR KEY SHARE',
    [id],
  );
  const row = rows[0];
  return row
    ? { eventFilter: row.event_filter, payloadFilterPath: row.payload_filter_path, ordered: row.ordered, active: row.active }
    : undefined;
}

/**
 * An endpoint as the outcome recorder reads it (delivery/deliveryStateMachine.ts): its failure count, which it
 * writes back, and the settings the state machine applies.
 */
export interface EndpointCounts {
  readonly active: boolean;
  /** Failed deliveries in a row. */
  readonly consecutiveFailures: number;
  /** last_delivery_at: the last attempt's time, whatever its outcome. */
  readonly lastAttemptAt: Date | null;
  readonly ordered: boolean;
  /** The endpoint's retry schedule in seconds; null for the service's. */
  readonly retryScheduleS: readonly number[] | null;
}

/**
 * Locks the endpoints a batch of outcomes touches, in id order, before any of their deliveries, and reads
 * their counts (stable while the lock is held: every other write of them locks the row too). Disable and
 * delete lock the endpoint first and its deliveries second; taking locks in the same order here is what
 * keeps a worker's outcome write and an API call from deadlocking. Deleted endpoints are absent.
 */
export async function lockEndpoints(db: Queryable, endpointIds: readonly string[]): Promise<Map<string, EndpointCounts>> {
  if (endpointIds.length === 0) return new Map();
  const { rows } = await db.query<{
    id: string;
    active: boolean;
    consecutive_failures: number;
    last_delivery_at: Date | null;
    ordered: boolean;
    retry_schedule_s: number[] | null;
  }>(
    prepared(
      `SELECT id, active, consecutive_failures, last_delivery_at, ordered, retry_schedule_s
       FROM webhook_endpoints WHERE id = ANY($1::text[]) ORDER BY id FOR NO KEY UPDATE`,
      [[...new Set(endpointIds)].sort()],
    ),
  );
  return new Map(
    rows.map((row) => [
      row.id,
      {
        active: row.active,
        consecutiveFailures: row.consecutive_failures,
        lastAttemptAt: row.last_delivery_at,
        ordered: row.ordered,
        retryScheduleS: row.retry_schedule_s,
      },
    ]),
  );
}

/** Writes the counts the state machine arrived at for the endpoints a batch touched (locked by lockEndpoints). */
export async function saveEndpointCounts(db: Queryable, counts: ReadonlyMap<string, EndpointCounts>): Promise<void> {
  if (counts.size === 0) return;
  const entries = [...counts.entries()];
  await db.query(
    prepared(
      `UPDATE webhook_endpoints AS w
     SET consecutive_failures = t.failures, last_delivery_at = t.last_attempt_at
     FROM unnest($1::text[], $2::int[], $3::timestamptz[]) AS t(id, failures, last_attempt_at)
     WHERE w.id = t.id`,
      [
        entries.map(([id]) => id),
        entries.map(([, endpoint]) => endpoint.consecutiveFailures),
        entries.map(([, endpoint]) => endpoint.lastAttemptAt?.toISOString() ?? null),
      ],
    ),
  );
}
