import { canonicalJson } from '../client/canonicalJson.ts';
import type { RetentionPeriod } from '../config/valueFormats.ts';
import type { RetentionPolicyRecord } from './retentionStore.ts';

/**
 * Whether period `a` is at least as long as `b` from any starting date, the rule a locked policy's change
 * must pass: each part (months, days) at least as long, or `a` at its shortest (28-day months) at least
 * `b` at its longest (31-day months). `1y` and `12mo` are equal; `365d` is not at least `1y` (leap years),
 * so a locked `1y` cannot become `365d`. The same rule guards the table (audit_retention_at_least).
 */
export function isAtLeast(a: RetentionPeriod, b: RetentionPeriod): boolean {
  return (a.months >= b.months && a.days >= b.days) || a.months * 28 + a.days >= b.months * 31 + b.days;
}

/** What a resource declares for its tenant. */
export interface DeclaredPolicy {
  readonly tenantId: string;
  readonly period: RetentionPeriod;
  readonly locked: boolean;
  readonly archive: Readonly<Record<string, unknown>> | null;
}

/** Why a declaration was not applied; the stored policy (if any) stays in force. */
export type RefusalReason = 'LockedPolicyShortened' | 'LockedPolicyUnlocked' | 'LockedPolicyRemoved' | 'TenantHasPolicy' | 'TenantChanged';

/**
 * What becomes of a resource's declaration, given the policy stored for it (its own, or else its tenant's):
 * refused when another resource's policy holds the tenant, when the tenant would change, or when a locked
 * policy would be unlocked or shortened; unchanged when it says what is stored; applied otherwise.
 */
export function decideDeclaration(
  declared: DeclaredPolicy,
  managedBy: string,
  current: RetentionPolicyRecord | undefined,
):
  | { readonly kind: 'refused'; readonly reason: RefusalReason; readonly message: string }
  | { readonly kind: 'unchanged'; readonly policy: RetentionPolicyRecord }
  | { readonly kind: 'apply' } {
  const refusal = refusalOf(declared, managedBy, current);
  if (refusal) return { kind: 'refused', ...refusal };
  if (current && samePolicy(current, declared)) return { kind: 'unchanged', policy: current };
  return { kind: 'apply' };
}

/** What the deletion of a resource does to its stored policy: nothing when none, refused while locked. */
export function decideRelease(
  current: RetentionPolicyRecord | undefined,
):
  | { readonly kind: 'absent' }
  | { readonly kind: 'refused'; readonly reason: 'LockedPolicyRemoved'; readonly message: string; readonly enforced: RetentionPolicyRecord }
  | { readonly kind: 'remove'; readonly policy: RetentionPolicyRecord } {
  if (!current) return { kind: 'absent' };
  if (current.locked) {
    const message = `The retention policy of tenant ${current.tenantId} is locked at ${current.period.text}: it cannot be removed, and goes on applying.`;
    return { kind: 'refused', reason: 'LockedPolicyRemoved', message, enforced: current };
  }
  return { kind: 'remove', policy: current };
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
