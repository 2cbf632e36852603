import type { Database } from '../db/database.ts';
import { adminEvent, type Actor } from '../events/adminEvent.ts';
import type { EventWriter } from '../events/eventWriter.ts';
import type { Logger } from '../platform/logger.ts';
import type { ServiceMetrics } from '../platform/metrics.ts';
import { dropExpiredPartitions, expireBatch, expiryCandidates, planTenant, type ExpiredRange, type MonthPlan } from './expiryStore.ts';
import type { EffectiveRetention, RetentionPolicies } from './retentionPolicies.ts';

/** What one tenant's part of a pass found (plan) or did (run). */
export interface TenantExpiry {
  readonly tenantId: string;
  readonly retain: string | null;
  readonly source: EffectiveRetention['source'];
  readonly keptSince: Date | null;
  /** Why nothing of the tenant expires, when nothing does by rule (kept forever, archive asked for). */
  readonly skipped?: 'kept_forever' | 'archive_not_supported';
  readonly months: readonly MonthPlan[];
  /** run only: what was removed. */
  readonly expired?: ExpiredRange;
}

export interface ExpiryOptions {
  readonly db: Database;
  readonly writer: EventWriter;
  readonly policies: RetentionPolicies;
  /** Events removed per batch (one transaction each): bounds the locks and WAL of a batch. */
  readonly batchSize: number;
  readonly actor: Actor;
  readonly log: Logger;
  readonly metrics?: ServiceMetrics;
}

/**
 * Expiry: for every tenant, the period in force (its policy or RETENTION_DEFAULT) and the events older than
 * it that no legal hold covers. `plan` counts them per month without removing anything; `run` removes them
 * in bounded batches through the one path the events table allows (expiryStore.expireBatch), writes an
 * `audit.retention.expire` event to the tenant's trail (range and count), then drops the month partitions
 * nothing is kept in. A tenant whose policy asks for an archive first expires nothing (not built yet).
 */
export class Expiry {
  private readonly options: ExpiryOptions;

  constructor(options: ExpiryOptions) {
    this.options = options;
  }

  async plan(tenantId?: string): Promise<TenantExpiry[]> {
    const plans: TenantExpiry[] = [];
    for (const tenant of await expiryCandidates(this.options.db, tenantId)) plans.push(await this.planOne(tenant));
    return plans;
  }

  /** One pass now: every tenant (or one), then the partitions. */
  async run(tenantId?: string): Promise<{ tenants: TenantExpiry[]; droppedPartitions: string[] }> {
    const { metrics } = this.options;
    try {
      const tenants: TenantExpiry[] = [];
      for (const plan of await this.plan(tenantId)) tenants.push(await this.expireOne(plan));
      const droppedPartitions = await this.options.db.transaction((client) => dropExpiredPartitions(client));
      if (droppedPartitions.length > 0)
        this.options.log.info({ partitions: droppedPartitions }, 'dropped month partitions nothing is kept in');
      metrics?.expiryRuns.inc({ outcome: 'completed' });
      return { tenants, droppedPartitions };
    } catch (error) {
      metrics?.expiryRuns.inc({ outcome: 'failed' });
      throw error;
    }
  }

  private async planOne(tenantId: string): Promise<TenantExpiry> {
    const retention = await this.options.policies.effective(tenantId);
    const base = { tenantId, retain: retention.period?.text ?? null, source: retention.source, keptSince: retention.keptSince ?? null };
    if (!retention.keptSince) return { ...base, skipped: 'kept_forever', months: [] };
    if (retention.archive) return { ...base, skipped: 'archive_not_supported', months: [] };
    return { ...base, months: await planTenant(this.options.db, tenantId, retention.keptSince) };
  }

  private async expireOne(plan: TenantExpiry): Promise<TenantExpiry> {
    const expiring = plan.months.reduce((sum, month) => sum + month.expiring, 0);
    if (plan.skipped || expiring === 0 || !plan.keptSince || !plan.retain || plan.source === 'none') return plan;
    const { db, batchSize, actor, log, metrics } = this.options;
    let total: ExpiredRange = { count: 0, first: null, last: null };
    for (;;) {
      const batch = await expireBatch(db, {
        tenantId: plan.tenantId,
        keptSince: plan.keptSince,
        retain: plan.retain,
        source: plan.source,
        limit: batchSize,
        requestedBy: actor.userId,
      });
      total = {
        count: total.count + batch.count,
        first: total.first ?? batch.first,
        last: batch.last ?? total.last,
      };
      metrics?.eventsExpired.inc(batch.count);
      if (batch.count < batchSize) break;
    }
    await this.options.writer.write([expiryEvent(plan, total, actor)], 'internal');
    log.info({ tenant_id: plan.tenantId, expired: total.count, retain: plan.retain }, 'expired events past their retention period');
    return { ...plan, expired: total };
  }
}

/** The run's record in the tenant's trail: which period, from where, the range removed and how many. */
function expiryEvent(plan: TenantExpiry, expired: ExpiredRange, actor: Actor) {
  return adminEvent({
    tenantId: plan.tenantId,
    action: 'audit.retention.expire',
    actor,
    resourceType: 'retention_policy',
    resourceId: plan.tenantId,
    details: {
      retain: plan.retain,
      source: plan.source,
      kept_since: plan.keptSince?.toISOString() ?? null,
      count: expired.count,
      first: expired.first?.toISOString() ?? null,
      last: expired.last?.toISOString() ?? null,
      held: plan.months.reduce((sum, month) => sum + month.held, 0),
    },
  });
}
