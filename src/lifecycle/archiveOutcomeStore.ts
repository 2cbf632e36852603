import type { Queryable } from '../db/database.ts';

/**
 * The last archive outcome of a tenant (migrations/025_expiry_archive_outcomes.sql): the expiry pass writes
 * it, the RetentionPolicy controller shows a failure on the resource until a later pass archives again.
 */

/** Records a pass's archive outcome: the failure's reason, or null for objects written and read back. */
export async function recordArchiveOutcome(db: Queryable, tenantId: string, failure: string | null): Promise<void> {
  await db.query(
    failure === null
      ? `INSERT INTO expiry_archive_outcomes (tenant_id, last_succeeded_at) VALUES ($1, now())
         ON CONFLICT (tenant_id) DO UPDATE SET last_succeeded_at = now()`
      : `INSERT INTO expiry_archive_outcomes (tenant_id, last_failed_at, last_failure) VALUES ($1, now(), $2)
         ON CONFLICT (tenant_id) DO UPDATE SET last_failed_at = now(), last_failure = $2`,
    failure === null ? [tenantId] : [tenantId, failure],
  );
}

/** The tenant's archive failure when no pass archived since; undefined otherwise. */
export async function currentArchiveFailure(db: Queryable, tenantId: string): Promise<{ failedAt: Date; reason: string } | undefined> {
  const { rows } = await db.query<{ last_failed_at: Date; last_failure: string }>(
    `SELECT last_failed_at, last_failure FROM expiry_archive_outcomes
      WHERE tenant_id = $1 AND last_failed_at IS NOT NULL AND (last_succeeded_at IS NULL OR last_succeeded_at < last_failed_at)`,
    [tenantId],
  );
  return rows[0] ? { failedAt: rows[0].last_failed_at, reason: rows[0].last_failure } : undefined;
}
