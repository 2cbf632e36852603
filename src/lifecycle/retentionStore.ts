import type { Queryable } from '../db/database.ts';
import type { RetentionPeriod } from '../config/valueFormats.ts';

/**
 * The SQL of retention policies (migrations/017_retention_policies.sql). Every statement of the lifecycle
 * that reads or writes policies is here, so that a change of the tables' form touches one module.
 */

/** A tenant's own policy, as stored. */
export interface RetentionPolicyRecord {
  readonly tenantId: string;
  readonly period: RetentionPeriod;
  readonly locked: boolean;
  readonly archive: Readonly<Record<string, unknown>> | null;
  readonly managedBy: string;
  readonly updatedAt: Date;
}

interface PolicyRow {
  tenant_id: string;
  retain: string;
  retain_months: number;
  retain_days: number;
  locked: boolean;
  archive: Record<string, unknown> | null;
  managed_by: string;
  updated_at: Date;
  [column: string]: unknown;
}

const COLUMNS = 'tenant_id, retain, retain_months, retain_days, locked, archive, managed_by, updated_at';

function toRecord(row: PolicyRow): RetentionPolicyRecord {
  return {
    tenantId: row.tenant_id,
    period: { text: row.retain, months: row.retain_months, days: row.retain_days },
    locked: row.locked,
    archive: row.archive,
    managedBy: row.managed_by,
    updatedAt: row.updated_at,
  };
}

/** The tenant's policy; `forUpdate` locks its row for the rest of the transaction (a change decided on it). */
export async function findRetentionPolicy(db: Queryable, tenantId: string, forUpdate = false): Promise<RetentionPolicyRecord | undefined> {
  const { rows } = await db.query<PolicyRow>(
    `SELECT ${COLUMNS} FROM retention_policies WHERE tenant_id = $1${forUpdate ? ' FOR UPDATE' : ''}`,
    [tenantId],
  );
  return rows[0] ? toRecord(rows[0]) : undefined;
}

/** The policy a resource declared, whatever its tenant. */
export async function findManagedRetentionPolicy(
  db: Queryable,
  managedBy: string,
  forUpdate = false,
): Promise<RetentionPolicyRecord | undefined> {
  const { rows } = await db.query<PolicyRow>(
    `SELECT ${COLUMNS} FROM retention_policies WHERE managed_by = $1${forUpdate ? ' FOR UPDATE' : ''}`,
    [managedBy],
  );
  return rows[0] ? toRecord(rows[0]) : undefined;
}

export type NewRetentionPolicy = Omit<RetentionPolicyRecord, 'updatedAt'>;

/** Creates the tenant's policy or replaces the one the same resource declared before. */
export async function upsertRetentionPolicy(db: Queryable, policy: NewRetentionPolicy): Promise<RetentionPolicyRecord> {
  const { rows } = await db.query<PolicyRow>(
    `INSERT INTO retention_policies (tenant_id, retain, retain_months, retain_days, locked, archive, managed_by)
     VALUES ($1, $2, $3::integer, $4::integer, $5::boolean, $6::jsonb, $7)
     ON CONFLICT (tenant_id) DO UPDATE
        SET retain = EXCLUDED.retain, retain_months = EXCLUDED.retain_months, retain_days = EXCLUDED.retain_days,
            locked = EXCLUDED.locked, archive = EXCLUDED.archive, updated_at = now()
      WHERE retention_policies.managed_by = EXCLUDED.managed_by
     RETURNING ${COLUMNS}`,
    [
      policy.tenantId,
      policy.period.text,
      policy.period.months,
      policy.period.days,
      policy.locked,
      policy.archive === null ? null : JSON.stringify(policy.archive),
      policy.managedBy,
    ],
  );
  if (!rows[0]) throw new Error(`tenant ${policy.tenantId} has a retention policy declared by another resource`);
  return toRecord(rows[0]);
}

/** Removes a resource's policy (the trigger refuses a locked one). */
export async function deleteRetentionPolicy(db: Queryable, managedBy: string): Promise<void> {
  await db.query('DELETE FROM retention_policies WHERE managed_by = $1', [managedBy]);
}

/**
 * The first instant still kept under `period` as of the database's clock: events strictly before it are past
 * their period. Computed by Postgres, whose calendar arithmetic (31 March minus a month is 28 or 29
 * February) is the one expiry uses.
 */
export async function retentionCutoff(db: Queryable, period: RetentionPeriod): Promise<Date> {
  const { rows } = await db.query<{ cutoff: Date }>('SELECT now() - make_interval(months => $1::integer, days => $2::integer) AS cutoff', [
    period.months,
    period.days,
  ]);
  return rows[0]!.cutoff;
}
