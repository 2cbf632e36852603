import type { Database } from '../db/database.ts';
import { adminEvent, type Actor } from '../events/adminEvent.ts';
import type { EventWriter } from '../events/eventWriter.ts';
import type { Logger } from '../platform/logger.ts';
import type { ServiceMetrics } from '../platform/metrics.ts';
import { recordArchiveOutcome } from './archiveOutcomeStore.ts';
import { ArchiveError, type ArchiveStore } from './archiveStore.ts';
import { writeArchive, type ArchiveTarget, type WrittenArchive } from './expiryArchive.ts';

export type { TenantExpiry } from './expiryPass.ts';
import {
  archiveChunkBound,
  dropExpiredPartitions,
  expireBatch,
  expiryCandidates,
  partitionsDueForVacuum,
  planTenant,
  vacuumPartitions,
  type EventKey,
  type ExpiredRange,
} from './expiryStore.ts';
import type { RetentionPolicies } from './retentionPolicies.ts';
import {
  NOTHING_EXPIRED,
  addRange,
  archiveOutcomeOf,
  expiresAnything,
  expiryDetails,
  removedPerMonth,
  tenantPlan,
  type TenantExpiry,
} from './expiryPass.ts';
import type { DutyCycle } from '../platform/dutyCycle.ts';
import { expiryMetrics } from './expiryMetrics.ts';

export interface ExpiryOptions {
  readonly db: Database;
  readonly writer: EventWriter;
  readonly policies: RetentionPolicies;
  /** Events removed per batch (one transaction each): bounds the locks and WAL of a batch. */
  readonly batchSize: number;
  /**
   * The share of wall time a pass may spend removing events (RETENTION_DUTY_CYCLE): after each batch it rests
   * so that ingestion, on the same database and cores, keeps its latency (BENCHMARKS.md, expiry). 1: no rest.
   */
  readonly dutyCycle?: DutyCycle;
  readonly actor: Actor;
  readonly log: Logger;
  readonly metrics?: ServiceMetrics;
  /** Where archives go (ARCHIVE_S3_*); the bucket and prefix are each policy's. Absent: archiving fails. */
  readonly archiveStore?: ArchiveStore;
  /** Unheld events per archive object: bounds an object's size and the memory that builds it. */
  readonly archiveObjectEvents?: number;
}

const ARCHIVE_OBJECT_EVENTS = 50_000;

