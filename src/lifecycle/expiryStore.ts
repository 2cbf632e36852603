import type { Queryable } from '../db/database.ts';
import type { DutyCycle } from '../platform/dutyCycle.ts';

/**
 * The SQL of expiry (migrations/020_event_expiry.sql): what would expire, the one path that removes events
 * (INSERT INTO expiry_batches), and the partitions dropped once empty. Kept here, beside the policy and hold
 * stores, so that a change of the events table's form (issue 30) touches one module.
 */

/** Tenants that may have events to expire: every tenant with a Merkle tree or a policy of its own. */
export async function expiryCandidates(db: Queryable, tenantId?: string): Promise<string[]> {
  const { rows } = await db.query<{ tenant_id: string }>(
    `SELECT tenant_id FROM merkle_trees WHERE $1::text IS NULL OR tenant_id = $1
     UNION SELECT tenant_id FROM retention_policies WHERE $1::text IS NULL OR tenant_id = $1
     ORDER BY tenant_id`,
    [tenantId ?? null],
  );
  return rows.map((row) => row.tenant_id);
}

export interface MonthPlan {
  /** First instant of the month (UTC). */
  readonly month: Date;
  /** Past the period and held by nothing: the next run removes them. */
  readonly expiring: number;
  /** Past the period, kept by a legal hold in place. */
  readonly held: number;
}

/**
 * Whether the tenant has a legal hold in place, as an uncorrelated subquery (run once per statement, under its
 * snapshot): the hold rule, audit_event_held, costs a function call per row (about 17 µs: it cannot be
 * inlined), and most tenants have no hold, so each query below evaluates it only when this is true.
 */
const TENANT_HAS_HOLD = 'EXISTS (SELECT 1 FROM legal_holds h WHERE h.tenant_id = $1 AND h.released_at IS NULL)';

/** Rows counted per statement of a plan: bounds each one's time on a core (about 20 ms), as a batch's size does. */
const PLAN_CHUNK_ROWS = 10_000;

/**
 * Per month, the tenant's events older than `keptSince`: how many expire and how many holds keep. Counted
 * PLAN_CHUNK_ROWS at a time in key order, each chunk paced by the expiry's duty cycle: counted in one statement,
 * a tenant's backlog of millions held a core for seconds (BENCHMARKS.md, issue 31).
 * Without a hold in place, only the first branch runs, which reads the primary key's index alone.
 */
export async function planTenant(
  db: Queryable,
  tenantId: string,
  keptSince: Date,
  dutyCycle?: DutyCycle,
  chunkRows = PLAN_CHUNK_ROWS,
): Promise<MonthPlan[]> {
  const months = new Map<number, { month: Date; expiring: number; held: number }>();
  let after: [Date | '-infinity', string] = ['-infinity', '00000000-0000-0000-0000-000000000000'];
  for (;;) {
    const started = dutyCycle?.start();
    const { rows } = await db.query<{ month: Date; expiring: string; held: string; counted: string; last_at: Date; last_id: string }>(
      `WITH chunk AS MATERIALIZED (
         (SELECT occurred_at, event_id, false AS held FROM events
           WHERE tenant_id = $1 AND occurred_at < $2::timestamptz AND (occurred_at, event_id) > ($3::timestamptz, $4::uuid)
             AND NOT ${TENANT_HAS_HOLD}
           ORDER BY occurred_at, event_id LIMIT $5)
         UNION ALL
         (SELECT occurred_at, event_id, audit_event_held(tenant_id, occurred_at, action) FROM events
           WHERE tenant_id = $1 AND occurred_at < $2::timestamptz AND (occurred_at, event_id) > ($3::timestamptz, $4::uuid)
             AND ${TENANT_HAS_HOLD}
           ORDER BY occurred_at, event_id LIMIT $5)
       ), last AS (
         SELECT occurred_at, event_id FROM chunk ORDER BY occurred_at DESC, event_id DESC LIMIT 1
       )
       SELECT date_trunc('month', occurred_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' AS month,
              count(*) FILTER (WHERE NOT held) AS expiring, count(*) FILTER (WHERE held) AS held,
              (SELECT count(*) FROM chunk) AS counted, (SELECT occurred_at FROM last) AS last_at,
              (SELECT event_id::text FROM last) AS last_id
         FROM chunk GROUP BY 1 ORDER BY 1`,
      [tenantId, keptSince, after[0], after[1], chunkRows],
    );
    for (const row of rows) {
      const month = months.get(row.month.getTime()) ?? { month: row.month, expiring: 0, held: 0 };
      month.expiring += Number(row.expiring);
      month.held += Number(row.held);
      months.set(row.month.getTime(), month);
    }
    if (rows.length === 0 || Number(rows[0]!.counted) < chunkRows) break;
    after = [rows[0]!.last_at, rows[0]!.last_id];
    if (started !== undefined) await dutyCycle!.pauseAfter(started);
  }
  return [...months.values()].sort((a, b) => a.month.getTime() - b.month.getTime());
}

