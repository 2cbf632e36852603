import { currentArchiveFailure } from './archiveOutcomeStore.ts';
import type { RetentionPeriod } from '../config/valueFormats.ts';
import type { Queryable } from '../db/database.ts';
import { adminEvent, type Actor } from '../events/adminEvent.ts';
import type { EventWriter } from '../events/eventWriter.ts';
import { decideDeclaration, decideRelease, type DeclaredPolicy, type RefusalReason } from './retentionRules.ts';
import {
  deleteRetentionPolicy,
  findManagedRetentionPolicy,
  findRetentionPolicy,
  retentionCutoff,
  upsertRetentionPolicy,
  type RetentionPolicyRecord,
} from './retentionStore.ts';

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
      const decision = decideDeclaration(declared, managedBy, current);
      if (decision.kind === 'refused') return { result: { ...decision, enforced: current }, events: [] };
      if (decision.kind === 'unchanged') return { result: decision, events: [] };
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
      const decision = decideRelease(current);
      if (decision.kind !== 'remove') return { result: decision, events: [] };
      await deleteRetentionPolicy(client, managedBy);
      return { result: { kind: 'removed' }, events: [policyEvent('admin.retention.remove', decision.policy, actor, decision.policy)] };
    });
  }
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
