import { canonicalJson } from '../client/canonicalJson.ts';
import { currentArchiveFailure } from './archiveOutcomeStore.ts';
import type { RetentionPeriod } from '../config/valueFormats.ts';
import type { Queryable } from '../db/database.ts';
import { adminEvent, type Actor } from '../events/adminEvent.ts';
import type { EventWriter } from '../events/eventWriter.ts';
import { isAtLeast } from './retentionRules.ts';
import {
  deleteRetentionPolicy,
  findManagedRetentionPolicy,
  findRetentionPolicy,
  retentionCutoff,
  upsertRetentionPolicy,
  type RetentionPolicyRecord,
} from './retentionStore.ts';

/** What a resource declares for its tenant. */
export interface DeclaredPolicy {
  readonly tenantId: string;
  readonly period: RetentionPeriod;
  readonly locked: boolean;
  readonly archive: Readonly<Record<string, unknown>> | null;
}

/** Why a declaration was not applied; the stored policy (if any) stays in force. */
type RefusalReason = 'LockedPolicyShortened' | 'LockedPolicyUnlocked' | 'LockedPolicyRemoved' | 'TenantHasPolicy' | 'TenantChanged';

export type DeclareOutcome =
  | { readonly kind: 'applied'; readonly policy: RetentionPolicyRecord; readonly previous: RetentionPolicyRecord | undefined }
  | { readonly kind: 'unchanged'; readonly policy: RetentionPolicyRecord }
  | {
      readonly kind: 'refused';
      readonly reason: RefusalReason;
      readonly message: string;
      readonly enforced: RetentionPolicyRecord | undefined;
    };

export type ReleaseOutcome =
  | { readonly kind: 'removed' | 'absent' }
  | {
      readonly kind: 'refused';
      readonly reason: 'LockedPolicyRemoved';
      readonly message: string;
      readonly enforced: RetentionPolicyRecord;
    };

/** The period that applies to a tenant now, and where it comes from. */
export interface EffectiveRetention {
  readonly tenantId: string;
  /** `policy`: the tenant's own; `default`: RETENTION_DEFAULT; `none`: kept forever. */
  readonly source: 'policy' | 'default' | 'none';
  readonly period: RetentionPeriod | undefined;
  readonly locked: boolean;
  readonly archive: Readonly<Record<string, unknown>> | null;
  /** Events strictly before this instant are past their period; undefined when kept forever. */
  readonly keptSince: Date | undefined;
  readonly updatedAt: Date | undefined;
}

export interface RetentionPoliciesOptions {
  readonly db: Queryable;
  /** Changes, each with its admin.retention.* event in one transaction. */
  readonly writer: EventWriter;
  /** RETENTION_DEFAULT; undefined keeps tenants without a policy forever. */
  readonly defaultPeriod: RetentionPeriod | undefined;
}

/**
 * Tenants' retention policies: what applies to a tenant, and the changes a RetentionPolicy resource asks
 * for. A locked policy is lengthened, never shortened, unlocked or removed: such a change is refused with
 * a reason and the stored policy goes on applying (migrations/017 refuses it in the database as well).
 * Each change is an admin.retention.* event in the tenant's own trail, written with it.
 */
export class RetentionPolicies {
  private readonly options: RetentionPoliciesOptions;

  constructor(options: RetentionPoliciesOptions) {
    this.options = options;
  }

  async effective(tenantId: string): Promise<EffectiveRetention> {
    const { db, defaultPeriod } = this.options;
    const policy = await findRetentionPolicy(db, tenantId);
    const period = policy?.period ?? defaultPeriod;
    return {
      tenantId,
      source: policy ? 'policy' : defaultPeriod ? 'default' : 'none',
      period,
      locked: policy?.locked ?? false,
      archive: policy?.archive ?? null,
      keptSince: period ? await retentionCutoff(db, period) : undefined,
      updatedAt: policy?.updatedAt,
    };
  }

