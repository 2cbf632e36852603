import type { Queryable } from '../db/database.ts';

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

/** Per month, the tenant's events older than `keptSince`: how many expire and how many holds keep. */
export async function planTenant(db: Queryable, tenantId: string, keptSince: Date): Promise<MonthPlan[]> {
  const { rows } = await db.query<{ month: Date; expiring: string; held: string }>(
    `SELECT date_trunc('month', occurred_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' AS month,
            count(*) FILTER (WHERE NOT held) AS expiring, count(*) FILTER (WHERE held) AS held
       FROM (SELECT occurred_at, audit_event_held(tenant_id, occurred_at, action) AS held
               FROM events WHERE tenant_id = $1 AND occurred_at < $2::timestamptz) past
      GROUP BY 1 ORDER BY 1`,
    [tenantId, keptSince],
  );
  return rows.map((row) => ({ month: row.month, expiring: Number(row.expiring), held: Number(row.held) }));
}

export interface ExpiryBatch {
  readonly tenantId: string;
  readonly keptSince: Date;
  readonly retain: string;
  readonly source: 'policy' | 'default';
  readonly limit: number;
  readonly requestedBy: string;
}

export interface ExpiredRange {
  readonly count: number;
  readonly first: Date | null;
  readonly last: Date | null;
}

/** One bounded batch through the one path (its row's trigger removes the events); what it removed. */
export async function expireBatch(db: Queryable, batch: ExpiryBatch): Promise<ExpiredRange> {
  const inserted = await db.query<{ id: string }>(
    `INSERT INTO expiry_batches (tenant_id, kept_since, retain, source, batch_limit, requested_by)
     VALUES ($1, $2::timestamptz, $3, $4, $5::integer, $6) RETURNING id`,
    [batch.tenantId, batch.keptSince, batch.retain, batch.source, batch.limit, batch.requestedBy],
  );
  const { rows } = await db.query<{ count: string; first: Date | null; last: Date | null }>(
    'SELECT count(*) AS count, min(occurred_at) AS first, max(occurred_at) AS last FROM expired_events WHERE batch_id = $1',
    [inserted.rows[0]!.id],
  );
  const row = rows[0]!;
  return { count: Number(row.count), first: row.first, last: row.last };
}

/** Drops the month partitions nothing is kept in; their names. */
export async function dropExpiredPartitions(db: Queryable): Promise<string[]> {
  // Dropping a partition locks the events table for a moment: waited for at most 2 s, else the next run.
  await db.query("SET LOCAL lock_timeout = '2s'");
  const { rows } = await db.query<{ name: string }>('SELECT audit_drop_expired_partitions() AS name');
  return rows.map((row) => row.name);
}
