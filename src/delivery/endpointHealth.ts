import { prepared, type Queryable } from '../db/database.ts';
import { DELIVERY_STATES } from './deliveryLog.ts';

/**
 * How an endpoint is doing (docs/webhooks.md "Endpoint health"), from its recent attempts as they were: a 2xx
 * answer is a success, anything else (a 401, a 500, a timeout, a refused connection) a failure, whether or
 * not the delivery will be retried. consecutive_failures on the endpoint counts only deliveries that ran out
 * of attempts; an endpoint answering 401 to every first attempt has none of those for hours, and is failing.
 *
 * What is read is bounded: the endpoint's newest HEALTH_DELIVERIES deliveries created in the last 24 hours
 * (one range of the deliveries_log index per state, merged, as the delivery log reads it) and their attempts.
 */
export const HEALTH_DELIVERIES = 1000;

export interface EndpointHealth {
  readonly attempts: number;
  readonly succeeded: number;
  /** succeeded / attempts, or null without attempts. */
  readonly successRate: number | null;
  /** Failed attempts since the last successful one (all of the window's when none succeeded). */
  readonly failingStreak: number;
  /** Deliveries waiting for a retry after a failed attempt. */
  readonly retrying: number;
  readonly lastSuccessAt: Date | null;
  readonly lastFailure: { readonly at: Date; readonly statusCode: number | null; readonly error: string | null } | null;
}

interface HealthRow {
  [column: string]: unknown;
  attempts: number;
  succeeded: number;
  failing_streak: number;
  retrying: number;
  last_success_at: Date | null;
  last_failure_at: Date | null;
  last_failure_status: number | null;
  last_failure_error: string | null;
}

export async function endpointHealth(db: Queryable, endpointId: string): Promise<EndpointHealth> {
  const ranges = DELIVERY_STATES.map(
    (state) =>
      `(SELECT d.id, d.created_at, d.state, d.attempts FROM deliveries d
         WHERE d.endpoint_id = $1 AND d.state = '${state}' AND d.created_at >= now() - interval '24 hours'
         ORDER BY d.created_at DESC, d.id DESC LIMIT $2)`,
  );
  const { rows } = await db.query<HealthRow>(
    prepared(
      `WITH recent AS (SELECT * FROM (${ranges.join(' UNION ALL ')}) merged ORDER BY created_at DESC, id DESC LIMIT $2),
            tried AS (SELECT a.attempted_at, a.status_code, a.error, coalesce(a.status_code BETWEEN 200 AND 299, false) AS ok
                        FROM recent r JOIN delivery_attempts a ON a.delivery_id = r.id),
            last_ok AS (SELECT max(attempted_at) AS at FROM tried WHERE ok),
            last_failure AS (SELECT attempted_at, status_code, error FROM tried WHERE NOT ok ORDER BY attempted_at DESC LIMIT 1)
       SELECT (SELECT count(*) FROM tried)::int AS attempts,
              (SELECT count(*) FROM tried WHERE ok)::int AS succeeded,
              (SELECT count(*) FROM tried, last_ok WHERE NOT ok AND (last_ok.at IS NULL OR tried.attempted_at > last_ok.at))::int AS failing_streak,
              (SELECT count(*) FROM recent WHERE state = 'pending' AND attempts > 0)::int AS retrying,
              (SELECT at FROM last_ok) AS last_success_at,
              lf.attempted_at AS last_failure_at, lf.status_code AS last_failure_status, lf.error AS last_failure_error
         FROM (SELECT 1) one LEFT JOIN last_failure lf ON true`,
      [endpointId, HEALTH_DELIVERIES],
    ),
  );
  const row = rows[0]!;
  return {
    attempts: row.attempts,
    succeeded: row.succeeded,
    successRate: row.attempts === 0 ? null : row.succeeded / row.attempts,
    failingStreak: row.failing_streak,
    retrying: row.retrying,
    lastSuccessAt: row.last_success_at,
    lastFailure: row.last_failure_at && { at: row.last_failure_at, statusCode: row.last_failure_status, error: row.last_failure_error },
  };
}