  /** The tenant's archive failure when no expiry pass archived since (shown on its RetentionPolicy). */
  archiveFailure(tenantId: string): Promise<{ failedAt: Date; reason: string } | undefined> {
    return currentArchiveFailure(this.options.db, tenantId);
  }

  /** Applies what the resource `managedBy` declares, unless a locked policy forbids it. */
  declare(declared: DeclaredPolicy, managedBy: string, actor: Actor): Promise<DeclareOutcome> {
    return this.options.writer.recordWith<DeclareOutcome>('internal', async (client) => {
      const mine = await findManagedRetentionPolicy(client, managedBy, true);
      const current = mine ?? (await findRetentionPolicy(client, declared.tenantId, true));
      const refusal = refusalOf(declared, managedBy, current);
      if (refusal) return { result: { kind: 'refused', ...refusal, enforced: current }, events: [] };
      if (current && samePolicy(current, declared)) return { result: { kind: 'unchanged', policy: current }, events: [] };
      const policy = await upsertRetentionPolicy(client, { ...declared, managedBy });
      return {
        result: { kind: 'applied', policy, previous: current },
        events: [policyEvent('admin.retention.set', policy, actor, current)],
      };
    });
  }

  /** Removes the resource's policy (its deletion); a locked one stays and goes on applying. */
  release(managedBy: string, actor: Actor): Promise<ReleaseOutcome> {
    return this.options.writer.recordWith<ReleaseOutcome>('internal', async (client) => {
      const current = await findManagedRetentionPolicy(client, managedBy, true);
      if (!current) return { result: { kind: 'absent' }, events: [] };
      if (current.locked) {
        const message = `The retention policy of tenant ${current.tenantId} is locked at ${current.period.text}: it cannot be removed, and goes on applying.`;
        return { result: { kind: 'refused', reason: 'LockedPolicyRemoved', message, enforced: current }, events: [] };
      }
      await deleteRetentionPolicy(client, managedBy);
      return { result: { kind: 'removed' }, events: [policyEvent('admin.retention.remove', current, actor, current)] };
    });
  }
}

function refusalOf(
  declared: DeclaredPolicy,
  managedBy: string,
  current: RetentionPolicyRecord | undefined,
): { reason: RefusalReason; message: string } | undefined {
  if (!current) return undefined;
  if (current.managedBy !== managedBy) {
    return {
      reason: 'TenantHasPolicy',
      message: `Tenant ${declared.tenantId} already has a retention policy, declared by another resource (${current.managedBy}); a tenant has one policy.`,
    };
  }
  if (current.tenantId !== declared.tenantId) {
    return { reason: 'TenantChanged', message: `This policy applies to tenant ${current.tenantId}; its tenant cannot change.` };
  }
  if (!current.locked) return undefined;
  if (!declared.locked) {
    return {
      reason: 'LockedPolicyUnlocked',
      message: `The policy is locked at ${current.period.text}: it cannot be unlocked. ${current.period.text} goes on applying.`,
    };
  }
  if (!isAtLeast(declared.period, current.period)) {
    return {
      reason: 'LockedPolicyShortened',
      message: `The policy is locked at ${current.period.text}: ${declared.period.text} would shorten it, which a locked policy never allows. ${current.period.text} goes on applying.`,
    };
  }
  return undefined;
}

function samePolicy(current: RetentionPolicyRecord, declared: DeclaredPolicy): boolean {
  return (
    current.period.text === declared.period.text &&
    current.locked === declared.locked &&
    // jsonb returns keys in its own order: compared canonically, or every resync would see a change.
    canonicalJson(current.archive) === canonicalJson(declared.archive)
  );
}

function policyEvent(action: string, policy: RetentionPolicyRecord, actor: Actor, previous: RetentionPolicyRecord | undefined) {
  return adminEvent({
    tenantId: policy.tenantId,
    action,
    actor,
    resourceType: 'retention_policy',
    resourceId: policy.tenantId,
    details: {
      retain: policy.period.text,
      locked: policy.locked,
      archive: policy.archive !== null,
      ...(previous ? { previous_retain: previous.period.text, previous_locked: previous.locked } : {}),
    },
  });
}