export interface ExpiryBatch {
  readonly tenantId: string;
  readonly keptSince: Date;
  readonly retain: string;
  readonly source: 'policy' | 'default';
  readonly limit: number;
  readonly requestedBy: string;
  /** The archive object holding what the batch removes (required by the table for a policy with an archive). */
  readonly archiveKey?: string;
  /** Where the previous batch of the pass ended: this one chooses after it (migration 027). */
  readonly resumeAfter?: EventKey;
}

/** An event's place in a tenant's key order. */
export interface EventKey {
  readonly occurredAt: Date;
  readonly eventId: string;
}

export interface ExpiredRange {
  readonly count: number;
  readonly first: Date | null;
  readonly last: Date | null;
}

/**
 * One bounded batch through the one path (its row's trigger removes the events); what it removed, and the key
 * of the last event it recorded (where the next batch of the pass resumes).
 */
export async function expireBatch(db: Queryable, batch: ExpiryBatch): Promise<ExpiredRange & { readonly lastKey?: EventKey }> {
  const inserted = await db.query<{ id: string }>(
    `INSERT INTO expiry_batches (tenant_id, kept_since, retain, source, batch_limit, requested_by, archive_key,
                                 resume_after_at, resume_after_id)
     VALUES ($1, $2::timestamptz, $3, $4, $5::integer, $6, $7, $8::timestamptz, $9::uuid) RETURNING id`,
    [
      batch.tenantId,
      batch.keptSince,
      batch.retain,
      batch.source,
      batch.limit,
      batch.requestedBy,
      batch.archiveKey ?? null,
      batch.resumeAfter?.occurredAt ?? null,
      batch.resumeAfter?.eventId ?? null,
    ],
  );
  const { rows } = await db.query<{ count: string; first: Date | null; last: Date | null; last_id: string | null }>(
    `SELECT count(*) AS count, min(occurred_at) AS first, max(occurred_at) AS last,
            (array_agg(event_id::text ORDER BY occurred_at DESC, event_id DESC))[1] AS last_id
       FROM expired_events WHERE batch_id = $1`,
    [inserted.rows[0]!.id],
  );
  const row = rows[0]!;
  const range = { count: Number(row.count), first: row.first, last: row.last };
  return row.last && row.last_id ? { ...range, lastKey: { occurredAt: row.last, eventId: row.last_id } } : range;
}

/**
 * The upper bound (exclusive) of the next archive object of a tenant: the timestamp of its `size`+1-th oldest
 * unheld event before `keptSince` (so the object holds at most `size`, unless more share that millisecond:
 * then the whole millisecond), or `keptSince` when fewer remain. Undefined when nothing before it expires.
 */
export async function archiveChunkBound(db: Queryable, tenantId: string, keptSince: Date, size: number): Promise<Date | undefined> {
  const { rows } = await db.query<{ occurred_at: Date }>(
    `SELECT occurred_at FROM events
      WHERE tenant_id = $1 AND occurred_at < $2::timestamptz
        AND (NOT ${TENANT_HAS_HOLD} OR NOT audit_event_held(tenant_id, occurred_at, action))
      ORDER BY occurred_at, event_id LIMIT 2 OFFSET $3::integer - 1`,
    [tenantId, keptSince, size],
  );
  if (rows.length === 0) {
    const first = await db.query(
      `SELECT 1 FROM events WHERE tenant_id = $1 AND occurred_at < $2::timestamptz
          AND (NOT ${TENANT_HAS_HOLD} OR NOT audit_event_held(tenant_id, occurred_at, action)) LIMIT 1`,
      [tenantId, keptSince],
    );
    return first.rows.length > 0 ? keptSince : undefined;
  }
  if (rows.length === 1) return keptSince;
  // The size-th and the next: a bound just after the size-th keeps its whole millisecond in the object.
  return new Date(Math.min(rows[0]!.occurred_at.getTime() + 1, keptSince.getTime()));
}

