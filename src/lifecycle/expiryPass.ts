import type { ArchiveTarget, WrittenArchive } from './expiryArchive.ts';
import type { ExpiredRange, MonthPlan } from './expiryStore.ts';
import type { EffectiveRetention } from './retentionPolicies.ts';

/**
 * The decisions of an expiry pass (expiry.ts), without I/O: what a tenant's plan is, whether it expires
 * anything, how the ranges removed batch by batch add up, what the RetentionPolicy's archive outcome becomes,
 * which months to vacuum, and what the pass records in the tenant's trail. Expiry reads the policies and the
 * events, removes, archives and writes; its rules are here, tested without a database.
 *
 * - A tenant kept forever (no policy, no RETENTION_DEFAULT) is skipped: nothing of it expires.
 * - A tenant expires only what its plan counts as expiring (past its period, held by no legal hold).
 * - Ranges add up: the count summed, the first event the earliest batch's first, the last the latest's last.
 * - The archive outcome is recorded when the pass archived (cleared) or failed to (the failure); a tenant that
 *   had nothing to archive leaves the last outcome as it was.
 * - The months a pass removed from (summed over tenants) are the ones whose partitions may need a vacuum.
 */

/** What one tenant's part of a pass found (plan) or did (run). */
export interface TenantExpiry {
  readonly tenantId: string;
  readonly retain: string | null;
  readonly source: EffectiveRetention['source'];
  readonly keptSince: Date | null;
  /** Why nothing of the tenant expires, when nothing does by rule (kept forever). */
  readonly skipped?: 'kept_forever';
  /** The policy's spec.archive: each range is archived, read back and checked before it expires. */
  readonly archive?: ArchiveTarget;
  readonly months: readonly MonthPlan[];
  /** run only: what was removed. */
  readonly expired?: ExpiredRange;
  /** run only: the archive objects written (and read back) for what was removed. */
  readonly archives?: readonly WrittenArchive[];
  /** run only: why the rest of the range was not archived, so not expired. */
  readonly archiveFailure?: string;
}

export const NOTHING_EXPIRED: ExpiredRange = { count: 0, first: null, last: null };

/** A tenant's plan before its months are counted: skipped when kept forever, with its archive target if any. */
export function tenantPlan(tenantId: string, retention: EffectiveRetention, months: readonly MonthPlan[]): TenantExpiry {
  const base = { tenantId, retain: retention.period?.text ?? null, source: retention.source, keptSince: retention.keptSince ?? null };
  if (!retention.keptSince) return { ...base, skipped: 'kept_forever', months: [] };
  return retention.archive ? { ...base, archive: retention.archive as unknown as ArchiveTarget, months } : { ...base, months };
}

/** Whether the plan has events to remove under a period in force. */
export function expiresAnything(plan: TenantExpiry): plan is TenantExpiry & { readonly keptSince: Date; readonly retain: string } {
  const expiring = plan.months.reduce((sum, month) => sum + month.expiring, 0);
  return !(plan.skipped || expiring === 0 || !plan.keptSince || !plan.retain || plan.source === 'none');
}

/** Two ranges removed one after the other, as one. */
export function addRange(total: ExpiredRange, next: ExpiredRange): ExpiredRange {
  return { count: total.count + next.count, first: total.first ?? next.first, last: next.last ?? total.last };
}

/** What to record as the tenant's archive outcome: the failure, null (archived: any earlier failure is over), or nothing. */
export function archiveOutcomeOf(result: TenantExpiry): string | null | undefined {
  if (result.archiveFailure) return result.archiveFailure;
  return (result.archives?.length ?? 0) > 0 ? null : undefined;
}

/** Events removed per month by the tenants that removed any, in the order the months first appear. */
export function removedPerMonth(tenants: readonly TenantExpiry[]): Array<{ month: Date; count: number }> {
  const removed = new Map<number, { month: Date; count: number }>();
  for (const tenant of tenants) {
    if ((tenant.expired?.count ?? 0) === 0) continue;
    for (const month of tenant.months) {
      if (month.expiring === 0) continue;
      const entry = removed.get(month.month.getTime()) ?? { month: month.month, count: 0 };
      entry.count += month.expiring;
      removed.set(month.month.getTime(), entry);
    }
  }
  return [...removed.values()];
}

/** The details of the run's audit.retention.expire event: which period, from where, the range removed and how many. */
export function expiryDetails(result: TenantExpiry): Record<string, unknown> {
  const expired = result.expired ?? NOTHING_EXPIRED;
  return {
    retain: result.retain,
    source: result.source,
    kept_since: result.keptSince?.toISOString() ?? null,
    count: expired.count,
    first: expired.first?.toISOString() ?? null,
    last: expired.last?.toISOString() ?? null,
    held: result.months.reduce((sum, month) => sum + month.held, 0),
    ...(result.archive
      ? {
          archives: (result.archives ?? []).map((archive) => ({ bucket: archive.bucket, key: archive.key, count: archive.count })),
          archive_failure: result.archiveFailure ?? null,
        }
      : {}),
  };
}