/**
 * Expiry: for every tenant, the period in force (its policy or RETENTION_DEFAULT) and the events older than
 * it that no legal hold covers. `plan` counts them per month without removing anything; `run` removes them
 * in bounded batches through the one path the events table allows (expiryStore.expireBatch), writes an
 * `audit.retention.expire` event to the tenant's trail (range and count), then drops the month partitions
 * nothing is kept in. A tenant whose policy asks for an archive expires range by range, each range only once
 * its archive object is written, read back and found identical (expiryArchive.ts); a failure expires nothing
 * more of that tenant in this pass and is logged, counted and returned.
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

  /** One pass now: every tenant (or one), then the partitions: those nothing is kept in dropped, the rest vacuumed. */
  async run(tenantId?: string): Promise<{ tenants: TenantExpiry[]; droppedPartitions: string[]; vacuumedPartitions: string[] }> {
    const { metrics } = this.options;
    try {
      const tenants: TenantExpiry[] = [];
      for (const plan of await this.plan(tenantId)) tenants.push(await this.expireOne(plan));
      const droppedPartitions = await this.options.db.transaction((client) => dropExpiredPartitions(client));
      if (droppedPartitions.length > 0)
        this.options.log.info({ partitions: droppedPartitions }, 'dropped month partitions nothing is kept in');
      const vacuumedPartitions = await this.vacuumWhatWasRemoved(tenants);
      if (metrics) expiryMetrics(metrics).runs.inc({ outcome: 'completed' });
      return { tenants, droppedPartitions, vacuumedPartitions };
    } catch (error) {
      if (metrics) expiryMetrics(metrics).runs.inc({ outcome: 'failed' });
      throw error;
    }
  }

  /**
   * Part of the pass's cost, not left to autovacuum (which may be off): the partitions it removed enough from
   * are vacuumed, so that the next pass, and any scan of the tenant's range, does not step over the dead rows.
   */
  private async vacuumWhatWasRemoved(tenants: readonly TenantExpiry[]): Promise<string[]> {
    const removed = removedPerMonth(tenants);
    if (removed.length === 0) return [];
    const { db, log } = this.options;
    const partitions = await partitionsDueForVacuum(db, removed);
    if (partitions.length === 0) return [];
    const started = performance.now();
    const connection = await db.connect();
    let broken: Error | undefined;
    try {
      await vacuumPartitions(connection, partitions);
    } catch (error) {
      broken = error as Error;
      throw error;
    } finally {
      connection.release(broken);
    }
    log.info({ partitions, seconds: Math.round(performance.now() - started) / 1000 }, 'vacuumed the partitions the pass removed from');
    return partitions;
  }

  private async planOne(tenantId: string): Promise<TenantExpiry> {
    const retention = await this.options.policies.effective(tenantId);
    if (!retention.keptSince) return tenantPlan(tenantId, retention, []);
    return tenantPlan(tenantId, retention, await planTenant(this.options.db, tenantId, retention.keptSince, this.options.dutyCycle));
  }

  private async expireOne(plan: TenantExpiry): Promise<TenantExpiry> {
    if (!expiresAnything(plan)) return plan;
    const { actor, log } = this.options;
    const done = plan.archive
      ? await this.archiveThenExpire(plan, plan.keptSince, plan.archive)
      : { expired: await this.expireUpTo(plan, plan.keptSince) };
    const result: TenantExpiry = { ...plan, expired: NOTHING_EXPIRED, ...done };
    // What the RetentionPolicy shows (Ready=False, ArchiveFailing) until a later pass archives again.
    const outcome = archiveOutcomeOf(result);
    if (outcome !== undefined) await recordArchiveOutcome(this.options.db, plan.tenantId, outcome);
    const event = adminEvent({
      tenantId: plan.tenantId,
      action: 'audit.retention.expire',
      actor,
      resourceType: 'retention_policy',
      resourceId: plan.tenantId,
      details: expiryDetails(result),
    });
    await this.options.writer.write([event], 'internal');
    log.info(
      { tenant_id: plan.tenantId, expired: result.expired?.count ?? 0, retain: plan.retain },
      'expired events past their retention period',
    );
    return result;
  }

  /** Archive objects of bounded size, oldest first; each range expires only once its object is read back intact. */
  private async archiveThenExpire(
    plan: TenantExpiry,
    keptSince: Date,
    target: ArchiveTarget,
  ): Promise<Pick<TenantExpiry, 'expired' | 'archives' | 'archiveFailure'>> {
    const { db, archiveStore, log, metrics } = this.options;
    const archives: WrittenArchive[] = [];
    let expired = NOTHING_EXPIRED;
    for (;;) {
      const bound = await archiveChunkBound(db, plan.tenantId, keptSince, this.options.archiveObjectEvents ?? ARCHIVE_OBJECT_EVENTS);
      if (!bound) return { expired, archives };
      let archive: WrittenArchive;
      try {
        if (!archiveStore) throw new ArchiveError('this process has no archive store');
        archive = await writeArchive(db, archiveStore, plan.tenantId, bound, target);
      } catch (error) {
        if (!(error instanceof ArchiveError)) throw error;
        if (metrics) expiryMetrics(metrics).archives.inc({ outcome: 'failed' });
        log.error(
          { tenant_id: plan.tenantId, bucket: target.bucket, reason: error.message },
          'archive before expiry failed: nothing more of the tenant expires this pass',
        );
        return { expired, archives, archiveFailure: error.message };
      }
      if (metrics) expiryMetrics(metrics).archives.inc({ outcome: 'written' });
      archives.push(archive);
      const range = await this.expireUpTo(plan, bound, archive.key);
      expired = addRange(expired, range);
      if (bound.getTime() >= keptSince.getTime()) return { expired, archives };
    }
  }

  /** Bounded batches until nothing before `keptSince` is left to remove. */
  private async expireUpTo(plan: TenantExpiry, keptSince: Date, archiveKey?: string): Promise<ExpiredRange> {
    const { db, batchSize, actor, metrics } = this.options;
    let total = NOTHING_EXPIRED;
    // Each batch chooses after the previous one's last event: rows removed earlier in the pass are not read
    // again, even while a long transaction elsewhere keeps their index entries from being marked dead.
    let resumeAfter: EventKey | undefined;
    for (;;) {
      const started = this.options.dutyCycle?.start();
      const batch = await expireBatch(db, {
        tenantId: plan.tenantId,
        keptSince,
        retain: plan.retain!,
        source: plan.source as 'policy' | 'default',
        limit: batchSize,
        requestedBy: actor.userId,
        archiveKey,
        resumeAfter,
      });
      resumeAfter = batch.lastKey ?? resumeAfter;
      total = addRange(total, batch);
      if (metrics) expiryMetrics(metrics).eventsExpired.inc(batch.count);
      if (batch.count < batchSize) return total;
      if (started !== undefined) await this.options.dutyCycle!.pauseAfter(started);
    }
  }
}