/** The ids of the tenant's events before `until` that a legal hold keeps: not archived, since not expired. */
export async function heldEventIds(db: Queryable, tenantId: string, until: Date): Promise<Set<string>> {
  const { rows } = await db.query<{ event_id: string }>(
    `SELECT event_id FROM events
      WHERE tenant_id = $1 AND occurred_at < $2::timestamptz AND ${TENANT_HAS_HOLD}
        AND audit_event_held(tenant_id, occurred_at, action)`,
    [tenantId, until],
  );
  return new Set(rows.map((row) => row.event_id));
}

/** Records which events an archive object holds: a batch naming the object removes only those (migration 024). */
export async function recordArchivedEvents(
  db: Queryable,
  tenantId: string,
  archiveKey: string,
  events: ReadonlyArray<{ readonly eventId: string; readonly occurredAtMs: number }>,
): Promise<void> {
  await db.query(
    `INSERT INTO expiry_archived_events (tenant_id, archive_key, event_id, occurred_at)
     SELECT $1, $2, k.event_id, k.occurred_at FROM unnest($3::uuid[], $4::timestamptz[]) AS k(event_id, occurred_at)`,
    [tenantId, archiveKey, events.map((event) => event.eventId), events.map((event) => new Date(event.occurredAtMs).toISOString())],
  );
}

/** Drops the month partitions nothing is kept in; their names. */
export async function dropExpiredPartitions(db: Queryable): Promise<string[]> {
  // Dropping a partition locks the events table for a moment: waited for at most 2 s, else the next run.
  await db.query("SET LOCAL lock_timeout = '2s'");
  const { rows } = await db.query<{ name: string }>('SELECT audit_drop_expired_partitions() AS name');
  return rows.map((row) => row.name);
}

/**
 * Dead rows, as a share of a partition's rows, at which a pass vacuums it. Autovacuum's own default is 0.2;
 * below it, a pass steps over at most a tenth of the partition in dead rows before the next vacuum.
 */
const VACUUM_DEAD_SHARE = 0.1;

/**
 * The month partitions a pass removed from (its removed count per month) whose dead rows reach
 * VACUUM_DEAD_SHARE, as quoted identifiers. The statistics' dead-row count may lag the last second of deletes
 * (each backend reports at most once a second), so the pass's own count stands in when it is larger.
 */
export async function partitionsDueForVacuum(
  db: Queryable,
  removed: ReadonlyArray<{ readonly month: Date; readonly count: number }>,
): Promise<string[]> {
  const { rows } = await db.query<{ name: string }>(
    `SELECT quote_ident(s.relname) AS name
       FROM unnest($1::timestamptz[], $2::bigint[]) AS p(month, removed)
       JOIN pg_stat_user_tables s ON s.relid = to_regclass('events_' || to_char(p.month AT TIME ZONE 'UTC', 'YYYY_MM'))
      WHERE greatest(s.n_dead_tup, p.removed) > 0
        AND greatest(s.n_dead_tup, p.removed) >= $3::float8 * greatest(s.n_live_tup + s.n_dead_tup, p.removed)
      ORDER BY s.relname`,
    [removed.map((month) => month.month), removed.map((month) => month.count), VACUUM_DEAD_SHARE],
  );
  return rows.map((row) => row.name);
}

/**
 * VACUUM (ANALYZE) of the named partitions (quoted identifiers from partitionsDueForVacuum) on a connection of
 * its own, paced as autovacuum paces itself (a 2 ms rest after every 200 units of page work) and on one core (no
 * parallel index workers), so that it takes its time rather than ingestion's. Without it, the rows a pass
 * removes stay in the heap and in every index of the partition until something vacuums them; with autovacuum
 * off nothing does, and each later pass started by stepping over all of them (BENCHMARKS.md, issue 31).
 * ANALYZE as well, as autovacuum would: a VACUUM alone sets the partition's row count but leaves its columns
 * without statistics, and with that mix the planner chose a batch's rows by reading the tenant's whole expired
 * range in another index and sorting it (96,000 heap fetches for a batch of 1,000) instead of the primary key
 * in order. A partition another VACUUM holds is skipped (SKIP_LOCKED): that one does the work.
 */
export async function vacuumPartitions(connection: Queryable, names: readonly string[]): Promise<void> {
  if (names.length === 0) return;
  await connection.query(`SET vacuum_cost_delay = '2ms'`);
  await connection.query('SET vacuum_cost_limit = 200');
  try {
    await connection.query(`VACUUM (ANALYZE, PARALLEL 0, SKIP_LOCKED) ${names.join(', ')}`);
  } finally {
    await connection.query('RESET vacuum_cost_delay');
    await connection.query('RESET vacuum_cost_limit');
  }
}
